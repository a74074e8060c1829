#include "train/data_parallel.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

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

// The trunk layer whose backward completes a parameter's gradient: "<prefix>layers.<i>." of the
// trunk (not an MTP block's, "mtp.*"); everything else but the embedding (final norm, head, the
// MTP blocks) is complete before the trunk's backward starts: `before_trunk`; the embedding only
// at the very end: -1.
int64_t ready_after(const model::Param& p, const model::Param& embedding, int64_t before_trunk) {
  if (&p == &embedding) return -1;
  const std::string& n = p.name;
  if (n.rfind("mtp.", 0) == 0 || n.find(".mtp.") != std::string::npos) return before_trunk;
  const size_t at = n.find("layers.");
  if (at == std::string::npos) return before_trunk;
  size_t end = at + 7;
  int64_t layer = 0;
  bool digits = false;
  while (end < n.size() && n[end] >= '0' && n[end] <= '9') layer = layer * 10 + (n[end++] - '0'), digits = true;
  return digits && end < n.size() && n[end] == '.' ? layer : before_trunk;
}

}  // namespace

GradReducer::GradReducer(model::HybridModel& net, parallel::Communicator& group, int64_t bucket_elements,
                         Tensor scatter_into, parallel::Communicator* expert_data, parallel::Communicator* tensor,
                         parallel::Communicator* context)
    : params_(net.params()),
      group_(group),
      expert_data_(expert_data),
      tensor_(tensor),
      context_(context),
      scatter_into_(std::move(scatter_into)) {
  NM_CHECK(bucket_elements > 0, "bucket of {} elements", bucket_elements);
  if (scatter_into_.defined()) {
    const Tensor& buf = params_.grad_buffer();
    NM_CHECK(buf.defined() && buf.numel() == scatter_into_.numel() * group_.size(),
             "reduce-scatter of a {}-element gradient buffer into {} elements over {} ranks",
             buf.defined() ? buf.numel() : 0, scatter_into_.numel(), group_.size());
    return;
  }
  params_.make_grads_contiguous();
  const Tensor& buf = params_.grad_buffer();
  const int64_t layers = net.config().num_layers();
  // Parameters by their place in the buffer, from the end (the backward's order).
  struct Span {
    int64_t begin, ready;
  };
  std::vector<Span> spans;
  for (const model::Param* p : params_.all())
    if (params_.in_grad_buffer(*p))
      spans.push_back({(static_cast<const char*>(p->grad.raw()) - static_cast<const char*>(buf.raw())) /
                           static_cast<int64_t>(dtype_size(buf.dtype())),
                       ready_after(*p, net.embedding(), layers)});
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin > b.begin; });
  int64_t end = buf.numel();
  Bucket open{0, end, layers, false};
  for (const Span& sp : spans) {
    // A bucket is ready once its least-ready parameter is; close it at the size limit.
    open.begin = sp.begin;
    open.ready_after = std::min(open.ready_after, sp.ready);
    if (open.end - open.begin >= bucket_elements) {
      buckets_.push_back(open);
      open = Bucket{0, open.begin, layers, false};
    }
  }
  if (open.end > 0) {
    open.begin = 0;
    buckets_.push_back(open);
  }
  hook_ = [this](int64_t layer) {
    for (Bucket& b : buckets_)
      if (!b.queued && b.ready_after >= layer) queue(b), ++overlapped_;
  };
}

const std::function<void(int64_t)>* GradReducer::layer_hook() {
  overlapped_ = 0;
  return group_.size() > 1 && !scatter_into_.defined() ? &hook_ : nullptr;
}

void GradReducer::queue(Bucket& b) {
  Tensor bucket = params_.grad_buffer().slice(b.begin, b.end);
  group_.all_reduce_async(bucket, parallel::ReduceOp::sum);
  b.queued = true;
}

void GradReducer::finish() {
  // Whole parameters whose gradients are partial over the tensor group: summed there first (before
  // a reduce-scatter splits the buffer; after the buckets the layer hook queued, which may still
  // be in flight on the data group, the sum is the same either way).
  const bool partial = tensor_ && tensor_->size() > 1;
  auto sum_partial = [&] {
    for (model::Param* p : params_.all())
      if (partial && p->grad.defined() && p->shard.grad_partial_over_tensor) tensor_->all_reduce(p->grad);
  };
  // Expert-parallel experts: each expert's copies are on the expert-data group.
  const bool experts = expert_data_ && expert_data_->size() > 1;
  for (model::Param* p : params_.all())
    if (experts && p->grad.defined() && p->is_expert()) expert_data_->all_reduce_async(p->grad, parallel::ReduceOp::sum);
  if (scatter_into_.defined()) {
    sum_partial();
    if (context_ && context_->size() > 1) {
      Tensor all = params_.grad_buffer();
      context_->all_reduce(all);
    }
    group_.reduce_scatter(params_.grad_buffer(), scatter_into_, parallel::ReduceOp::sum);
  } else if (group_.size() > 1) {
    for (Bucket& b : buckets_)
      if (!b.queued) queue(b);
    // Gradients outside the buffer (a parameter unfrozen after it was made).
    for (model::Param* p : params_.all())
      if (p->grad.defined() && !p->is_expert() && !params_.in_grad_buffer(*p))
        group_.all_reduce_async(p->grad, parallel::ReduceOp::sum);
    group_.wait_pending();
    sum_partial();
  } else {
    sum_partial();
  }
  if (experts) expert_data_->wait_pending();
  for (Bucket& b : buckets_) b.queued = false;
}

}  // namespace nemotron::train
