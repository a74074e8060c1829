#include "backend/cpu/blas.h"
#include "core/op_profiler.h"
#include "ops/bias.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "ops/matmul_cuda.h"
#endif

namespace nemotron::ops {

namespace {
struct MatDims {
  int64_t batch, rows, cols;
};
MatDims mat_dims(const Tensor& t, const char* what) {
  NM_CHECK(t.rank() == 2 || t.rank() == 3, "matmul: {} must be 2-D or 3-D, got {}", what, t.shape().str());
  if (t.rank() == 2) return {1, t.dim(0), t.dim(1)};
  return {t.dim(0), t.dim(1), t.dim(2)};
}

#if NEMOTRON_CUDA
GemmDType gemm_dtype(DType t) { return t == DType::bf16 ? GemmDType::bf16 : GemmDType::f32; }

void matmul_on_cuda(Context& ctx, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c,
                    const MatDims& A, const MatDims& B, const MatDims& C, int64_t K, double alpha, double beta,
                    const Tensor* bias) {
  NM_CHECK(a.dtype() == DType::f32 || a.dtype() == DType::bf16, "matmul on CUDA: float32 or bfloat16, got {}",
           dtype_name(a.dtype()));
  NM_CHECK(c.dtype() == a.dtype() || (a.dtype() == DType::bf16 && c.dtype() == DType::f32),
           "matmul on CUDA: {} inputs cannot write a {} output", dtype_name(a.dtype()), dtype_name(c.dtype()));
  NM_CHECK(b.device() == a.device() && c.device() == a.device(), "matmul: a, b, c on different devices");
  if (C.rows == 0 || C.cols == 0 || C.batch == 0) return;
  if (K == 0) {  // an empty sum: c = beta c (+ bias)
    if (beta == 0.0) c.zero_();
    else if (beta != 1.0) scale_inplace(ctx, c, beta);
    if (bias) bias_add(ctx, c, *bias);
    return;
  }
  MatmulCudaArgs g;
  g.a = a.raw(), g.b = b.raw(), g.c = c.raw(), g.bias = bias ? bias->raw() : nullptr;
  g.ab = gemm_dtype(a.dtype()), g.c_dtype = gemm_dtype(c.dtype());
  g.trans_a = trans_a, g.trans_b = trans_b;
  g.M = C.rows, g.N = C.cols, g.K = K, g.lda = A.cols, g.ldb = B.cols;
  g.batch = C.batch, g.stride_a = A.rows * A.cols, g.stride_c = C.rows * C.cols;
  g.stride_b = b.rank() == 2 ? 0 : B.rows * B.cols;
  if (g.batch > 1 && g.stride_b == 0 && !trans_a) {  // a shared b: one GEMM over all batch rows
    g.M *= g.batch;
    g.batch = 1;
  }
  g.alpha = static_cast<float>(alpha), g.beta = static_cast<float>(beta);
  cuda::CudaBackend& be = cuda::cuda_backend(ctx);
  matmul_cuda(be.cublaslt(), be.lt_workspace(), cuda::CudaBackend::kLtWorkspaceBytes, be.stream(), g);
}
#endif

// single_row_gemv: a one-row x W^T (a decode step through a linear layer) goes through GEMV,
// which reads W once where OpenBLAS GEMM packs all of it (4x faster decode on the CPU). Only
// linear_forward asks: the other GEMMs keep one summation order whatever their row count.
void matmul_impl(Context& ctx, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, double alpha,
                 double beta, const Tensor* bias, bool single_row_gemv = false) {
  MatDims A = mat_dims(a, "a"), B = mat_dims(b, "b"), C = mat_dims(c, "c");
  int64_t M = trans_a ? A.cols : A.rows, K = trans_a ? A.rows : A.cols;
  int64_t Kb = trans_b ? B.cols : B.rows, N = trans_b ? B.rows : B.cols;
  NM_CHECK(K == Kb && C.rows == M && C.cols == N, "matmul: {}{} x {}{} -> {}", a.shape().str(), trans_a ? "^T" : "",
           b.shape().str(), trans_b ? "^T" : "", c.shape().str());
  NM_CHECK(A.batch == C.batch && (B.batch == C.batch || b.rank() == 2), "matmul: batch mismatch {} {} {}",
           a.shape().str(), b.shape().str(), c.shape().str());
  NM_CHECK(a.dtype() == b.dtype(), "matmul: a is {}, b is {}", dtype_name(a.dtype()), dtype_name(b.dtype()));
  profile_gemm_flops(ctx, 2.0 * static_cast<double>(C.batch) * static_cast<double>(M) * static_cast<double>(N) *
                              static_cast<double>(K));
  if (bias) {
    NM_CHECK(c.rank() == 2, "matmul: a bias needs a 2-D output, got {}", c.shape().str());
    expect_shape(*bias, {N}, "matmul bias");
    expect_dtype(*bias, c.dtype(), "matmul bias");
  }
#if NEMOTRON_CUDA
  if (a.device().is_cuda()) {
    matmul_on_cuda(ctx, a, trans_a, b, trans_b, c, A, B, C, K, alpha, beta, bias);
    return;
  }
#endif
  require_cpu(a, "matmul");
  NM_CHECK(b.dtype() == c.dtype(), "matmul: mixed dtypes on the CPU ({} inputs, {} output)", dtype_name(a.dtype()),
           dtype_name(c.dtype()));
  dispatch_float(a.dtype(), "matmul", [&](auto zero) {
    using T = decltype(zero);
    if (single_row_gemv && M == 1 && C.batch == 1 && !trans_a && trans_b) {
      cpu::gemv_rows<T>(N, K, static_cast<T>(alpha), b.data<T>(), B.cols, a.data<T>(), 1, static_cast<T>(beta),
                        c.data<T>());
      return;
    }
    for (int64_t i = 0; i < C.batch; ++i) {
      const T* pa = a.data<T>() + i * A.rows * A.cols;
      const T* pb = b.data<T>() + (b.rank() == 2 ? 0 : i * B.rows * B.cols);
      T* pc = c.data<T>() + i * M * N;
      cpu::gemm<T>(trans_a, trans_b, M, N, K, static_cast<T>(alpha), pa, A.cols, pb, B.cols, static_cast<T>(beta), pc,
                   N);
    }
  });
  if (bias) bias_add(ctx, c, *bias);
}
}  // namespace

void matmul(Context& ctx, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, double alpha,
            double beta) {
  OpScope scope(ctx, OpPhase::gemm, __func__);
  matmul_impl(ctx, a, trans_a, b, trans_b, c, alpha, beta, nullptr);
}

void linear_forward(Context& ctx, const Tensor& x, const Tensor& w, Tensor& y, const Tensor* bias) {
  OpScope scope(ctx, OpPhase::gemm, __func__);
  NM_CHECK(w.rank() == 2 && x.dim(-1) == w.dim(1) && y.dim(-1) == w.dim(0), "linear: x {} W {} y {}",
           x.shape().str(), w.shape().str(), y.shape().str());
  int64_t rows = x.numel() / w.dim(1);
  Tensor x2 = x.view({rows, w.dim(1)});
  Tensor y2 = y.view({rows, w.dim(0)});
  matmul_impl(ctx, x2, false, w, true, y2, 1.0, 0.0, bias, /*single_row_gemv=*/true);
}

void linear_backward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& dy, Tensor* dx, Tensor* dw,
                     bool accumulate_dx) {
  OpScope scope(ctx, OpPhase::gemm, __func__);
  int64_t rows = x.numel() / w.dim(1);
  Tensor x2 = x.view({rows, w.dim(1)});
  Tensor dy2 = dy.view({rows, w.dim(0)});
  if (dx) {
    Tensor dx2 = dx->view({rows, w.dim(1)});
    matmul(ctx, dy2, false, w, false, dx2, 1.0, accumulate_dx ? 1.0 : 0.0);
  }
  if (dw) {
    expect_dtype(*dw, grad_dtype(w.dtype()), "linear dW");
    matmul(ctx, dy2, true, x2, false, *dw, 1.0, 1.0);
  }
}

}  // namespace nemotron::ops
