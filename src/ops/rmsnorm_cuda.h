// CUDA kernels of rmsnorm.h on raw pointers (this header and the .cu file stay free of the
// C++ core so nvcc compiles only kernels). x, w, y, dy, dx, dw are float32 or bfloat16 (`bf16`),
// rstd is float32. The dispatch in rmsnorm_cpu.cpp fills the arguments from tensors.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

struct RmsNormCudaArgs {
  const void* x = nullptr;
  const void* w = nullptr;
  void* y = nullptr;
  float* rstd = nullptr;
  const void* dy = nullptr;
  void* dx = nullptr;
  void* dw = nullptr;  // accumulated (+=)
  int64_t rows = 0, D = 0;
  float eps = 1e-5f;
  bool bf16 = false;
};

cudaError_t rmsnorm_forward_cuda(const RmsNormCudaArgs& a, cudaStream_t stream);
cudaError_t rmsnorm_backward_cuda(const RmsNormCudaArgs& a, cudaStream_t stream);

}  // namespace nemotron::ops
