// cuBLASLt GEMM on raw device pointers (matmul_cuda.cpp): row-major c[M, N] = alpha op(a) op(b)
// + beta c (+ bias[N] broadcast over rows), batched with element strides (stride_b = 0 shares b).
// a and b are one dtype; c is that dtype, or float32 when a/b are bfloat16. Always float32
// accumulation (no TF32). The dispatch in matmul_cpu.cpp fills the arguments from tensors.
// Small-batch bfloat16 linears (y = x W^T, 1..16 rows of x) go to the skinny GEMM instead
// (skinny_gemm_cuda.h) where it measured faster than cuBLASLt (skinny_gemm_wins in matmul_cuda.cpp).
#pragma once
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace nemotron::ops {

enum class GemmDType : uint8_t { f32, bf16 };

struct MatmulCudaArgs {
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  const void* bias = nullptr;  // [N] in c's dtype, added after the product (2-D only); optional
  GemmDType ab = GemmDType::f32, c_dtype = GemmDType::f32;
  bool trans_a = false, trans_b = false;
  int64_t M = 0, N = 0, K = 0;
  int64_t lda = 0, ldb = 0;  // row-major leading dims: the stored column counts of a and b
  int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;  // in elements
  float alpha = 1.0f, beta = 0.0f;
};

// Throws nemotron::Error on a cuBLAS failure or when no algorithm fits the shape.
void matmul_cuda(cublasLtHandle_t lt, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                 const MatmulCudaArgs& args);

// The skinny GEMM path on (the default) or off, process-wide: a benchmark's baseline switch
// (bench/cuda_rollout --skinny-gemm off, bench/cuda_skinny_gemm), set between steps, never
// while another thread runs matmuls.
void set_skinny_gemm_enabled(bool on);
bool skinny_gemm_enabled();
// cuBLASLt GEMMs leave `sms` multiprocessors free (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET = the
// device's count - sms), process-wide; 0 (the default) lets them take every one. Hopper's GEMM
// kernels are persistent (one block per SM until the last tile), so a collective queued beside
// one on another stream finds no SM until it ends: the NCCL communicator sets a margin while its
// overlapped collectives are pending (NcclCommunicator::set_overlap_sm_margin; Transformer Engine's
// comm-GEMM overlap does the same).
void set_gemm_sm_margin(int sms);
int gemm_sm_margin();
// Whether matmul_cuda sends these arguments to the skinny GEMM (enabled, supported, and the
// measured rule says it wins).
bool uses_skinny_gemm(const MatmulCudaArgs& args);

}  // namespace nemotron::ops
