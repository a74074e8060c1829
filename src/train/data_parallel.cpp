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

GradReducer::GradReducer(model::ParamStore& params, parallel::Communicator& group, int64_t bucket_elements)
    : params_(params), group_(group), bucket_elements_(bucket_elements) {
  NM_CHECK(bucket_elements > 0, "bucket of {} elements", bucket_elements);
  params_.make_grads_contiguous();
  const int64_t n = params_.grad_buffer().numel();
  buckets_ = (n + bucket_elements_ - 1) / bucket_elements_;
}

void GradReducer::all_reduce() {
  if (group_.size() == 1) return;
  const Tensor& buf = params_.grad_buffer();
  for (int64_t b = 0; b < buckets_; ++b) {
    Tensor bucket = buf.slice(b * bucket_elements_, std::min(buf.numel(), (b + 1) * bucket_elements_));
    group_.all_reduce(bucket, parallel::ReduceOp::sum);
  }
  // Gradients outside the buffer (a parameter unfrozen after it was made).
  for (model::Param* p : params_.all())
    if (p->grad.defined() && !params_.in_grad_buffer(*p)) group_.all_reduce(p->grad, parallel::ReduceOp::sum);
}

}  // namespace nemotron::train
