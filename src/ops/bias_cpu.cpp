#include <algorithm>

#include "backend/cpu/parallel.h"
#include "core/op_profiler.h"
#include "ops/bias.h"
#include "ops/dispatch.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/bias_cuda.h"
#endif

namespace nemotron::ops {

namespace {
#if NEMOTRON_CUDA
BiasCudaArgs cuda_args(const Tensor& t, const char* op) {
  NM_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::bf16, "{} on CUDA: float32 or bfloat16, got {}", op,
           dtype_name(t.dtype()));
  BiasCudaArgs a;
  a.D = t.dim(-1), a.rows = a.D ? t.numel() / a.D : 0, a.bf16 = t.dtype() == DType::bf16;
  return a;
}
#endif
}  // namespace

void bias_add(Context& ctx, Tensor& y, const Tensor& b) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  const int64_t D = y.dim(-1), rows = y.numel() / D;
  expect_shape(b, {D}, "bias");
  expect_dtype(b, y.dtype(), "bias");
  expect_same_device(b, y, "bias");
#if NEMOTRON_CUDA
  if (y.device().is_cuda()) {
    BiasCudaArgs a = cuda_args(y, "bias_add");
    a.y = y.raw(), a.b = b.raw();
    NM_CUDA_CHECK(bias_add_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(y, "bias_add");
  dispatch_float(y.dtype(), "bias_add", [&](auto zero) {
    using T = decltype(zero);
    T* py = y.data<T>();
    const T* pb = b.data<T>();
    cpu::parallel_for(rows, [&](int64_t r) {
      for (int64_t i = 0; i < D; ++i) py[r * D + i] += pb[i];
    }, std::max<int64_t>(1, 16384 / D));  // keep tiny shapes on one thread
  });
}

void bias_backward(Context& ctx, const Tensor& dy, Tensor& db) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  const int64_t D = dy.dim(-1), rows = dy.numel() / D;
  expect_shape(db, {D}, "bias gradient");
  expect_dtype(db, grad_dtype(dy.dtype()), "bias gradient");
  expect_same_device(db, dy, "bias gradient");
#if NEMOTRON_CUDA
  if (dy.device().is_cuda()) {
    BiasCudaArgs a = cuda_args(dy, "bias_backward");
    a.dy = dy.raw(), a.db = static_cast<float*>(db.raw());
    NM_CUDA_CHECK(bias_backward_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(dy, "bias_backward");
  dispatch_float(dy.dtype(), "bias_backward", [&](auto zero) {
    using T = decltype(zero);
    const T* g = dy.data<T>();
    T* out = db.data<T>();
    // Serial over rows: a fixed summation order keeps the result bitwise reproducible.
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < D; ++i) out[i] += g[r * D + i];
  });
}

}  // namespace nemotron::ops
