#include <cmath>

#include "backend/cpu/parallel.h"
#include "core/op_profiler.h"
#include "ops/dispatch.h"
#include "ops/rmsnorm.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/rmsnorm_cuda.h"
#endif

namespace nemotron::ops {

namespace {

template <class T>
void forward_ref(const T* x, const T* w, T eps, T* y, T* rstd, int64_t rows, int64_t D) {
  cpu::parallel_for(rows, [&](int64_t r) {
    const T* xr = x + r * D;
    T ss = 0;
    for (int64_t i = 0; i < D; ++i) ss += xr[i] * xr[i];
    T s = T(1) / std::sqrt(ss / T(D) + eps);
    rstd[r] = s;
    for (int64_t i = 0; i < D; ++i) y[r * D + i] = w[i] * xr[i] * s;
  }, cpu::grain_for(4 * D));
}

template <class T>
void backward_ref(const T* x, const T* w, const T* rstd, const T* dy, T* dx, T* dw, const T* dx_add, int64_t rows,
                  int64_t D) {
  cpu::parallel_for(rows, [&](int64_t r) {
    const T* xr = x + r * D;
    const T* dyr = dy + r * D;
    T s = rstd[r], dot = 0;
    for (int64_t i = 0; i < D; ++i) dot += w[i] * dyr[i] * xr[i] * s;
    dot /= T(D);
    for (int64_t i = 0; i < D; ++i)
      dx[r * D + i] = s * (w[i] * dyr[i] - xr[i] * s * dot) + (dx_add ? dx_add[r * D + i] : T(0));
  }, cpu::grain_for(4 * D));
  // dw reduces over rows: serial over rows keeps the sum order fixed (bitwise reproducible).
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < D; ++i) dw[i] += dy[r * D + i] * x[r * D + i] * rstd[r];
}

#if NEMOTRON_CUDA
RmsNormCudaArgs cuda_args(const Tensor& x, const Tensor& w, const Tensor& rstd) {
  NM_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::bf16, "rmsnorm on CUDA: float32 or bfloat16, got {}",
           dtype_name(x.dtype()));
  expect_dtype(rstd, DType::f32, "rmsnorm rstd on CUDA");
  RmsNormCudaArgs a;
  a.x = x.raw(), a.w = w.raw(), a.rstd = static_cast<float*>(rstd.raw());
  a.D = x.dim(-1), a.rows = x.numel() / a.D, a.bf16 = x.dtype() == DType::bf16;
  return a;
}

void check_cuda_dw(const Tensor& x, const Tensor& dw) {
  expect_dtype(dw, grad_dtype(x.dtype()), "rmsnorm dw on CUDA");
}
#endif

}  // namespace

void rmsnorm_forward(Context& ctx, const Tensor& x, const Tensor& w, double eps, Tensor& y, Tensor& rstd) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  int64_t D = x.dim(-1), rows = x.numel() / D;
  expect_shape(w, {D}, "rmsnorm weight");
  expect_shape(y, x.shape(), "rmsnorm output");
  expect_shape(rstd, {rows}, "rmsnorm rstd");
#if NEMOTRON_CUDA
  if (x.device().is_cuda()) {
    RmsNormCudaArgs a = cuda_args(x, w, rstd);
    a.y = y.raw(), a.eps = static_cast<float>(eps);
    NM_CUDA_CHECK(rmsnorm_forward_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(x, "rmsnorm_forward");
  dispatch_float(x.dtype(), "rmsnorm_forward", [&](auto zero) {
    using T = decltype(zero);
    forward_ref<T>(x.data<T>(), w.data<T>(), static_cast<T>(eps), y.data<T>(), rstd.data<T>(), rows, D);
  });
}

void rmsnorm_backward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& rstd, const Tensor& dy, Tensor& dx,
                      Tensor& dw, const Tensor* dx_add) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  int64_t D = x.dim(-1), rows = x.numel() / D;
  expect_shape(dy, x.shape(), "rmsnorm dy");
  expect_shape(dx, x.shape(), "rmsnorm dx");
  expect_shape(dw, {D}, "rmsnorm dw");
  if (dx_add) expect_shape(*dx_add, x.shape(), "rmsnorm dx_add");
#if NEMOTRON_CUDA
  if (x.device().is_cuda()) {
    check_cuda_dw(x, dw);
    RmsNormCudaArgs a = cuda_args(x, w, rstd);
    a.dy = dy.raw(), a.dx = dx.raw(), a.dw = static_cast<float*>(dw.raw());
    a.dx_add = dx_add ? dx_add->raw() : nullptr;
    NM_CUDA_CHECK(rmsnorm_backward_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(x, "rmsnorm_backward");
  dispatch_float(x.dtype(), "rmsnorm_backward", [&](auto zero) {
    using T = decltype(zero);
    backward_ref<T>(x.data<T>(), w.data<T>(), rstd.data<T>(), dy.data<T>(), dx.data<T>(), dw.data<T>(),
                    dx_add ? dx_add->data<T>() : nullptr, rows, D);
  });
}

void add_rmsnorm_forward(Context& ctx, const Tensor& x, const Tensor& r, const Tensor& w, double eps, Tensor& sum,
                         Tensor& y, Tensor& rstd) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  int64_t D = x.dim(-1), rows = x.numel() / D;
  expect_shape(r, x.shape(), "add_rmsnorm residual");
  expect_shape(sum, x.shape(), "add_rmsnorm sum");
  expect_shape(w, {D}, "rmsnorm weight");
  expect_shape(y, x.shape(), "rmsnorm output");
  expect_shape(rstd, {rows}, "rmsnorm rstd");
#if NEMOTRON_CUDA
  if (x.device().is_cuda()) {
    RmsNormCudaArgs a = cuda_args(x, w, rstd);
    a.residual = r.raw(), a.sum = sum.raw(), a.y = y.raw(), a.eps = static_cast<float>(eps);
    NM_CUDA_CHECK(rmsnorm_forward_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(x, "add_rmsnorm_forward");
  dispatch_float(x.dtype(), "add_rmsnorm_forward", [&](auto zero) {
    using T = decltype(zero);
    const T *xp = x.data<T>(), *rp = r.data<T>();
    T* sp = sum.data<T>();
    cpu::parallel_for(x.numel(), [&](int64_t i) { sp[i] = xp[i] + rp[i]; }, 1 << 14);
    forward_ref<T>(sp, w.data<T>(), static_cast<T>(eps), y.data<T>(), rstd.data<T>(), rows, D);
  });
}

}  // namespace nemotron::ops
