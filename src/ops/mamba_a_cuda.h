// CUDA kernels of mamba_a.h on raw pointers (no C++ core here: nvcc compiles only kernels).
// A_log is float32 or bfloat16 (`bf16`); A, dA and dA_log are float32.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

cudaError_t mamba_a_forward_cuda(const void* A_log, bool bf16, float* A, int64_t n, cudaStream_t stream);
cudaError_t mamba_a_backward_cuda(const float* A, const float* dA, float* dA_log, int64_t n, cudaStream_t stream);

}  // namespace nemotron::ops
