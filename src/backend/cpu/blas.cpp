#include "backend/cpu/blas.h"

#include <cblas.h>

#include <algorithm>

namespace nemotron::cpu {

template <>
void gemm<float>(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                 const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B,
              ldb, beta, C, ldc);
}

template <>
void gemm<double>(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
                  const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B,
              ldb, beta, C, ldc);
}

// OpenBLAS scales y by beta (0 * NaN = NaN in fresh memory) and skips it for K = 0: zero y first.
template <>
void gemv_rows<float>(int64_t N, int64_t K, float alpha, const float* B, int64_t ldb, const float* x, int64_t incx,
                      float beta, float* y) {
  if (N == 0) return;
  if (beta == 0) std::fill(y, y + N, 0.0f);
  if (K > 0) cblas_sgemv(CblasRowMajor, CblasNoTrans, N, K, alpha, B, ldb, x, incx, beta, y, 1);
}

template <>
void gemv_rows<double>(int64_t N, int64_t K, double alpha, const double* B, int64_t ldb, const double* x, int64_t incx,
                       double beta, double* y) {
  if (N == 0) return;
  if (beta == 0) std::fill(y, y + N, 0.0);
  if (K > 0) cblas_dgemv(CblasRowMajor, CblasNoTrans, N, K, alpha, B, ldb, x, incx, beta, y, 1);
}

}  // namespace nemotron::cpu
