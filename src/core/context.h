// What every op and block receives instead of globals: the backend that owns the compute
// device (and, for CUDA, its stream), the activation arena, the compute dtype, an optional
// op profiler (core/op_profiler.h) and the run's process groups (parallel/process_groups.h).
#pragma once
#include <functional>
#include <vector>

#include "core/backend.h"
#include "core/tensor.h"
#include "core/workspace.h"

namespace nemotron {

struct OpProfiler;
namespace parallel {
struct ProcessGroups;
}

// The randomness of a training forward/backward (LoRA's adapter dropout, model/lora.h). The
// training step sets it around each micro-batch, keyed by the run's seed, the iteration and the
// micro-batch's index in the global batch (the same under data parallelism), so masks are reproducible (exact resume) and a backward regenerates its
// forward's masks; inactive (evaluation, generation, inference, benchmarks of them) drops nothing.
// context_sequences: the micro-batch's B rows when each holds only this context rank's chunks
// (model/context_split.h), so masks are drawn at each token's place in its whole row; 0: whole rows.
struct DropoutKey {
  bool active = false;
  uint64_t seed = 0, iteration = 0, micro = 0;
  int64_t context_sequences = 0;
};

struct Context {
  Backend* backend = &host_backend();
  Workspace* workspace = nullptr;   // activations come from here when set
  DType compute_dtype = DType::f32; // dtype of activations the model creates
  OpProfiler* profiler = nullptr;   // when set, ops report their phases (see OpScope)
  DropoutKey dropout = {};          // training micro-batches only (see DropoutKey)
  // The run's groups (data, expert, ...); null = one process, every group of size 1. Model code
  // reads the group it needs (parallel::groups_of) and nothing else of the layout.
  const parallel::ProcessGroups* groups = nullptr;
  // Called by the trunk's backward after layer i's parameter gradients are complete (the
  // training step sets it for the last micro-batch, where data parallelism starts reducing the
  // gradients of finished layers while the earlier layers' backward still runs); null: none.
  const std::function<void(int64_t layer)>* on_layer_backward = nullptr;
  // Tensor parallelism: overlap the split mixers' collectives with their compute (model/
  // layer_stack.cpp); false queues each where it falls on the compute stream (the baseline).
  bool overlap_tensor_comm = true;
  // Set by the layer stack around a split mixer's backward: Linear's backward queues its weight-
  // gradient GEMMs here instead of running them, and the stack runs them (in order, with its own
  // context) while the
  // mixer's input-gradient all-reduce is in flight (Megatron's async gradient all-reduce).
  std::vector<std::function<void(Context&)>>* deferred_weight_grads = nullptr;
  // Set by the layer stack around a split mixer's forward on a device: the mixer's row-parallel
  // output projection (Linear::forward_output) computes its rows in chunks and hands each here once
  // computed, so the chunk's all-reduce runs while the next one computes.
  const std::function<void(Tensor& rows)>* on_output_rows = nullptr;

  // Scratch/activation tensors: from the arena when there is one, else from the backend.
  Tensor empty(Shape shape, DType dtype) const {
    return workspace ? workspace->alloc(std::move(shape), dtype) : Tensor::empty(std::move(shape), dtype, *backend);
  }
  Tensor zeros(Shape shape, DType dtype) const {
    Tensor t = empty(std::move(shape), dtype);
    t.zero_();
    return t;
  }
  Tensor empty(Shape shape) const { return empty(std::move(shape), compute_dtype); }
  Tensor zeros(Shape shape) const { return zeros(std::move(shape), compute_dtype); }
};

}  // namespace nemotron
