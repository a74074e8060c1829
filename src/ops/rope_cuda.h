// CUDA kernel of rope.h on raw pointers (free of the C++ core). x and y are float32 or bfloat16
// (`bf16`), [B, T, nh, hd] dense; y may alias x.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/rope_freq.h"

namespace nemotron::ops {

struct RopeCudaArgs {
  const void* x = nullptr;
  void* y = nullptr;
  int64_t B = 0, T = 0, nh = 0, hd = 0;
  RopeFreq freq;  // theta and the optional llama3 scaling
  int64_t position_offset = 0;
  const int32_t* position_ids = nullptr;  // [B, T] or null (position of token t = t)
  double sign = 1.0;  // +1 forward, -1 backward (rotation by the negative angle)
  bool bf16 = false;
};

cudaError_t rope_cuda(const RopeCudaArgs& a, cudaStream_t stream);

}  // namespace nemotron::ops
