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
//    over the group in buckets (train/grad_buckets.h; Megatron's bucket_size, 40M), in place.
//    Or, for the distributed optimizer (train/adamw.h), reduce-scattered bucket by bucket: each
//    bucket is sharded over the group, so each rank receives the sum of its slice of it.
// With a group of one both are the identity: the single-process run is this code, not another.
#pragma once
#include <memory>

#include "model/hybrid_model.h"
#include "model/param.h"
#include "parallel/communicator.h"
#include "train/adamw.h"
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
// logs and metrics and publishes checkpoints (each rank writes its own pieces of a sharded
// checkpoint, which the first commits); every rank waits at the save barrier after the commit;
// stop_requested answers the same on every rank (a signal seen by any rank stops them all at the
// same step). Unchanged for one process.
LoopHooks rank_hooks(LoopHooks hooks);

// Sums the gradients over the data group in buckets of the flat gradient buffer, overlapped with
// the backward where the group allows it (NCCL: a second stream): buckets are contiguous ranges
// of the buffer in reverse registration order (head and MTP, then the trunk's last layer down to
// its first, the embedding last), and a bucket is queued as soon as the backward of the last
// micro-batch finished every layer it holds (the layer hook, Context::on_layer_backward): an
// all-reduce, or with a sharded optimizer a reduce-scatter into the rank's slice. What is left is
// queued at finish(), which then makes the compute stream wait for all of it.
class GradReducer {
 public:
  static constexpr int64_t kDefaultBucketElements = kDefaultGradBucketElements;
  // Makes `net`'s gradients contiguous (ParamStore::make_grads_contiguous). With `sharded` (a
  // distributed optimizer over `group`, which laid out the buffer and its buckets): each bucket
  // is reduce-scattered into its slice of sharded->shard_grads() instead, bucket_elements unused.
  // `expert_data`: the group an expert-parallel expert's gradient is summed over (its copies;
  // model::Param::is_expert); null or a group of one: nothing to sum.
  // `tensor`: the tensor-parallel group, over which the gradients of whole parameters fed by
  // partial sums (model::ParamShard::grad_partial_over_tensor) are summed too; null or a group of
  // one: none.
  // `context`: with `sharded` only, the context-parallel group, over which each bucket is summed
  // before its reduce-scatter over `group` (without it, `group` is the data x context group).
  // The sums over `tensor` and `context` run on the compute stream as each bucket is queued, so
  // they precede its reduce-scatter.
  GradReducer(model::HybridModel& net, parallel::Communicator& group, int64_t bucket_elements = kDefaultBucketElements,
              const AdamW* sharded = nullptr, parallel::Communicator* expert_data = nullptr,
              parallel::Communicator* tensor = nullptr, parallel::Communicator* context = nullptr);
  // Before the last micro-batch's backward: the hook to hand the trunk (null for a group of one).
  const std::function<void(int64_t layer)>* layer_hook();
  // After the last backward: queues the buckets not yet queued, and waits for every one.
  void finish();
  // All at once, after the backward (no overlap): begin nothing, then finish().
  void all_reduce() { finish(); }
  int64_t bucket_count() const { return static_cast<int64_t>(buckets_.size()); }
  int64_t buffer_elements() const { return params_.grad_buffer().numel(); }
  // Buckets queued from the layer hook (overlapped) in the last step.
  int64_t overlapped_buckets() const { return overlapped_; }

 private:
  struct Bucket {
    GradBucket range;
    int64_t ready_after = 0;  // queued once layer `ready_after` finished (-1: only at finish)
    std::vector<model::Param*> partial;  // its parameters whose gradients are partial over tensor
    bool queued = false;
  };
  void queue(Bucket& b);
  bool sums_partial() const { return tensor_ && tensor_->size() > 1; }
  model::ParamStore& params_;
  parallel::Communicator& group_;
  parallel::Communicator* expert_data_;
  parallel::Communicator* tensor_;
  parallel::Communicator* context_;
  Tensor scatter_into_;  // sharded: AdamW::shard_grads()
  std::vector<Bucket> buckets_;  // in the order the backward completes them
  std::function<void(int64_t)> hook_;
  int64_t overlapped_ = 0;
};

}  // namespace nemotron::train
