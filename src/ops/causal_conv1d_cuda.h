// CUDA kernels of causal_conv1d.h on raw pointers (no C++ core here: nvcc compiles only kernels).
// x, w, bias, y, dy, dx are float32 or bfloat16 (`bf16`); dw and dbias are float32 parameter
// gradients, accumulated. w is [C, K] with rows contiguous (a row slice of [C_total, 1, K] is fine).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

// The largest kernel width the CUDA kernels take (Mamba-2 uses 4).
constexpr int64_t kCausalConv1dCudaMaxK = 4;

struct CausalConv1dCudaArgs {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* bias = nullptr;  // may be null (no conv bias)
  void* y = nullptr;
  const void* dy = nullptr;
  void* dx = nullptr;       // overwritten
  float* dw = nullptr;      // [C, K], +=
  float* dbias = nullptr;   // [C], +=; null exactly when bias is
  const int32_t* seq_idx = nullptr;  // [B, T] packed-sequence ids (causal_conv1d.h); null = none
  int64_t B = 0, T = 0, C = 0, K = 0;
  bool bf16 = false;
};

cudaError_t causal_conv1d_forward_cuda(const CausalConv1dCudaArgs& a, cudaStream_t stream);
cudaError_t causal_conv1d_backward_cuda(const CausalConv1dCudaArgs& a, cudaStream_t stream);

}  // namespace nemotron::ops
