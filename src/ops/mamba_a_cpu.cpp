#include <cmath>

#include "core/op_profiler.h"
#include "ops/dispatch.h"
#include "ops/mamba_a.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/mamba_a_cuda.h"
#endif

namespace nemotron::ops {

void mamba_a_forward(Context& ctx, const Tensor& A_log, Tensor& A) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  NM_CHECK(A_log.rank() == 1, "mamba_a_forward: A_log must be [nH], got {}", A_log.shape().str());
  expect_shape(A, A_log.shape(), "mamba_a A");
  expect_dtype(A, stat_dtype(A_log.dtype()), "mamba_a A");
#if NEMOTRON_CUDA
  if (A_log.device().is_cuda()) {
    NM_CHECK(A_log.dtype() == DType::f32 || A_log.dtype() == DType::bf16,
             "mamba_a on CUDA: float32 or bfloat16, got {}", dtype_name(A_log.dtype()));
    NM_CUDA_CHECK(mamba_a_forward_cuda(A_log.raw(), A_log.dtype() == DType::bf16, static_cast<float*>(A.raw()),
                                       A_log.numel(), cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(A_log, "mamba_a_forward");
  dispatch_float(A_log.dtype(), "mamba_a_forward", [&](auto zero) {
    using T = decltype(zero);
    const T* a_log = A_log.data<T>();
    T* a = A.data<T>();
    for (int64_t h = 0; h < A_log.numel(); ++h) a[h] = -std::exp(a_log[h]);
  });
}

void mamba_a_backward(Context& ctx, const Tensor& A, const Tensor& dA, Tensor& dA_log) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  NM_CHECK(A.rank() == 1, "mamba_a_backward: A must be [nH], got {}", A.shape().str());
  expect_shape(dA, A.shape(), "mamba_a dA");
  expect_shape(dA_log, A.shape(), "mamba_a dA_log");
  expect_dtype(dA, A.dtype(), "mamba_a dA");
  // A is stat_dtype(T) and dA_log grad_dtype(T): both float32 unless T is float64.
  expect_dtype(dA_log, A.dtype(), "mamba_a dA_log");
#if NEMOTRON_CUDA
  if (A.device().is_cuda()) {
    expect_dtype(A, DType::f32, "mamba_a A on CUDA");
    NM_CUDA_CHECK(mamba_a_backward_cuda(static_cast<const float*>(A.raw()), static_cast<const float*>(dA.raw()),
                                        static_cast<float*>(dA_log.raw()), A.numel(), cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(A, "mamba_a_backward");
  dispatch_float(A.dtype(), "mamba_a_backward", [&](auto zero) {
    using T = decltype(zero);
    const T *a = A.data<T>(), *da = dA.data<T>();
    T* g = dA_log.data<T>();
    for (int64_t h = 0; h < A.numel(); ++h) g[h] += da[h] * a[h];
  });
}

}  // namespace nemotron::ops
