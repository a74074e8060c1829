#include <cstring>

#include "backend/cpu/parallel.h"
#include "core/op_profiler.h"
#include "ops/dispatch.h"
#include "ops/embedding.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/embedding_cuda.h"
#endif

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

#if NEMOTRON_CUDA
// Ids on the host are checked there and uploaded; ids on the device are checked by the kernel.
Tensor device_ids(const Tensor& ids, int64_t V, Backend& backend, const char* op) {
  if (ids.device().is_cuda()) return ids;
  token_ids(ids, V, op);
  return ids.to(backend);
}

EmbeddingCudaArgs cuda_args(const Tensor& ids, int64_t V, int64_t D, DType dtype) {
  NM_CHECK(dtype == DType::f32 || dtype == DType::bf16, "embedding on CUDA: float32 or bfloat16, got {}",
           dtype_name(dtype));
  EmbeddingCudaArgs a;
  a.ids = ids.raw(), a.ids64 = ids.dtype() == DType::i64;
  a.N = ids.numel(), a.V = V, a.D = D, a.bf16 = dtype == DType::bf16;
  return a;
}

void throw_bad_id(const Tensor& ids, int64_t position, int64_t V) {
  int64_t id = static_cast<int64_t>(ids.view({ids.numel()}).slice(position, position + 1).to_f64_vector()[0]);
  throw InputError(
      fmt::format("embedding: token id {} at position {} is outside the vocabulary [0, {})", id, position, V));
}
#endif

}  // namespace

void embedding_forward(Context& ctx, const Tensor& ids, const Tensor& w, Tensor& y) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  NM_CHECK(w.rank() == 2, "embedding weight must be [V, D], got {}", w.shape().str());
  int64_t V = w.dim(0), D = w.dim(1), N = ids.numel();
  NM_CHECK(y.numel() == N * D && y.dtype() == w.dtype(), "embedding output {} for {} ids of width {}",
           y.describe(), N, D);
  NM_CHECK(ids.dtype() == DType::i32 || ids.dtype() == DType::i64, "embedding: ids must be int32 or int64, got {}",
           dtype_name(ids.dtype()));
#if NEMOTRON_CUDA
  if (w.device().is_cuda()) {
    Tensor dids = device_ids(ids, V, w.backend(), "embedding");
    EmbeddingCudaArgs a = cuda_args(dids, V, D, w.dtype());
    a.w = w.raw(), a.y = y.raw();
    int64_t bad = -1;
    NM_CUDA_CHECK(embedding_forward_cuda(a, cuda::cuda_stream(ctx), &bad));
    if (bad >= 0) throw_bad_id(dids, bad, V);
    return;
  }
#endif
  (void)ctx;
  require_cpu(w, "embedding_forward");
  std::vector<int64_t> id = token_ids(ids, V, "embedding");
  size_t row_bytes = static_cast<size_t>(D) * dtype_size(w.dtype());
  const char* src = static_cast<const char*>(w.raw());
  char* dst = static_cast<char*>(y.raw());
  cpu::parallel_for(N, [&](int64_t n) { std::memcpy(dst + n * row_bytes, src + id[n] * row_bytes, row_bytes); }, 64);
}

void embedding_backward(Context& ctx, const Tensor& ids, const Tensor& dy, Tensor& dw) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  NM_CHECK(dw.rank() == 2, "embedding dw must be [V, D], got {}", dw.shape().str());
  int64_t V = dw.dim(0), D = dw.dim(1), N = ids.numel();
  NM_CHECK(dy.numel() == N * D, "embedding dy {} for {} ids of width {}", dy.describe(), N, D);
  NM_CHECK(ids.dtype() == DType::i32 || ids.dtype() == DType::i64, "embedding: ids must be int32 or int64, got {}",
           dtype_name(ids.dtype()));
#if NEMOTRON_CUDA
  if (dw.device().is_cuda()) {
    expect_dtype(dw, grad_dtype(dy.dtype()), "embedding dw on CUDA");
    Tensor dids = device_ids(ids, V, dw.backend(), "embedding");
    EmbeddingCudaArgs a = cuda_args(dids, V, D, dy.dtype());
    a.dy = dy.raw(), a.dw = static_cast<float*>(dw.raw());
    int64_t bad = -1;
    NM_CUDA_CHECK(embedding_backward_cuda(a, cuda::cuda_stream(ctx), &bad));
    if (bad >= 0) throw_bad_id(dids, bad, V);
    return;
  }
#endif
  (void)ctx;
  require_cpu(dw, "embedding_backward");
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
