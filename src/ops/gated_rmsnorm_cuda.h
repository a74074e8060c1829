// CUDA kernels of gated_rmsnorm.h on raw pointers (no C++ core here: nvcc compiles only kernels).
// y, z, w, out, dout, dy, dz are float32 or bfloat16 (`bf16`); rstd is float32 (stat_dtype) and
// dw a float32 parameter gradient, accumulated.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

// The largest group (d / n_groups channels) the backward takes: its per-warp dw accumulators live
// in 48 KiB of shared memory.
constexpr int64_t kGatedRmsNormCudaMaxGroup = 12288;

struct GatedRmsNormCudaArgs {
  const void* y = nullptr;
  const void* z = nullptr;
  const void* w = nullptr;
  void* out = nullptr;         // forward: written; backward: written when given (the forward's output)
  float* rstd = nullptr;      // [rows, G]
  const void* dout = nullptr;
  void* dy = nullptr;         // overwritten
  void* dz = nullptr;         // overwritten
  float* dw = nullptr;        // [d], +=
  int64_t rows = 0, d = 0, G = 1;
  float eps = 1e-5f;
  bool bf16 = false;
};

cudaError_t gated_rmsnorm_forward_cuda(const GatedRmsNormCudaArgs& a, cudaStream_t stream);
cudaError_t gated_rmsnorm_backward_cuda(const GatedRmsNormCudaArgs& a, cudaStream_t stream);

}  // namespace nemotron::ops
