#include "train/layer_units.h"

#include <algorithm>

#include "core/error.h"

namespace nemotron::train {

LayerUnits layer_units(const model::ParamStore& params, const AdamW& opt, int64_t num_layers) {
  const std::vector<GradBucket>& buckets = opt.shard_buckets();
  const auto& all = params.all();
  LayerUnits u;
  u.layer_of.assign(buckets.size(), -2);  // -2: no parameter seen yet (padding only)
  u.bucket_of.assign(static_cast<size_t>(num_layers), -1);
  u.params_of.resize(buckets.size());
  for (size_t k = 0; k < all.size(); ++k) {
    const int64_t off = opt.buffer_offset(k);
    if (off < 0) continue;
    size_t b = 0;
    while (b < buckets.size() && !(buckets[b].begin <= off && off < buckets[b].end)) ++b;
    NM_CHECK(b < buckets.size(), "{}: in no bucket", all[k]->name);
    const int64_t layer = all[k]->trunk_layer;
    NM_CHECK(u.layer_of[b] == -2 || u.layer_of[b] == layer,
             "bucket [{}, {}) holds parameters of layers {} and {} (a layer start not at a multiple of 64 D?)",
             buckets[b].begin, buckets[b].end, u.layer_of[b], layer);
    u.layer_of[b] = layer;
    u.params_of[b].push_back(k);
    u.param_elements += all[k]->value.numel();
  }
  u.outer_at.assign(buckets.size(), -1);
  for (size_t b = 0; b < buckets.size(); ++b) {
    const int64_t n = buckets[b].end - buckets[b].begin;
    if (u.layer_of[b] >= 0) {
      int64_t& at = u.bucket_of[static_cast<size_t>(u.layer_of[b])];
      NM_CHECK(at < 0, "layer {} in two buckets", u.layer_of[b]);
      at = static_cast<int64_t>(b);
      u.slot_elements = std::max(u.slot_elements, n);
    } else {
      u.layer_of[b] = -1;
      u.outer_at[b] = u.outer_elements;
      u.outer_elements += n;
    }
  }
  return u;
}

Tensor LayerUnits::where(const std::vector<GradBucket>& buckets, size_t b, const std::array<Tensor, 2>& slots,
                         const Tensor& outer) const {
  const int64_t n = buckets[b].end - buckets[b].begin;
  if (layer_of[b] >= 0) return slots[static_cast<size_t>(layer_of[b] % 2)].slice(0, n);
  return outer.slice(outer_at[b], outer_at[b] + n);
}

Tensor LayerUnits::param_view(const AdamW& opt, const Shape& shape, size_t k, size_t b,
                              const Tensor& bucket_view) const {
  const int64_t at = opt.buffer_offset(k) - opt.shard_buckets()[b].begin;
  return bucket_view.slice(at, at + shape.numel()).view(shape);
}

}  // namespace nemotron::train
