#include "backend/cpu/blas.h"
#include "ops/dispatch.h"
#include "ops/matmul.h"

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
}  // namespace

void matmul(Context&, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, double alpha,
            double beta) {
  require_cpu(a, "matmul");
  MatDims A = mat_dims(a, "a"), B = mat_dims(b, "b"), C = mat_dims(c, "c");
  int64_t M = trans_a ? A.cols : A.rows, K = trans_a ? A.rows : A.cols;
  int64_t Kb = trans_b ? B.cols : B.rows, N = trans_b ? B.rows : B.cols;
  NM_CHECK(K == Kb && C.rows == M && C.cols == N, "matmul: {}{} x {}{} -> {}", a.shape().str(), trans_a ? "^T" : "",
           b.shape().str(), trans_b ? "^T" : "", c.shape().str());
  NM_CHECK(A.batch == C.batch && (B.batch == C.batch || b.rank() == 2), "matmul: batch mismatch {} {} {}",
           a.shape().str(), b.shape().str(), c.shape().str());
  NM_CHECK(a.dtype() == b.dtype() && b.dtype() == c.dtype(), "matmul: mixed dtypes");
  dispatch_float(a.dtype(), "matmul", [&](auto zero) {
    using T = decltype(zero);
    for (int64_t i = 0; i < C.batch; ++i) {
      const T* pa = a.data<T>() + i * A.rows * A.cols;
      const T* pb = b.data<T>() + (b.rank() == 2 ? 0 : i * B.rows * B.cols);
      T* pc = c.data<T>() + i * M * N;
      cpu::gemm<T>(trans_a, trans_b, M, N, K, static_cast<T>(alpha), pa, A.cols, pb, B.cols, static_cast<T>(beta), pc,
                   N);
    }
  });
}

void linear_forward(Context& ctx, const Tensor& x, const Tensor& w, Tensor& y) {
  NM_CHECK(w.rank() == 2 && x.dim(-1) == w.dim(1) && y.dim(-1) == w.dim(0), "linear: x {} W {} y {}",
           x.shape().str(), w.shape().str(), y.shape().str());
  int64_t rows = x.numel() / w.dim(1);
  Tensor x2 = x.view({rows, w.dim(1)});
  Tensor y2 = y.view({rows, w.dim(0)});
  matmul(ctx, x2, false, w, true, y2);
}

void linear_backward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& dy, Tensor* dx, Tensor* dw,
                     bool accumulate_dx) {
  int64_t rows = x.numel() / w.dim(1);
  Tensor x2 = x.view({rows, w.dim(1)});
  Tensor dy2 = dy.view({rows, w.dim(0)});
  if (dx) {
    Tensor dx2 = dx->view({rows, w.dim(1)});
    matmul(ctx, dy2, false, w, false, dx2, 1.0, accumulate_dx ? 1.0 : 0.0);
  }
  if (dw) matmul(ctx, dy2, true, x2, false, *dw, 1.0, 1.0);
}

}  // namespace nemotron::ops
