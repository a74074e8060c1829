// CUDA kernels of moe_router.h on raw pointers (nvcc sees no C++ core). logits and dlogits are
// float32 or bfloat16 (`bf16`); scores, bias, topk_w and dtopk_w are float32; topk_idx int32.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

struct MoeRouterCudaArgs {
  const void* logits = nullptr;
  float* scores = nullptr;        // written by the scores kernel, read by the others
  const float* bias = nullptr;    // selection-only correction; null = none
  int32_t* topk_idx = nullptr;
  float* topk_w = nullptr;
  const float* dtopk_w = nullptr;
  void* dlogits = nullptr;
  int64_t N = 0, E = 0, K = 0, n_group = 1, topk_group = 1;
  bool norm_topk_prob = true;
  float scale = 1.0f;
  bool bf16 = false;
};

constexpr int64_t kMoeRouterMaxExperts = 1024;  // the selection keeps a token's E scores in shared memory

cudaError_t moe_router_scores_cuda(const MoeRouterCudaArgs& a, cudaStream_t stream);
cudaError_t moe_select_experts_cuda(const MoeRouterCudaArgs& a, cudaStream_t stream);
cudaError_t moe_topk_weights_cuda(const MoeRouterCudaArgs& a, cudaStream_t stream);
cudaError_t moe_router_backward_cuda(const MoeRouterCudaArgs& a, cudaStream_t stream);

}  // namespace nemotron::ops
