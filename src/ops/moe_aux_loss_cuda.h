// CUDA kernels of moe_aux_loss.h on raw pointers (nvcc sees no C++ core). scores, counts, psum
// float32; dlogits float32 or bfloat16 (`bf16`).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

struct MoeSeqAuxCudaArgs {
  const float* scores = nullptr;  // [B*S, E]
  float* counts = nullptr;        // [B, E]
  float* psum = nullptr;          // [B, E]
  void* dlogits = nullptr;        // [B*S, E], accumulated
  int64_t B = 0, S = 0, E = 0, K = 0;
  float weight = 0;
  bool bf16 = false;
};

constexpr int64_t kMoeSeqAuxMaxExperts = 1024;

cudaError_t moe_seq_aux_forward_cuda(const MoeSeqAuxCudaArgs& a, cudaStream_t stream);
cudaError_t moe_seq_aux_backward_cuda(const MoeSeqAuxCudaArgs& a, cudaStream_t stream);

}  // namespace nemotron::ops
