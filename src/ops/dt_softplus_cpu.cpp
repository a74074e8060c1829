#include <cmath>

#include "backend/cpu/parallel.h"
#include "core/op_profiler.h"
#include "ops/dispatch.h"
#include "ops/dt_softplus.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/dt_softplus_cuda.h"
#endif

namespace nemotron::ops {

namespace {

template <class T>
T softplus(T v) {
  return std::max(v, T(0)) + std::log1p(std::exp(-std::fabs(v)));
}

template <class T>
void forward_ref(const T* raw, const T* bias, T lo, T hi, T* dt, int64_t rows, int64_t nH) {
  cpu::parallel_for(rows, [&](int64_t r) {
    for (int64_t h = 0; h < nH; ++h) dt[r * nH + h] = std::min(std::max(softplus(raw[r * nH + h] + bias[h]), lo), hi);
  }, cpu::grain_for(8 * nH));
}

template <class T>
void backward_ref(const T* raw, const T* bias, T lo, T hi, const T* ddt, T* draw, T* dbias, int64_t rows,
                  int64_t nH) {
  cpu::parallel_for(rows, [&](int64_t r) {
    for (int64_t h = 0; h < nH; ++h) {
      T v = raw[r * nH + h] + bias[h], sp = softplus(v);
      bool clamped = sp < lo || sp > hi;
      draw[r * nH + h] = clamped ? T(0) : ddt[r * nH + h] / (T(1) + std::exp(-v));
    }
  }, cpu::grain_for(12 * nH));
  // d dt_bias reduces over rows in a fixed order.
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < nH; ++h) dbias[h] += draw[r * nH + h];
}

int64_t check_args(const Tensor& raw, const Tensor& bias, double lo, double hi, const char* op) {
  NM_CHECK(raw.rank() >= 1, "{}: dt_raw must be [..., nH]", op);
  int64_t nH = raw.dim(-1);
  expect_shape(bias, {nH}, "dt_softplus dt_bias");
  expect_dtype(bias, raw.dtype(), "dt_softplus dt_bias");
  NM_CHECK(lo < hi, "{}: time_step_limit must satisfy lo < hi, got ({}, {})", op, lo, hi);
  return nH;
}

#if NEMOTRON_CUDA
DtSoftplusCudaArgs cuda_args(const Tensor& raw, const Tensor& bias, double lo, double hi) {
  NM_CHECK(raw.dtype() == DType::f32 || raw.dtype() == DType::bf16, "dt_softplus on CUDA: float32 or bfloat16, got {}",
           dtype_name(raw.dtype()));
  DtSoftplusCudaArgs a;
  a.dt_raw = raw.raw(), a.dt_bias = bias.raw();
  a.nH = raw.dim(-1), a.rows = a.nH == 0 ? 0 : raw.numel() / a.nH;
  a.lo = static_cast<float>(lo), a.hi = static_cast<float>(hi), a.bf16 = raw.dtype() == DType::bf16;
  return a;
}
#endif

}  // namespace

void dt_softplus_forward(Context& ctx, const Tensor& dt_raw, const Tensor& dt_bias, double lo, double hi,
                         Tensor& dt) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  int64_t nH = check_args(dt_raw, dt_bias, lo, hi, "dt_softplus_forward");
  expect_shape(dt, dt_raw.shape(), "dt_softplus output");
  expect_dtype(dt, stat_dtype(dt_raw.dtype()), "dt_softplus output");
#if NEMOTRON_CUDA
  if (dt_raw.device().is_cuda()) {
    DtSoftplusCudaArgs a = cuda_args(dt_raw, dt_bias, lo, hi);
    a.dt = static_cast<float*>(dt.raw());
    NM_CUDA_CHECK(dt_softplus_forward_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(dt_raw, "dt_softplus_forward");
  dispatch_float(dt_raw.dtype(), "dt_softplus_forward", [&](auto zero) {
    using T = decltype(zero);
    forward_ref<T>(dt_raw.data<T>(), dt_bias.data<T>(), static_cast<T>(lo), static_cast<T>(hi), dt.data<T>(),
                   dt_raw.numel() / std::max<int64_t>(nH, 1), nH);
  });
}

void dt_softplus_backward(Context& ctx, const Tensor& dt_raw, const Tensor& dt_bias, double lo, double hi,
                          const Tensor& ddt, Tensor& d_dt_raw, Tensor& d_dt_bias) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  int64_t nH = check_args(dt_raw, dt_bias, lo, hi, "dt_softplus_backward");
  expect_shape(ddt, dt_raw.shape(), "dt_softplus ddt");
  expect_shape(d_dt_raw, dt_raw.shape(), "dt_softplus d_dt_raw");
  expect_shape(d_dt_bias, {nH}, "dt_softplus d_dt_bias");
  expect_dtype(ddt, stat_dtype(dt_raw.dtype()), "dt_softplus ddt");
  expect_dtype(d_dt_raw, dt_raw.dtype(), "dt_softplus d_dt_raw");
  expect_dtype(d_dt_bias, grad_dtype(dt_raw.dtype()), "dt_softplus d_dt_bias");
#if NEMOTRON_CUDA
  if (dt_raw.device().is_cuda()) {
    DtSoftplusCudaArgs a = cuda_args(dt_raw, dt_bias, lo, hi);
    a.ddt = static_cast<const float*>(ddt.raw()), a.d_dt_raw = d_dt_raw.raw();
    a.d_dt_bias = static_cast<float*>(d_dt_bias.raw());
    NM_CUDA_CHECK(dt_softplus_backward_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(dt_raw, "dt_softplus_backward");
  dispatch_float(dt_raw.dtype(), "dt_softplus_backward", [&](auto zero) {
    using T = decltype(zero);
    backward_ref<T>(dt_raw.data<T>(), dt_bias.data<T>(), static_cast<T>(lo), static_cast<T>(hi), ddt.data<T>(),
                    d_dt_raw.data<T>(), d_dt_bias.data<T>(), dt_raw.numel() / std::max<int64_t>(nH, 1), nH);
  });
}

}  // namespace nemotron::ops
