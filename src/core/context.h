// What every op and block receives instead of globals: the backend that owns the compute
// device (and, for CUDA, its stream), the activation arena, the compute dtype, and an optional
// op profiler (core/op_profiler.h).
#pragma once
#include "core/backend.h"
#include "core/tensor.h"
#include "core/workspace.h"

namespace nemotron {

struct OpProfiler;

struct Context {
  Backend* backend = &host_backend();
  Workspace* workspace = nullptr;   // activations come from here when set
  DType compute_dtype = DType::f32; // dtype of activations the model creates
  OpProfiler* profiler = nullptr;   // when set, ops report their phases (see OpScope)

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
