// Our grouped bf16 GEMM kernel for grouped_matmul.h (grouped_gemm_wgmma.cu: Hopper wgmma, sm_90a;
// raw pointers, nvcc sees no C++ core). Each problem g: C_g[M_g, N_g] (row-major, ldc) = A_g B_g
// (bf16 in, float32 accumulate), where
//   A (m, k) is a[m * lda + k] when a_kmajor, else a[k * lda + m];
//   B (k, n) is b[n * ldb + k] when b_kmajor, else b[k * ldb + n];
// C is bf16 (overwritten) or, with c_f32_accumulate, float32 and added to (C += A B: parameter
// gradients), deterministically (no atomics; K summed in order). All problems run in one launch.
// Layouts: A and B K-major with a bf16 C (y = x W^T), A K-major and B N-major with a bf16 C
// (dx = dy W), both M/N-major with a float32 C += (dW += dy^T x). Requirements (else the caller
// uses cuBLAS): grouped_gemm_wgmma_supported(), the contiguous dimension of every operand, M and N
// of M/N-major operands, lda/ldb/ldc multiples of 8, pointers 16-byte aligned.
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

cudaError_t grouped_gemm_wgmma_bf16_cuda(const GroupedGemmProblem* problems, int count, bool a_kmajor,
                                         bool b_kmajor, bool c_f32_accumulate, cudaStream_t stream);
// The forward with the experts' row counts on the device (no host synchronisation: MoE decode).
// Expert e owns rows [o_e, o_e + counts[e]) of A and C, o_e the sum of counts[0..e), and the
// weight b[e]: C_e [counts[e], n] = A_e [., k] B_e^T with B_e [n, k] (A and B K-major, bf16 C,
// lda = ldb = k, ldc = n). The problems and their tile prefix are built on the device by one
// small kernel; the grid is sized for the worst case of `rows` rows and the tiles past the real
// total exit at once. The tiles that run compute exactly what the host-built launch computes.
struct ExpertRowsGemm {
  const int32_t* counts = nullptr;  // [experts] on the device; they sum to rows
  int experts = 0;
  const void* const* b = nullptr;  // [experts] device array of the weights' device pointers
  const void* a = nullptr;         // [rows, k]
  void* c = nullptr;               // [rows, n]
  int rows = 0, n = 0, k = 0;
};
cudaError_t grouped_gemm_wgmma_bf16_expert_rows_cuda(const ExpertRowsGemm& g, cudaStream_t stream);
// Whether the current device runs it (a Hopper GPU and a binary with sm_90a code).
bool grouped_gemm_wgmma_supported();

}  // namespace nemotron::ops
