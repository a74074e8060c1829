// CUDA kernels of causal_conv1d.h on raw pointers (no C++ core here: nvcc compiles only kernels).
// x, w, bias, y, dy, dx are float32 or bfloat16 (`bf16`); dw and dbias are float32 parameter
// gradients, accumulated. w is [C, K] with rows contiguous (a row slice of [C_total, 1, K] is fine).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

// The largest kernel width the CUDA kernels take (Mamba-2 uses 4).
constexpr int64_t kCausalConv1dCudaMaxK = 4;
// The most channel parts one launch takes (Mamba's x, B and C).
constexpr int kCausalConv1dCudaMaxParts = 3;

// The channels come in `parts` tensors each [B, T, C[p]]: part p holds channels C[0] + .. + C[p-1]
// on of the concatenation that w, bias, dw and dbias cover (one part: the plain op).
struct CausalConv1dCudaArgs {
  const void* x[kCausalConv1dCudaMaxParts] = {};
  void* y[kCausalConv1dCudaMaxParts] = {};
  const void* dy[kCausalConv1dCudaMaxParts] = {};
  void* dx[kCausalConv1dCudaMaxParts] = {};  // overwritten
  int64_t C[kCausalConv1dCudaMaxParts] = {};
  int parts = 1;
  const void* w = nullptr;     // [sum C, K]
  const void* bias = nullptr;  // [sum C]; may be null (no conv bias)
  float* dw = nullptr;         // [sum C, K], +=
  float* dbias = nullptr;      // [sum C], +=; null exactly when bias is
  const int32_t* seq_idx = nullptr;  // [B, T] packed-sequence ids (causal_conv1d.h); null = none
  int64_t B = 0, T = 0, K = 0;
  bool bf16 = false;
};

cudaError_t causal_conv1d_forward_cuda(const CausalConv1dCudaArgs& a, cudaStream_t stream);
cudaError_t causal_conv1d_backward_cuda(const CausalConv1dCudaArgs& a, cudaStream_t stream);

}  // namespace nemotron::ops
