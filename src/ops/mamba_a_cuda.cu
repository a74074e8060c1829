// A = -exp(A_log) and its gradient: nH scalars, one thread each.
#include <cuda_bf16.h>

#include "ops/cuda_vec_io.cuh"
#include "ops/mamba_a_cuda.h"

namespace nemotron::ops {

namespace {

template <class T>
__global__ void forward_kernel(const T* A_log, float* A, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) A[i] = -expf(vec_io::to_f(A_log[i]));
}

__global__ void backward_kernel(const float* A, const float* dA, float* dA_log, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dA_log[i] += dA[i] * A[i];
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + 255) / 256); }

}  // namespace

cudaError_t mamba_a_forward_cuda(const void* A_log, bool bf16, float* A, int64_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  if (bf16) forward_kernel<<<blocks_for(n), 256, 0, s>>>(static_cast<const __nv_bfloat16*>(A_log), A, n);
  else forward_kernel<<<blocks_for(n), 256, 0, s>>>(static_cast<const float*>(A_log), A, n);
  return cudaGetLastError();
}

cudaError_t mamba_a_backward_cuda(const float* A, const float* dA, float* dA_log, int64_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  backward_kernel<<<blocks_for(n), 256, 0, s>>>(A, dA, dA_log, n);
  return cudaGetLastError();
}

}  // namespace nemotron::ops
