#include "train/grad_buckets.h"

#include <algorithm>

#include "core/error.h"

namespace nemotron::train {

int64_t grad_offset(const model::ParamStore& params, const model::Param& p) {
  const Tensor& buf = params.grad_buffer();
  NM_CHECK(params.in_grad_buffer(p), "{}: gradient outside the flat buffer", p.name);
  return (static_cast<const char*>(p.grad.raw()) - static_cast<const char*>(buf.raw())) /
         static_cast<int64_t>(dtype_size(buf.dtype()));
}

namespace {

// Buckets over `numel` elements whose parameters start at `starts` (offset, trunk layer).
std::vector<GradBucket> cut_buckets(std::vector<std::pair<int64_t, int64_t>> starts, int64_t numel,
                                    int64_t bucket_elements, int64_t cut_multiple, bool by_layer) {
  NM_CHECK(bucket_elements > 0 && cut_multiple > 0, "buckets of {} elements cut at multiples of {}", bucket_elements,
           cut_multiple);
  NM_CHECK(numel % cut_multiple == 0, "grad_buckets: the gradient buffer's {} elements are not a multiple of {}", numel,
           cut_multiple);
  std::sort(starts.begin(), starts.end(), std::greater<>());
  std::vector<GradBucket> out;
  int64_t end = numel;
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t s = starts[i].first;
    // by_layer: cut below the last parameter of a layer (the next one down is another's).
    const bool cut = by_layer ? i + 1 < starts.size() && starts[i + 1].second != starts[i].second
                              : end - s >= bucket_elements;
    if (!cut || s % cut_multiple != 0) continue;
    out.push_back({s, end, 0});
    end = s;
  }
  if (end > 0) out.push_back({0, end, 0});
  return out;
}

}  // namespace

std::vector<GradBucket> grad_buckets(const model::ParamStore& params, int64_t bucket_elements, int64_t cut_multiple,
                                     bool by_layer) {
  const Tensor& buf = params.grad_buffer();
  NM_CHECK(buf.defined(), "grad_buckets: the gradient buffer is not made");
  std::vector<std::pair<int64_t, int64_t>> starts;  // (offset, trunk layer)
  for (const model::Param* p : params.all())
    if (params.in_grad_buffer(*p)) starts.push_back({grad_offset(params, *p), p->trunk_layer});
  return cut_buckets(std::move(starts), buf.numel(), bucket_elements, cut_multiple, by_layer);
}

std::vector<GradBucket> grad_buckets(const model::ParamStore& params, const model::GradLayout& layout,
                                     int64_t bucket_elements, int64_t cut_multiple, bool by_layer) {
  const auto& all = params.all();
  NM_CHECK(layout.offset.size() == all.size(), "grad_buckets: a layout of {} parameters for a store of {}",
           layout.offset.size(), all.size());
  std::vector<std::pair<int64_t, int64_t>> starts;
  for (size_t k = 0; k < all.size(); ++k)
    if (layout.offset[k] >= 0) starts.push_back({layout.offset[k], all[k]->trunk_layer});
  return cut_buckets(std::move(starts), layout.numel, bucket_elements, cut_multiple, by_layer);
}

}  // namespace nemotron::train
