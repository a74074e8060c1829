// Row-major GEMM on raw host pointers through OpenBLAS, for float and double:
// C[M,N] = alpha * op(A) op(B) + beta * C, op(X) = X or X^T, leading dimensions in elements.
#pragma once
#include <cstdint>

namespace nemotron::cpu {

template <class T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
          const T* B, int64_t ldb, T beta, T* C, int64_t ldc);

// y[N] = alpha * B x + beta * y for row-major B [N, K] (x [K] with stride incx): one row through
// a linear layer (a decode step), where GEMM would pack all of B per call. beta = 0 overwrites y.
template <class T>
void gemv_rows(int64_t N, int64_t K, T alpha, const T* B, int64_t ldb, const T* x, int64_t incx, T beta, T* y);

}  // namespace nemotron::cpu
