#include "backend/cpu/parallel.h"
#include "core/op_profiler.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/elementwise_cuda.h"
#endif

namespace nemotron::ops {

namespace {
constexpr int64_t kGrain = 4096;

void expect_like(const Tensor& t, const Tensor& ref, const char* what) {
  NM_CHECK(t.numel() == ref.numel(), "{}: {} elements expected, got {}", what, ref.numel(), t.describe());
  expect_dtype(t, ref.dtype(), what);
  expect_same_device(t, ref, what);
}

#if NEMOTRON_CUDA
ElementwiseCudaArgs cuda_args(const Tensor& a, const char* op) {
  NM_CHECK(a.dtype() == DType::f32 || a.dtype() == DType::bf16, "{} on CUDA: float32 or bfloat16, got {}", op,
           dtype_name(a.dtype()));
  ElementwiseCudaArgs g;
  g.a = a.raw(), g.n = a.numel(), g.bf16 = a.dtype() == DType::bf16;
  return g;
}
#endif
}  // namespace

void add(Context& ctx, const Tensor& a, const Tensor& b, Tensor& out) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  expect_like(b, a, "add b");
  expect_like(out, a, "add out");
#if NEMOTRON_CUDA
  if (a.device().is_cuda()) {
    ElementwiseCudaArgs g = cuda_args(a, "add");
    g.b = b.raw(), g.out = out.raw();
    NM_CUDA_CHECK(add_cuda(g, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(a, "add");
  dispatch_float(a.dtype(), "add", [&](auto zero) {
    using T = decltype(zero);
    const T *pa = a.data<T>(), *pb = b.data<T>();
    T* po = out.data<T>();
    cpu::parallel_for(a.numel(), [&](int64_t i) { po[i] = pa[i] + pb[i]; }, kGrain);
  });
}

void add_inplace(Context& ctx, Tensor& a, const Tensor& b) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  expect_like(b, a, "add_inplace b");
#if NEMOTRON_CUDA
  if (a.device().is_cuda()) {
    ElementwiseCudaArgs g = cuda_args(a, "add_inplace");
    g.b = b.raw(), g.out = a.raw();
    NM_CUDA_CHECK(add_cuda(g, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(a, "add_inplace");
  dispatch_float(a.dtype(), "add_inplace", [&](auto zero) {
    using T = decltype(zero);
    T* pa = a.data<T>();
    const T* pb = b.data<T>();
    cpu::parallel_for(a.numel(), [&](int64_t i) { pa[i] += pb[i]; }, kGrain);
  });
}

void scale_inplace(Context& ctx, Tensor& a, double s) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
#if NEMOTRON_CUDA
  if (a.device().is_cuda()) {
    ElementwiseCudaArgs g = cuda_args(a, "scale_inplace");
    g.out = a.raw();
    NM_CUDA_CHECK(scale_cuda(g, static_cast<float>(s), cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(a, "scale_inplace");
  dispatch_float(a.dtype(), "scale_inplace", [&](auto zero) {
    using T = decltype(zero);
    T* pa = a.data<T>();
    cpu::parallel_for(a.numel(), [&](int64_t i) { pa[i] *= static_cast<T>(s); }, kGrain);
  });
}

}  // namespace nemotron::ops
