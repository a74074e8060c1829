// CUDA kernel of dropout.h on raw pointers: x and y float32 or bfloat16 (`bf16`), n elements; the
// mask is Philox 4x32-10 computed in the kernel, word for word as core/rng.h's Philox::bits.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

struct DropoutCudaArgs {
  const void* x = nullptr;
  void* y = nullptr;
  int64_t n = 0;
  uint64_t seed = 0, stream = 0, threshold = 0;
  float scale = 1.0f;  // 1 / (1 - p)
  bool accumulate = false, bf16 = false;
};

cudaError_t dropout_cuda(const DropoutCudaArgs& args, cudaStream_t stream);

}  // namespace nemotron::ops
