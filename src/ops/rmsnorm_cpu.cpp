#include <cmath>

#include "backend/cpu/parallel.h"
#include "ops/dispatch.h"
#include "ops/rmsnorm.h"

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
void backward_ref(const T* x, const T* w, const T* rstd, const T* dy, T* dx, T* dw, int64_t rows, int64_t D) {
  cpu::parallel_for(rows, [&](int64_t r) {
    const T* xr = x + r * D;
    const T* dyr = dy + r * D;
    T s = rstd[r], dot = 0;
    for (int64_t i = 0; i < D; ++i) dot += w[i] * dyr[i] * xr[i] * s;
    dot /= T(D);
    for (int64_t i = 0; i < D; ++i) dx[r * D + i] = s * (w[i] * dyr[i] - xr[i] * s * dot);
  }, cpu::grain_for(4 * D));
  // dw reduces over rows: serial over rows keeps the sum order fixed (bitwise reproducible).
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < D; ++i) dw[i] += dy[r * D + i] * x[r * D + i] * rstd[r];
}

}  // namespace

void rmsnorm_forward(Context&, const Tensor& x, const Tensor& w, double eps, Tensor& y, Tensor& rstd) {
  require_cpu(x, "rmsnorm_forward");
  int64_t D = x.dim(-1), rows = x.numel() / D;
  expect_shape(w, {D}, "rmsnorm weight");
  expect_shape(y, x.shape(), "rmsnorm output");
  expect_shape(rstd, {rows}, "rmsnorm rstd");
  dispatch_float(x.dtype(), "rmsnorm_forward", [&](auto zero) {
    using T = decltype(zero);
    forward_ref<T>(x.data<T>(), w.data<T>(), static_cast<T>(eps), y.data<T>(), rstd.data<T>(), rows, D);
  });
}

void rmsnorm_backward(Context&, const Tensor& x, const Tensor& w, const Tensor& rstd, const Tensor& dy, Tensor& dx,
                      Tensor& dw) {
  require_cpu(x, "rmsnorm_backward");
  int64_t D = x.dim(-1), rows = x.numel() / D;
  expect_shape(dy, x.shape(), "rmsnorm dy");
  expect_shape(dx, x.shape(), "rmsnorm dx");
  expect_shape(dw, {D}, "rmsnorm dw");
  dispatch_float(x.dtype(), "rmsnorm_backward", [&](auto zero) {
    using T = decltype(zero);
    backward_ref<T>(x.data<T>(), w.data<T>(), rstd.data<T>(), dy.data<T>(), dx.data<T>(), dw.data<T>(), rows, D);
  });
}

}  // namespace nemotron::ops
