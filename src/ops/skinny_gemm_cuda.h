// The skinny GEMM of small-batch decoding on raw device pointers (skinny_gemm_cuda.cu): y[M, N] =
// alpha x[M, K] W[N, K]^T (+ beta y) (+ bias[N]) for M = 1..16 rows, x and W bfloat16, y bfloat16
// or float32, float32 accumulation. At these M a linear layer is a stream of its weights: the
// kernel reads W once, 16 bytes per thread per load, and multiplies on the tensor cores
// (mma.sync m16n8k16: 16 rows of W by up to 8 rows of x per instruction). matmul_cuda
// (matmul_cuda.cpp) sends it the shapes where it measured faster than cuBLASLt.
// Each output row's sum runs in one order whatever M is: rows are batch-invariant for M <= 16.
// Few rows of W against many multiprocessors: K is split over a cluster of blocks per 16-row tile
// (skinny_gemm_k_splits), their sums added in a fixed order: still deterministic and batch-invariant.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

struct SkinnyGemmCudaArgs {
  const void* x = nullptr;     // [M, K] bfloat16, rows lda elements apart
  const void* w = nullptr;     // [N, K] bfloat16, rows ldw elements apart
  void* y = nullptr;           // [M, N] bfloat16 or float32 (y_f32), rows N elements apart
  const void* bias = nullptr;  // [N] in y's dtype, added last; optional
  int64_t M = 0, N = 0, K = 0, lda = 0, ldw = 0;
  bool y_f32 = false;
  float alpha = 1.0f, beta = 0.0f;
  // Blocks splitting K per 16-row tile: 0 chooses from the shape (skinny_gemm_k_splits), 1 splits
  // nothing (the benchmarks' baseline), at most 8.
  int k_splits = 0;
};

constexpr int64_t kSkinnyGemmMaxRows = 16;

// True when the kernel can run these arguments: 1 <= M <= 16, K, lda and ldw multiples of 8,
// x and W 16-byte aligned.
bool skinny_gemm_supported(const SkinnyGemmCudaArgs& a);
// The K split the kernel runs for these arguments on a device with `sms` multiprocessors: 1
// unless the 16-row tiles are at most half the multiprocessors, then as many as give each
// multiprocessor one block (every warp keeping at least one 128-column chunk of K), at most 8.
// Depends on N and K only, never on M.
int skinny_gemm_k_splits(const SkinnyGemmCudaArgs& a, int sms);
cudaError_t skinny_gemm_cuda(const SkinnyGemmCudaArgs& a, cudaStream_t stream);

}  // namespace nemotron::ops
