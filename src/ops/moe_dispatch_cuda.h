// CUDA kernels of moe_dispatch.h on raw pointers (nvcc sees no C++ core). Rows are float32 or
// bfloat16 (`bf16`); combine weights and their gradient float32; indices int32.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

// Building the handle: counts [E] then the slots, both on the device.
struct MoeMakeDispatchCudaArgs {
  const int32_t* topk_idx = nullptr;  // [N, K]
  int32_t* counts = nullptr;          // [E] out
  int32_t* slot_token = nullptr;      // [N*K] out
  int32_t* slot_of = nullptr;         // [N, K] out
  int64_t N = 0, K = 0, E = 0;
};
cudaError_t moe_count_experts_cuda(const MoeMakeDispatchCudaArgs& a, cudaStream_t stream);
cudaError_t moe_place_slots_cuda(const MoeMakeDispatchCudaArgs& a, cudaStream_t stream);  // after the counts

struct MoePermuteCudaArgs {
  const int32_t* slot_token = nullptr;
  const int32_t* slot_of = nullptr;
  int64_t N = 0, K = 0, d = 0;
  const void* src = nullptr;  // x (dispatch), dxs (dispatch backward), ys (combine)
  void* dst = nullptr;        // xs, dx, y; combine backward: dys
  const float* w = nullptr;   // combine weights [N, K]
  const void* dy = nullptr;   // combine backward
  float* dw = nullptr;        // combine backward [N, K]
  bool bf16 = false;
};
cudaError_t moe_dispatch_forward_cuda(const MoePermuteCudaArgs& a, cudaStream_t stream);
cudaError_t moe_dispatch_backward_cuda(const MoePermuteCudaArgs& a, cudaStream_t stream);
cudaError_t moe_combine_forward_cuda(const MoePermuteCudaArgs& a, cudaStream_t stream);
cudaError_t moe_combine_backward_cuda(const MoePermuteCudaArgs& a, cudaStream_t stream);

}  // namespace nemotron::ops
