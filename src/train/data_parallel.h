// Data parallelism in the training step (Megatron's DDP role): every rank of the data group runs
// its share of the global batch's micro-batches, then the gradients are summed over the group so
// each rank holds the gradient of the whole global batch, scaled by the global normaliser (the
// loss tokens of every rank's micro-batches, reduced before the first backward). The update is
// then the same on every rank.
//  - DataParallelSource: rank r of D takes micro-batches r, r + D, r + 2D, ... of the stream the
//    single-process run reads (Megatron's sampler: each round of D micro-batches, one a rank), so
//    the union is the same global batch and the cursor is the same on every rank (one data
//    state in the checkpoint). Every rank reads the D micro-batches of a round and keeps its own:
//    a read of token ids, small beside a forward/backward.
//  - GradReducer: gradients in the store's flat buffer (ParamStore::make_grads_contiguous), summed
//    over the group in buckets of up to bucket_elements (Megatron's bucket_size, 40M), in place.
// With a group of one both are the identity: the single-process run is this code, not another.
#pragma once
#include <memory>

#include "model/param.h"
#include "parallel/communicator.h"
#include "train/batch_source.h"
#include "train/training_loop.h"

namespace nemotron::train {

class DataParallelSource final : public BatchSource {
 public:
  // `inner` must outlive this source.
  DataParallelSource(BatchSource& inner, int rank, int size);
  model::Batch next() override;
  nlohmann::json state() const override { return inner_.state(); }
  void restore(const nlohmann::json& state) override { inner_.restore(state); }
  std::string describe() const override;

 private:
  BatchSource& inner_;
  int rank_, size_;
};

// The rank's part in the loop (LoopHooks' seam) from hooks.groups: only the first rank writes
// logs, metrics and checkpoints (data parallelism keeps the same weights, optimizer state and
// data cursor on every rank); every rank waits at the save barrier until the save is committed;
// stop_requested answers the same on every rank (a signal seen by any rank stops them all at the
// same step). Unchanged for one process.
LoopHooks rank_hooks(LoopHooks hooks);

class GradReducer {
 public:
  static constexpr int64_t kDefaultBucketElements = 40'000'000;
  // Makes `params`' gradients contiguous (ParamStore::make_grads_contiguous).
  GradReducer(model::ParamStore& params, parallel::Communicator& group,
              int64_t bucket_elements = kDefaultBucketElements);
  // Sums every gradient over the group, in place. Collective: every member calls it once per step.
  void all_reduce();
  int64_t bucket_count() const { return buckets_; }
  int64_t buffer_elements() const { return params_.grad_buffer().numel(); }

 private:
  model::ParamStore& params_;
  parallel::Communicator& group_;
  int64_t bucket_elements_;
  int64_t buckets_ = 0;
};

}  // namespace nemotron::train
