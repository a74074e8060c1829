#include <cstring>

#include "backend/cpu/parallel.h"
#include "ops/dispatch.h"
#include "ops/embedding.h"

namespace nemotron::ops {

namespace {

std::vector<int64_t> token_ids(const Tensor& ids, int64_t V, const char* op) {
  NM_CHECK(ids.dtype() == DType::i32 || ids.dtype() == DType::i64, "{}: ids must be int32 or int64, got {}", op,
           dtype_name(ids.dtype()));
  std::vector<int64_t> out(static_cast<size_t>(ids.numel()));
  for (int64_t n = 0; n < ids.numel(); ++n) {
    int64_t id = ids.dtype() == DType::i32 ? ids.data<int32_t>()[n] : ids.data<int64_t>()[n];
    if (id < 0 || id >= V)
      throw InputError(fmt::format("{}: token id {} at position {} is outside the vocabulary [0, {})", op, id, n, V));
    out[static_cast<size_t>(n)] = id;
  }
  return out;
}

}  // namespace

void embedding_forward(Context&, const Tensor& ids, const Tensor& w, Tensor& y) {
  require_cpu(w, "embedding_forward");
  NM_CHECK(w.rank() == 2, "embedding weight must be [V, D], got {}", w.shape().str());
  int64_t V = w.dim(0), D = w.dim(1), N = ids.numel();
  NM_CHECK(y.numel() == N * D && y.dtype() == w.dtype(), "embedding output {} for {} ids of width {}",
           y.describe(), N, D);
  std::vector<int64_t> id = token_ids(ids, V, "embedding");
  size_t row_bytes = static_cast<size_t>(D) * dtype_size(w.dtype());
  const char* src = static_cast<const char*>(w.raw());
  char* dst = static_cast<char*>(y.raw());
  cpu::parallel_for(N, [&](int64_t n) { std::memcpy(dst + n * row_bytes, src + id[n] * row_bytes, row_bytes); }, 64);
}

void embedding_backward(Context&, const Tensor& ids, const Tensor& dy, Tensor& dw) {
  require_cpu(dw, "embedding_backward");
  int64_t V = dw.dim(0), D = dw.dim(1), N = ids.numel();
  NM_CHECK(dy.numel() == N * D, "embedding dy {} for {} ids of width {}", dy.describe(), N, D);
  std::vector<int64_t> id = token_ids(ids, V, "embedding");
  dispatch_float(dw.dtype(), "embedding_backward", [&](auto zero) {
    using T = decltype(zero);
    const T* g = dy.data<T>();
    T* out = dw.data<T>();
    // Serial over tokens: repeated ids add in a fixed order, so the result is reproducible.
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < D; ++i) out[id[n] * D + i] += g[n * D + i];
  });
}

}  // namespace nemotron::ops
