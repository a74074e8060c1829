// Helpers shared by the incremental-decoding op tests (attention_decode, causal_conv1d_decode,
// ssd_decode, kv_cache_decode): ragged batches written as per-sequence token counts.
#pragma once
#include <string>
#include <vector>

#include "core/context.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace nemotron::testing {

inline Tensor i32_tensor(const std::vector<int32_t>& v) {
  return Tensor::from_vector<int32_t>({static_cast<int64_t>(v.size())}, v);
}

// An index tensor on ctx's device (the CUDA kernels read them there; the host never does).
inline Tensor i32_on(const Context& ctx, const std::vector<int32_t>& v) {
  Tensor t = i32_tensor(v);
  return ctx.backend->device().is_cpu() ? t : t.to(*ctx.backend);
}

// cu_seqlens [S+1] of per-sequence counts.
inline std::vector<int32_t> offsets_of(const std::vector<int32_t>& counts) {
  std::vector<int32_t> cu{0};
  for (int32_t n : counts) cu.push_back(cu.back() + n);
  return cu;
}

inline std::string counts_str(const std::vector<int32_t>& counts) {
  std::string s;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (i) s += '/';
    s += std::to_string(counts[i]);
  }
  return s;
}

inline Tensor random_tensor(Shape shape, DType dtype, uint64_t seed, double lo = -1, double hi = 1) {
  Tensor t = Tensor::empty(std::move(shape), dtype);
  fill_uniform(t, Philox(seed), lo, hi);
  return t;
}

}  // namespace nemotron::testing
