#include "train/data_parallel.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "train/grad_buckets.h"

namespace nemotron::train {

DataParallelSource::DataParallelSource(BatchSource& inner, int rank, int size)
    : inner_(inner), rank_(rank), size_(size) {
  NM_CHECK(size >= 1 && rank >= 0 && rank < size, "data-parallel rank {} of {}", rank, size);
}

model::Batch DataParallelSource::next() {
  model::Batch mine;
  for (int r = 0; r < size_; ++r) {
    model::Batch b = inner_.next();
    if (r == rank_) mine = std::move(b);
  }
  return mine;
}

std::string DataParallelSource::describe() const {
  if (size_ == 1) return inner_.describe();
  return fmt::format("{}; data-parallel rank {} of {} takes every {}th micro-batch", inner_.describe(), rank_, size_,
                     size_);
}

LoopHooks rank_hooks(LoopHooks hooks) {
  if (!hooks.groups || !hooks.groups->distributed()) return hooks;
  const std::shared_ptr<const parallel::ProcessGroups> g = hooks.groups;
  const bool first = g->is_first_rank();
  hooks.writes_logs = hooks.writes_logs && first;
  hooks.writes_checkpoints = hooks.writes_checkpoints && first;
  std::function<void()> inner_barrier = hooks.save_barrier;
  hooks.save_barrier = [g, inner_barrier] {
    if (inner_barrier) inner_barrier();
    g->world->barrier();
  };
  if (hooks.stop_requested) {
    std::function<std::string()> inner = hooks.stop_requested;
    hooks.stop_requested = [g, inner] {
      std::string why = inner();
      const double any = g->world->all_reduce_host(why.empty() ? 0.0 : 1.0, parallel::ReduceOp::max);
      if (any > 0 && why.empty()) why = "stop requested on another rank";
      return why;
    };
  }
  return hooks;
}

namespace {

// The trunk layer whose backward completes a parameter's gradient (model::Param::trunk_layer); everything
// else but the embedding (final norm, head, the MTP blocks) is complete before the trunk's
// backward starts: `before_trunk`; the embedding only at the very end: -1.
int64_t ready_after(const model::Param& p, const model::Param& embedding, int64_t before_trunk) {
  if (&p == &embedding) return -1;
  const int64_t layer = p.trunk_layer;
  return layer >= 0 ? layer : before_trunk;
}

}  // namespace

GradReducer::GradReducer(model::HybridModel& net, parallel::Communicator& group, int64_t bucket_elements,
                         const AdamW* sharded, parallel::Communicator* expert_data, parallel::Communicator* tensor,
                         parallel::Communicator* context)
    : params_(net.params()),
      group_(group),
      expert_data_(expert_data),
      tensor_(tensor),
      context_(context),
      scatter_into_(sharded ? sharded->shard_grads() : Tensor()) {
  std::vector<GradBucket> ranges;
  if (scatter_into_.defined()) {
    const Tensor& buf = params_.grad_buffer();
    NM_CHECK(buf.defined() && buf.numel() == scatter_into_.numel() * group_.size() &&
                 sharded->shard_count() == group_.size(),
             "reduce-scatter of a {}-element gradient buffer into {} elements over {} ranks",
             buf.defined() ? buf.numel() : 0, scatter_into_.numel(), group_.size());
    ranges = sharded->shard_buckets();
  } else {
    params_.make_grads_contiguous();
    ranges = grad_buckets(params_, bucket_elements);
  }
  // A bucket is ready once its least-ready parameter is.
  const int64_t layers = net.config().num_layers();
  for (const GradBucket& r : ranges) buckets_.push_back({r, layers, {}, false});
  for (model::Param* p : params_.all()) {
    if (!params_.in_grad_buffer(*p)) continue;
    const int64_t off = grad_offset(params_, *p);
    for (Bucket& b : buckets_) {
      if (off < b.range.begin || off >= b.range.end) continue;
      b.ready_after = std::min(b.ready_after, ready_after(*p, net.embedding(), layers));
      if (p->shard.grad_partial_over_tensor) b.partial.push_back(p);
      break;
    }
  }
  hook_ = [this](int64_t layer) {
    for (Bucket& b : buckets_)
      if (!b.queued && b.ready_after >= layer) queue(b), ++overlapped_;
  };
}

const std::function<void(int64_t)>* GradReducer::layer_hook() {
  overlapped_ = 0;
  return group_.size() > 1 ? &hook_ : nullptr;
}

void GradReducer::queue(Bucket& b) {
  Tensor bucket = params_.grad_buffer().slice(b.range.begin, b.range.end);
  if (scatter_into_.defined()) {
    // The sums a reduce-scatter cannot do after it splits the bucket: on the compute stream, so
    // they precede it (it waits for the compute stream's work queued so far).
    if (sums_partial())
      for (model::Param* p : b.partial) tensor_->all_reduce(p->grad);
    if (context_ && context_->size() > 1) context_->all_reduce(bucket);
    const int64_t s = (b.range.end - b.range.begin) / group_.size();
    Tensor mine = scatter_into_.slice(b.range.shard_at, b.range.shard_at + s);
    group_.reduce_scatter_async(bucket, mine, parallel::ReduceOp::sum);
  } else {
    group_.all_reduce_async(bucket, parallel::ReduceOp::sum);
  }
  b.queued = true;
}

void GradReducer::finish() {
  // Expert-parallel experts: each expert's copies are on the expert-data group.
  const bool experts = expert_data_ && expert_data_->size() > 1;
  for (model::Param* p : params_.all())
    if (experts && p->grad.defined() && p->is_expert()) expert_data_->all_reduce_async(p->grad, parallel::ReduceOp::sum);
  if (group_.size() > 1) {
    for (Bucket& b : buckets_)
      if (!b.queued) queue(b);
    // Gradients outside the buffer (a parameter unfrozen after it was made; a sharded optimizer
    // refuses those).
    if (!scatter_into_.defined())
      for (model::Param* p : params_.all())
        if (p->grad.defined() && !p->is_expert() && !params_.in_grad_buffer(*p))
          group_.all_reduce_async(p->grad, parallel::ReduceOp::sum);
    group_.wait_pending();
  }
  // Whole parameters whose gradients are partial over the tensor group: summed there (after the
  // all-reduce over the data group, the sum is the same; the buckets a reduce-scatter split had
  // theirs summed as they were queued).
  if (sums_partial())
    for (model::Param* p : params_.all())
      if (p->grad.defined() && p->shard.grad_partial_over_tensor &&
          !(scatter_into_.defined() && params_.in_grad_buffer(*p)))
        tensor_->all_reduce(p->grad);
  if (experts) expert_data_->wait_pending();
  for (Bucket& b : buckets_) b.queued = false;
}

}  // namespace nemotron::train
