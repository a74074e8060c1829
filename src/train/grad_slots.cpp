#include "train/grad_slots.h"

#include <algorithm>

#include "core/error.h"
#include "ops/elementwise.h"

namespace nemotron::train {

GradSlots::GradSlots(model::HybridModel& net, AdamW& opt, parallel::Communicator& group, Context& ctx)
    : opt_(opt), group_(group), ctx_(ctx) {
  NM_CHECK(opt.shards_grads() && opt.shard_count() == group.size(),
           "sharded gradients need an optimizer that shards them over the data group");
  model::ParamStore& params = net.params();
  units_ = layer_units(params, opt, net.config().num_layers());
  // The optimizer laid the gradients out from shapes and left them without storage (no whole
  // buffer, no whole per-parameter gradients): the slots are their first home.
  const DType dt = opt.shard_grads().dtype();
  const auto& all = params.all();
  for (const std::vector<size_t>& ks : units_.params_of)
    for (size_t k : ks)
      NM_CHECK(!all[k]->grad.defined(), "sharded gradients: {} still holds a whole gradient", all[k]->name);
  NM_CHECK(!params.grad_buffer().defined(), "sharded gradients: the store holds a whole gradient buffer");
  Backend& be = params.backend();
  const int64_t D = group.size();
  for (size_t s = 0; s < 2; ++s) {
    slot_buf_[s] = Tensor::zeros({std::max<int64_t>(units_.slot_elements, 1)}, dt, be);
    recv_[s] = Tensor::zeros({std::max<int64_t>(units_.slot_elements / D, 1)}, dt, be);
  }
  outer_ = Tensor::zeros({std::max<int64_t>(units_.outer_elements, 1)}, dt, be);
  outer_recv_ = Tensor::zeros({std::max<int64_t>(units_.outer_elements / D, 1)}, dt, be);
  const std::vector<GradBucket>& buckets = opt.shard_buckets();
  for (size_t b = 0; b < buckets.size(); ++b) {
    const Tensor d = units_.where(buckets, b, slot_buf_, outer_);
    for (size_t k : units_.params_of[b]) all[k]->grad = units_.param_view(opt, all[k]->value.shape(), k, b, d);
    trunk_buckets_ += units_.layer_of[b] >= 0 ? 1 : 0;
  }
  hook_ = [this](int64_t layer) { after_layer(layer); };
}

void GradSlots::begin_step() {
  opt_.shard_grads().zero_();
  for (Tensor& t : slot_buf_) t.zero_();
  outer_.zero_();
  pending_ = {-1, -1};
  scatters_ = micro_scatters_ = 0;
}

void GradSlots::land(size_t slot) {
  const int64_t layer = pending_[slot];
  if (layer < 0) return;
  const GradBucket& g = opt_.shard_buckets()[static_cast<size_t>(units_.bucket_of[static_cast<size_t>(layer)])];
  const int64_t s = (g.end - g.begin) / group_.size();
  Tensor mine = opt_.shard_grads().slice(g.shard_at, g.shard_at + s);
  ops::add_inplace(ctx_, mine, recv_[slot].slice(0, s));
  slot_buf_[slot].slice(0, g.end - g.begin).zero_();
  pending_[slot] = -1;
}

// Layer `layer`'s gradients are complete: the slot of layer + 1 (which layer - 1 uses next) has
// its reduce-scatter waited for and added before this one's is queued, so this one overlaps the
// next layer's backward.
void GradSlots::after_layer(int64_t layer) {
  if (layer < 0 || layer >= static_cast<int64_t>(units_.bucket_of.size()) ||
      units_.bucket_of[static_cast<size_t>(layer)] < 0)
    return;  // an MTP block's layer: outer
  const size_t slot = static_cast<size_t>(layer % 2), other = 1 - slot;
  const bool waited = pending_[other] >= 0;
  if (waited) {
    group_.wait_pending();
    land(other);
  }
  NM_CHECK(pending_[slot] < 0, "layer {}'s gradient slot still holds layer {}'s", layer, pending_[slot]);
  const GradBucket& g = opt_.shard_buckets()[static_cast<size_t>(units_.bucket_of[static_cast<size_t>(layer)])];
  const int64_t n = g.end - g.begin;
  Tensor out = recv_[slot].slice(0, n / group_.size());
  group_.reduce_scatter_async(slot_buf_[slot].slice(0, n), out, parallel::ReduceOp::sum);
  pending_[slot] = layer;
  ++scatters_, ++micro_scatters_;
  if (waited && after_wait_) after_wait_();
}

void GradSlots::finish_micro_batch() {
  NM_CHECK(micro_scatters_ == trunk_buckets_, "a micro-batch's backward reduce-scattered {} of {} trunk layers",
           micro_scatters_, trunk_buckets_);
  micro_scatters_ = 0;
  const std::vector<GradBucket>& buckets = opt_.shard_buckets();
  const int64_t D = group_.size();
  for (size_t b = 0; b < buckets.size(); ++b) {
    if (units_.layer_of[b] >= 0) continue;
    const int64_t n = buckets[b].end - buckets[b].begin, at = units_.outer_at[b];
    Tensor out = outer_recv_.slice(at / D, (at + n) / D);
    group_.reduce_scatter_async(outer_.slice(at, at + n), out, parallel::ReduceOp::sum);
  }
  group_.wait_pending();
  for (size_t s = 0; s < 2; ++s) land(s);
  for (size_t b = 0; b < buckets.size(); ++b) {
    if (units_.layer_of[b] >= 0) continue;
    const int64_t s = (buckets[b].end - buckets[b].begin) / D, at = units_.outer_at[b] / D;
    Tensor mine = opt_.shard_grads().slice(buckets[b].shard_at, buckets[b].shard_at + s);
    ops::add_inplace(ctx_, mine, outer_recv_.slice(at, at + s));
  }
  outer_.zero_();
}

int64_t GradSlots::slice_bytes() const { return static_cast<int64_t>(opt_.shard_grads().nbytes()); }

int64_t GradSlots::layer_bytes() const {
  return units_.slot_elements * static_cast<int64_t>(dtype_size(outer_.dtype()));
}

int64_t GradSlots::buffer_bytes() const {
  return static_cast<int64_t>(slot_buf_[0].nbytes() + slot_buf_[1].nbytes() + recv_[0].nbytes() + recv_[1].nbytes() +
                              outer_.nbytes() + outer_recv_.nbytes());
}

int64_t GradSlots::whole_bytes() const {
  return units_.param_elements * static_cast<int64_t>(dtype_size(outer_.dtype()));
}

}  // namespace nemotron::train
