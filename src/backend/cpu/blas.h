// Row-major GEMM on raw host pointers through OpenBLAS, for float and double:
// C[M,N] = alpha * op(A) op(B) + beta * C, op(X) = X or X^T, leading dimensions in elements.
#pragma once
#include <cstdint>

namespace nemotron::cpu {

template <class T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
          const T* B, int64_t ldb, T beta, T* C, int64_t ldc);

}  // namespace nemotron::cpu
