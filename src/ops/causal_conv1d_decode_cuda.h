// CUDA kernel of causal_conv1d_decode.h on raw pointers (free of the C++ core). x, w, bias, state
// and y are float32 or bfloat16 (`bf16`); slot_ids and cu_seqlens are int32 on the device and are
// never read by the host. K <= kCausalConv1dDecodeCudaMaxK.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

constexpr int64_t kCausalConv1dDecodeCudaMaxK = 4;

struct CausalConv1dDecodeCudaArgs {
  const void* x = nullptr;     // [Ntot, C]
  const void* w = nullptr;     // [C, K]
  const void* bias = nullptr;  // [C] or null
  void* state = nullptr;       // [slots, K-1, C]
  void* y = nullptr;           // [Ntot, C]
  const int32_t* slot_ids = nullptr;    // [S]
  const int32_t* cu_seqlens = nullptr;  // [S+1]
  int64_t S = 0, C = 0, K = 0, slots = 0;
  bool bf16 = false;
};

// A sequence whose slot lies outside [0, slots) gets NaN rows and touches no state.
cudaError_t causal_conv1d_decode_cuda(const CausalConv1dDecodeCudaArgs& a, cudaStream_t stream);

}  // namespace nemotron::ops
