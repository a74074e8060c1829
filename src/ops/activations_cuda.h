// CUDA kernels of activations.h on raw pointers (float32 or bfloat16 storage, float32 math). The
// dispatch in activations_cpu.cpp fills the arguments. Outputs may alias dy (in place).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

struct ActivationCudaArgs {
  const void* x = nullptr;   // relu2 input (its output for relu2_backward_from_output), or swiglu's gate
  const void* up = nullptr;  // swiglu's up
  const void* dy = nullptr;
  void* y = nullptr;         // forward output
  void* dx = nullptr;        // relu2 dx, or swiglu's dgate
  void* dup = nullptr;       // swiglu's dup
  int64_t n = 0;
  bool bf16 = false;
};

cudaError_t relu2_forward_cuda(const ActivationCudaArgs& args, cudaStream_t stream);
cudaError_t relu2_backward_cuda(const ActivationCudaArgs& args, cudaStream_t stream);
cudaError_t relu2_backward_from_output_cuda(const ActivationCudaArgs& args, cudaStream_t stream);
cudaError_t swiglu_forward_cuda(const ActivationCudaArgs& args, cudaStream_t stream);
cudaError_t swiglu_backward_cuda(const ActivationCudaArgs& args, cudaStream_t stream);

}  // namespace nemotron::ops
