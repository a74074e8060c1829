// Our grouped bf16 GEMM kernel for grouped_matmul.h (raw pointers; nvcc sees no C++ core).
// Each problem g: C_g[M_g, N_g] (row-major, ldc) = A_g B_g (bf16 in, float32 accumulate), where
//   A (m, k) is a[m * lda + k] when a_kmajor, else a[k * lda + m];
//   B (k, n) is b[n * ldb + k] when b_kmajor, else b[k * ldb + n];
// C is bf16 (overwritten) or, with c_f32_accumulate, float32 and added to (C += A B: parameter
// gradients). All problems run in one launch. Requirements (else the caller uses cuBLAS): the
// contiguous dimension of every operand and lda/ldb a multiple of 8, pointers 16-byte aligned.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

struct GroupedGemmProblem {
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  int m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
};

cudaError_t grouped_gemm_bf16_cuda(const GroupedGemmProblem* problems, int count, bool a_kmajor, bool b_kmajor,
                                   bool c_f32_accumulate, cudaStream_t stream);
// The same contract on Hopper's wgmma (grouped_gemm_wgmma.cu; sm_90a). Layouts: (A, B) K-major
// with a bf16 C, A K-major and B N-major with a bf16 C, both M/N-major with a float32 C +=.
cudaError_t grouped_gemm_wgmma_bf16_cuda(const GroupedGemmProblem* problems, int count, bool a_kmajor,
                                         bool b_kmajor, bool c_f32_accumulate, cudaStream_t stream);
// Its CTA tile: 128 x 128 (one warpgroup, the default) or 128 x 256 (two). For benchmarks.
void set_grouped_gemm_wgmma_warpgroups(int warpgroups);
// Whether the current device runs it (a Hopper GPU and a binary with sm_90a code).
bool grouped_gemm_wgmma_supported();

}  // namespace nemotron::ops
