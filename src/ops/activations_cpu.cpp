// CPU references for the elementwise activations: one loop each.
#include <cmath>

#include "backend/cpu/parallel.h"
#include "ops/activations.h"
#include "ops/dispatch.h"

namespace nemotron::ops {

namespace {

constexpr int64_t kGrain = 4096;  // elements per thread before going parallel

void expect_like(const Tensor& t, const Tensor& ref, const char* what) {
  NM_CHECK(t.defined() && t.numel() == ref.numel(), "{}: expected {} elements, got {}", what, ref.numel(),
           t.defined() ? t.describe() : std::string("nothing"));
  expect_dtype(t, ref.dtype(), what);
}

template <class T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

}  // namespace

void relu2_forward(Context&, const Tensor& x, Tensor& y) {
  require_cpu(x, "relu2_forward");
  expect_like(y, x, "relu2 output");
  dispatch_float(x.dtype(), "relu2_forward", [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    cpu::parallel_for(x.numel(), [&](int64_t i) {
      T r = px[i] > T(0) ? px[i] : T(0);
      py[i] = r * r;
    }, kGrain);
  });
}

void relu2_backward(Context&, const Tensor& x, const Tensor& dy, Tensor& dx) {
  require_cpu(x, "relu2_backward");
  expect_like(dy, x, "relu2 dy");
  expect_like(dx, x, "relu2 dx");
  dispatch_float(x.dtype(), "relu2_backward", [&](auto zero) {
    using T = decltype(zero);
    const T *px = x.data<T>(), *pdy = dy.data<T>();
    T* pdx = dx.data<T>();
    cpu::parallel_for(x.numel(), [&](int64_t i) { pdx[i] = px[i] > T(0) ? T(2) * px[i] * pdy[i] : T(0); }, kGrain);
  });
}

void swiglu_forward(Context&, const Tensor& gate, const Tensor& up, Tensor& y) {
  require_cpu(gate, "swiglu_forward");
  expect_like(up, gate, "swiglu up");
  expect_like(y, gate, "swiglu output");
  dispatch_float(gate.dtype(), "swiglu_forward", [&](auto zero) {
    using T = decltype(zero);
    const T *g = gate.data<T>(), *u = up.data<T>();
    T* py = y.data<T>();
    cpu::parallel_for(gate.numel(), [&](int64_t i) { py[i] = g[i] * sigmoid(g[i]) * u[i]; }, kGrain);
  });
}

void swiglu_backward(Context&, const Tensor& gate, const Tensor& up, const Tensor& dy, Tensor& dgate, Tensor& dup) {
  require_cpu(gate, "swiglu_backward");
  expect_like(up, gate, "swiglu up");
  expect_like(dy, gate, "swiglu dy");
  expect_like(dgate, gate, "swiglu dgate");
  expect_like(dup, gate, "swiglu dup");
  dispatch_float(gate.dtype(), "swiglu_backward", [&](auto zero) {
    using T = decltype(zero);
    const T *g = gate.data<T>(), *u = up.data<T>(), *pdy = dy.data<T>();
    T *dg = dgate.data<T>(), *du = dup.data<T>();
    cpu::parallel_for(gate.numel(), [&](int64_t i) {
      T s = sigmoid(g[i]), d = pdy[i];  // read before writing: dgate/dup may alias dy
      du[i] = d * g[i] * s;
      dg[i] = d * u[i] * s * (T(1) + g[i] * (T(1) - s));
    }, kGrain);
  });
}

}  // namespace nemotron::ops
