// CUDA kernels of bias.h on raw pointers: y and b float32 or bfloat16 (`bf16`), dy likewise,
// db float32 (a parameter gradient, accumulated). The dispatch in bias_cpu.cpp fills the arguments.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

struct BiasCudaArgs {
  void* y = nullptr;         // forward: y[r, i] += b[i]
  const void* b = nullptr;
  const void* dy = nullptr;  // backward: db[i] += sum_r dy[r, i]
  float* db = nullptr;
  int64_t rows = 0, D = 0;
  bool bf16 = false;
};

cudaError_t bias_add_cuda(const BiasCudaArgs& args, cudaStream_t stream);
cudaError_t bias_backward_cuda(const BiasCudaArgs& args, cudaStream_t stream);

}  // namespace nemotron::ops
