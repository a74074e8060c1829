#include "train/param_gather.h"

#include <algorithm>

#include "core/error.h"

namespace nemotron::train {

ParamGather::ParamGather(model::HybridModel& net, AdamW& opt, parallel::Communicator& group)
    : net_(net), opt_(opt), group_(group) {
  NM_CHECK(opt.shards_values() && opt.shard_count() == group.size(),
           "full parameter sharding needs an optimizer that shards values over the data group");
  units_ = layer_units(net.params(), opt, net.config().num_layers());
  point_values();
  refresh();
  observer_ = [this](int64_t layer, bool backward) { before_layer(layer, backward); };
  net_.set_trunk_observer(&observer_);
}

ParamGather::~ParamGather() { net_.set_trunk_observer(nullptr); }

Tensor ParamGather::dest(size_t b) const { return units_.where(opt_.shard_buckets(), b, slot_buf_, outer_); }

// Every sharded value becomes a view of its bucket's destination. The whole tensors it replaces
// are freed first (nothing else holds them: blocks keep Param pointers; the rank's slices are in
// the value shard already), so the whole weights and the buffers never exist at once.
void ParamGather::point_values() {
  const auto& all = net_.params().all();
  const std::vector<GradBucket>& buckets = opt_.shard_buckets();
  std::vector<Shape> shapes(all.size());
  for (size_t b = 0; b < buckets.size(); ++b)
    for (size_t k : units_.params_of[b]) shapes[k] = all[k]->value.shape(), all[k]->value = Tensor();
  outer_ = Tensor();
  for (Tensor& s : slot_buf_) s = Tensor();
  Backend& be = net_.params().backend();
  const DType dt = net_.params().dtype();
  outer_ = Tensor::empty({std::max<int64_t>(units_.outer_elements, 1)}, dt, be);
  for (Tensor& s : slot_buf_) s = Tensor::empty({std::max<int64_t>(units_.slot_elements, 1)}, dt, be);
  slot_ = {};
  for (size_t b = 0; b < buckets.size(); ++b) {
    const Tensor d = dest(b);
    for (size_t k : units_.params_of[b]) all[k]->value = units_.param_view(opt_, shapes[k], k, b, d);
  }
}

void ParamGather::refresh() {
  const std::vector<GradBucket>& buckets = opt_.shard_buckets();
  const Tensor mine = opt_.value_shard();
  for (size_t b = 0; b < buckets.size(); ++b) {
    if (units_.layer_of[b] >= 0) continue;
    const int64_t s = (buckets[b].end - buckets[b].begin) / group_.size();
    Tensor out = dest(b);
    group_.all_gather(mine.slice(buckets[b].shard_at, buckets[b].shard_at + s), out);
  }
  group_.wait_pending();  // nothing of a slot's old layer is in flight past an update
  slot_ = {};
}

void ParamGather::gather(int64_t layer, bool async) {
  const size_t b = static_cast<size_t>(units_.bucket_of[static_cast<size_t>(layer)]);
  const GradBucket& g = opt_.shard_buckets()[b];
  const int64_t s = (g.end - g.begin) / group_.size();
  Slot& slot = slot_[static_cast<size_t>(layer % 2)];
  if (slot.in_flight) {  // another layer's gather into this slot: done first
    group_.wait_pending();
    for (Slot& other : slot_) other.in_flight = false;
  }
  const Tensor in = opt_.value_shard().slice(g.shard_at, g.shard_at + s);
  Tensor out = dest(b);
  // Async: on the communication stream after the compute queued so far, which includes the last
  // reads of the slot's previous layer.
  if (async) group_.all_gather_async(in, out);
  else group_.all_gather(in, out);
  slot = {layer, async};
  ++gathers_;
  gathered_bytes_ += (g.end - g.begin) * static_cast<int64_t>(dtype_size(net_.params().dtype()));
  prefetched_ += async ? 1 : 0;
}

void ParamGather::before_layer(int64_t layer, bool backward) {
  if (layer < 0 || layer >= static_cast<int64_t>(units_.bucket_of.size()) || units_.bucket_of[static_cast<size_t>(layer)] < 0)
    return;
  Slot& slot = slot_[static_cast<size_t>(layer % 2)];
  if (slot.layer != layer) gather(layer, false);
  if (slot.in_flight) {  // prefetched: the compute stream waits for it (and whatever else is pending)
    group_.wait_pending();
    for (Slot& s : slot_) s.in_flight = false;
  }
  const int64_t next = backward ? layer - 1 : layer + 1;
  if (next >= 0 && next < static_cast<int64_t>(units_.bucket_of.size()) && units_.bucket_of[static_cast<size_t>(next)] >= 0 &&
      slot_[static_cast<size_t>(next % 2)].layer != next)
    gather(next, true);
}

void ParamGather::unshard() {
  const auto& all = net_.params().all();
  const std::vector<GradBucket>& buckets = opt_.shard_buckets();
  Backend& be = net_.params().backend();
  const Tensor mine = opt_.value_shard();
  for (size_t b = 0; b < buckets.size(); ++b) {
    const int64_t n = buckets[b].end - buckets[b].begin, s = n / group_.size();
    Tensor every = Tensor::empty({n}, mine.dtype(), be);
    group_.all_gather(mine.slice(buckets[b].shard_at, buckets[b].shard_at + s), every);
    for (size_t k : units_.params_of[b]) {
      model::Param& p = *all[k];
      const int64_t at = opt_.buffer_offset(k) - buckets[b].begin;
      p.value = Tensor::empty(p.value.shape(), p.value.dtype(), be);
      p.value.view({p.value.numel()}).copy_from(every.slice(at, at + p.value.numel()));
    }
  }
  outer_ = Tensor();
  for (Tensor& t : slot_buf_) t = Tensor();
  slot_ = {};
}

void ParamGather::reshard() {
  opt_.take_value_pieces();
  point_values();
  refresh();
}

int64_t ParamGather::copy_whole_to(model::ParamStore& to) {
  const auto& from = net_.params().all();
  const auto& dst = to.all();
  NM_CHECK(from.size() == dst.size(), "a whole copy of {} parameters into a store of {}", from.size(), dst.size());
  for (size_t k = 0; k < from.size(); ++k)
    NM_CHECK(from[k]->name == dst[k]->name && from[k]->value.shape() == dst[k]->value.shape() &&
                 from[k]->value.dtype() == dst[k]->value.dtype(),
             "whole copy: parameter {} is {} in the trainer, {} in the copy", k, from[k]->name, dst[k]->name);
  std::vector<bool> copied(from.size(), false);
  const int64_t bytes_before = gathered_bytes_;
  for (int64_t layer = 0; layer < static_cast<int64_t>(units_.bucket_of.size()); ++layer) {
    const int64_t b = units_.bucket_of[static_cast<size_t>(layer)];
    if (b < 0) continue;
    before_layer(layer, false);  // gathered (or still held), the next one queued, as in a forward
    for (size_t k : units_.params_of[static_cast<size_t>(b)]) {
      dst[k]->value.copy_from(from[k]->value);
      copied[k] = true;
    }
  }
  for (size_t k = 0; k < from.size(); ++k)  // the outer unit (whole since the update) and the unsharded ones
    if (!copied[k]) dst[k]->value.copy_from(from[k]->value);
  return gathered_bytes_ - bytes_before;
}

int64_t ParamGather::shard_bytes() const { return static_cast<int64_t>(opt_.value_shard().nbytes()); }

int64_t ParamGather::layer_bytes() const {
  return units_.slot_elements * static_cast<int64_t>(dtype_size(net_.params().dtype()));
}

int64_t ParamGather::buffer_bytes() const {
  return (units_.outer_elements + 2 * units_.slot_elements) * static_cast<int64_t>(dtype_size(net_.params().dtype()));
}

int64_t ParamGather::sharded_bytes() const {
  return units_.param_elements * static_cast<int64_t>(dtype_size(net_.params().dtype()));
}

}  // namespace nemotron::train
