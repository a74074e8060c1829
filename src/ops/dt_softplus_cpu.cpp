#include <cmath>

#include "backend/cpu/parallel.h"
#include "ops/dispatch.h"
#include "ops/dt_softplus.h"

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
  require_cpu(raw, op);
  NM_CHECK(raw.rank() >= 1, "{}: dt_raw must be [..., nH]", op);
  int64_t nH = raw.dim(-1);
  expect_shape(bias, {nH}, "dt_softplus dt_bias");
  expect_dtype(bias, raw.dtype(), "dt_softplus dt_bias");
  NM_CHECK(lo < hi, "{}: time_step_limit must satisfy lo < hi, got ({}, {})", op, lo, hi);
  return nH;
}

}  // namespace

void dt_softplus_forward(Context&, const Tensor& dt_raw, const Tensor& dt_bias, double lo, double hi, Tensor& dt) {
  int64_t nH = check_args(dt_raw, dt_bias, lo, hi, "dt_softplus_forward");
  expect_shape(dt, dt_raw.shape(), "dt_softplus output");
  dispatch_float(dt_raw.dtype(), "dt_softplus_forward", [&](auto zero) {
    using T = decltype(zero);
    forward_ref<T>(dt_raw.data<T>(), dt_bias.data<T>(), static_cast<T>(lo), static_cast<T>(hi), dt.data<T>(),
                   dt_raw.numel() / std::max<int64_t>(nH, 1), nH);
  });
}

void dt_softplus_backward(Context&, const Tensor& dt_raw, const Tensor& dt_bias, double lo, double hi,
                          const Tensor& ddt, Tensor& d_dt_raw, Tensor& d_dt_bias) {
  int64_t nH = check_args(dt_raw, dt_bias, lo, hi, "dt_softplus_backward");
  expect_shape(ddt, dt_raw.shape(), "dt_softplus ddt");
  expect_shape(d_dt_raw, dt_raw.shape(), "dt_softplus d_dt_raw");
  expect_shape(d_dt_bias, {nH}, "dt_softplus d_dt_bias");
  dispatch_float(dt_raw.dtype(), "dt_softplus_backward", [&](auto zero) {
    using T = decltype(zero);
    backward_ref<T>(dt_raw.data<T>(), dt_bias.data<T>(), static_cast<T>(lo), static_cast<T>(hi), ddt.data<T>(),
                    d_dt_raw.data<T>(), d_dt_bias.data<T>(), dt_raw.numel() / std::max<int64_t>(nH, 1), nH);
  });
}

}  // namespace nemotron::ops
