// The engine's decode step as CUDA graphs (issue 26 §7): at small models a step is ~500 kernel
// launches and is bound by them, not by the weights it streams. A step whose every sequence
// appends one token and draws on the GPU is padded to a batch-size bucket (1, 2, 4, ... up to the
// power of two >= max_slots), its inputs are copied into the bucket's fixed device buffers, and
// the bucket's graph (every layer, the final norm, the head and the sampler) is replayed: one
// launch, one wait for the drawn tokens. Rules it keeps:
//  - padded rows decode token 0 at position 0 of a scratch slot and scratch KV block that the
//    CachedStepModel reserves and the engine never sees: they touch no live page or state;
//  - every address the graph uses is its own across replays: the step's memory comes from a
//    private pool of the CudaBackend (a bump arena, rewound so that the capture reuses the
//    addresses of the eager warm-up step that sized it) and the inputs and outputs live in
//    buffers the bucket owns;
//  - nothing in the step waits for the stream (the ids are checked on the host, the batch's index
//    arrays go up in one copy before the launch); a model whose step cannot be captured (an op
//    that reads back, e.g. the MoE expert counts outside the bfloat16 grouped GEMM, or expert
//    parallelism's dispatch) runs eagerly: the first failed capture turns graphs off for it.
//    Tensor parallelism's NCCL collectives are captured with the kernels (every rank captures the
//    same bucket at the same step, so the collectives still meet).
// The first step of each bucket runs eagerly (it is a real step) and is then captured.
#pragma once
#if NEMOTRON_CUDA
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/context.h"
#include "model/decode_state.h"
#include "model/hybrid_model.h"
#include "ops/sample_rows.h"

namespace nemotron::engine {

class DecodeGraphs {
 public:
  // `state` has a slot `scratch_slot` holding one token in KV block `scratch_block` (the padded
  // rows' own); sequences are at most `max_seq_len` tokens in blocks of `block_size`.
  DecodeGraphs(model::HybridModel& model, Context ctx, model::DecodeState& state, int64_t max_slots,
               int64_t scratch_slot, int32_t scratch_block);
  ~DecodeGraphs();
  DecodeGraphs(const DecodeGraphs&) = delete;
  DecodeGraphs& operator=(const DecodeGraphs&) = delete;

  // Whether steps still go through graphs (false after a capture failed; see failure()).
  bool enabled() const { return enabled_; }
  const std::string& failure() const { return failure_; }
  // Appends tokens[i] (one each) to slot slots[i] and draws row i under rows[i] from its logits,
  // as CachedStepModel::extend_and_sample does without prefix sharing; the state is committed.
  std::vector<ops::TokenDraw> step(const std::vector<int64_t>& slots, const std::vector<std::vector<int32_t>>& tokens,
                                   std::span<const ops::RowSampling> rows) {
    launch(slots, tokens, rows);
    return collect();
  }
  // step() in two halves: launch() queues the step on the stream and returns without waiting
  // (the caller's host work then overlaps the GPU's), collect() waits for the draws and commits
  // the state. One step in flight at a time; the state must not change in between.
  void launch(const std::vector<int64_t>& slots, const std::vector<std::vector<int32_t>>& tokens,
              std::span<const ops::RowSampling> rows);
  std::vector<ops::TokenDraw> collect();
  bool in_flight() const { return pending_ != nullptr; }
  int64_t replays() const { return replays_; }    // steps run by a graph launch
  int64_t captures() const { return captures_; }  // graphs captured (one per bucket seen)

 private:
  struct Bucket;
  Bucket& bucket_for(int64_t rows);
  // The step on the bucket's buffers (queued on the stream, nothing read back).
  void run(Bucket& b);

  model::HybridModel& model_;
  Context ctx_;
  model::DecodeState& state_;
  int64_t max_slots_, scratch_slot_;
  int32_t scratch_block_;
  int64_t table_width_;  // KV blocks a sequence can hold: every bucket's block_table width
  std::vector<std::unique_ptr<Bucket>> buckets_;  // by log2 of the bucket's rows
  // The step launched and not yet collected: its bucket, rows and plan.
  Bucket* pending_ = nullptr;
  int64_t pending_rows_ = 0;
  model::DecodeBatch pending_plan_;
  bool enabled_ = true;
  std::string failure_;
  int64_t replays_ = 0, captures_ = 0;
};

}  // namespace nemotron::engine
#endif
