// CUDA kernels of rmsnorm.h on raw pointers (this header and the .cu file stay free of the
// C++ core so nvcc compiles only kernels). x, w, y, dy, dx, residual, sum, dx_add are float32 or
// bfloat16 (`bf16`); rstd and dw are float32. The dispatch in rmsnorm_cpu.cpp fills the arguments from tensors.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

struct RmsNormCudaArgs {
  const void* x = nullptr;
  const void* w = nullptr;
  void* y = nullptr;
  float* rstd = nullptr;
  const void* residual = nullptr;  // forward: normalise x + residual, written to sum, when set
  void* sum = nullptr;
  const void* dy = nullptr;
  void* dx = nullptr;
  const void* dx_add = nullptr;  // backward: added into dx when set (may alias dx)
  float* dw = nullptr;           // accumulated (+=)
  int64_t rows = 0, D = 0;
  float eps = 1e-5f;
  bool bf16 = false;
};

cudaError_t rmsnorm_forward_cuda(const RmsNormCudaArgs& a, cudaStream_t stream);
cudaError_t rmsnorm_backward_cuda(const RmsNormCudaArgs& a, cudaStream_t stream);

}  // namespace nemotron::ops
