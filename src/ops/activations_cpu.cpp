// CPU references for the elementwise activations: one loop each.
#include <cmath>

#include "backend/cpu/parallel.h"
#include "core/op_profiler.h"
#include "ops/activations.h"
#include "ops/dispatch.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/activations_cuda.h"
#endif

namespace nemotron::ops {

namespace {

constexpr int64_t kGrain = 4096;  // elements per thread before going parallel

void expect_like(const Tensor& t, const Tensor& ref, const char* what) {
  NM_CHECK(t.defined() && t.numel() == ref.numel(), "{}: expected {} elements, got {}", what, ref.numel(),
           t.defined() ? t.describe() : std::string("nothing"));
  expect_dtype(t, ref.dtype(), what);
}

#if NEMOTRON_CUDA
ActivationCudaArgs cuda_args(const Tensor& x, const char* op) {
  NM_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::bf16, "{} on CUDA: float32 or bfloat16, got {}", op,
           dtype_name(x.dtype()));
  ActivationCudaArgs a;
  a.x = x.raw(), a.n = x.numel(), a.bf16 = x.dtype() == DType::bf16;
  return a;
}
#endif

template <class T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

}  // namespace

void relu2_forward(Context& ctx, const Tensor& x, Tensor& y) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  expect_like(y, x, "relu2 output");
#if NEMOTRON_CUDA
  if (x.device().is_cuda()) {
    ActivationCudaArgs a = cuda_args(x, "relu2_forward");
    a.y = y.raw();
    NM_CUDA_CHECK(relu2_forward_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(x, "relu2_forward");
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

void relu2_backward(Context& ctx, const Tensor& x, const Tensor& dy, Tensor& dx) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  expect_like(dy, x, "relu2 dy");
  expect_like(dx, x, "relu2 dx");
#if NEMOTRON_CUDA
  if (x.device().is_cuda()) {
    ActivationCudaArgs a = cuda_args(x, "relu2_backward");
    a.dy = dy.raw(), a.dx = dx.raw();
    NM_CUDA_CHECK(relu2_backward_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(x, "relu2_backward");
  dispatch_float(x.dtype(), "relu2_backward", [&](auto zero) {
    using T = decltype(zero);
    const T *px = x.data<T>(), *pdy = dy.data<T>();
    T* pdx = dx.data<T>();
    cpu::parallel_for(x.numel(), [&](int64_t i) { pdx[i] = px[i] > T(0) ? T(2) * px[i] * pdy[i] : T(0); }, kGrain);
  });
}

void relu2_backward_from_output(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  expect_like(dy, y, "relu2 dy");
  expect_like(dx, y, "relu2 dx");
#if NEMOTRON_CUDA
  if (y.device().is_cuda()) {
    ActivationCudaArgs a = cuda_args(y, "relu2_backward_from_output");
    a.dy = dy.raw(), a.dx = dx.raw();
    NM_CUDA_CHECK(relu2_backward_from_output_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(y, "relu2_backward_from_output");
  dispatch_float(y.dtype(), "relu2_backward_from_output", [&](auto zero) {
    using T = decltype(zero);
    const T *py = y.data<T>(), *pdy = dy.data<T>();
    T* pdx = dx.data<T>();
    cpu::parallel_for(y.numel(), [&](int64_t i) { pdx[i] = py[i] > T(0) ? T(2) * std::sqrt(py[i]) * pdy[i] : T(0); },
                      kGrain);
  });
}

void swiglu_forward(Context& ctx, const Tensor& gate, const Tensor& up, Tensor& y) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  expect_like(up, gate, "swiglu up");
  expect_like(y, gate, "swiglu output");
#if NEMOTRON_CUDA
  if (gate.device().is_cuda()) {
    ActivationCudaArgs a = cuda_args(gate, "swiglu_forward");
    a.up = up.raw(), a.y = y.raw();
    NM_CUDA_CHECK(swiglu_forward_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(gate, "swiglu_forward");
  dispatch_float(gate.dtype(), "swiglu_forward", [&](auto zero) {
    using T = decltype(zero);
    const T *g = gate.data<T>(), *u = up.data<T>();
    T* py = y.data<T>();
    cpu::parallel_for(gate.numel(), [&](int64_t i) { py[i] = g[i] * sigmoid(g[i]) * u[i]; }, kGrain);
  });
}

void swiglu_backward(Context& ctx, const Tensor& gate, const Tensor& up, const Tensor& dy, Tensor& dgate,
                     Tensor& dup) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  expect_like(up, gate, "swiglu up");
  expect_like(dy, gate, "swiglu dy");
  expect_like(dgate, gate, "swiglu dgate");
  expect_like(dup, gate, "swiglu dup");
#if NEMOTRON_CUDA
  if (gate.device().is_cuda()) {
    ActivationCudaArgs a = cuda_args(gate, "swiglu_backward");
    a.up = up.raw(), a.dy = dy.raw(), a.dx = dgate.raw(), a.dup = dup.raw();
    NM_CUDA_CHECK(swiglu_backward_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(gate, "swiglu_backward");
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
