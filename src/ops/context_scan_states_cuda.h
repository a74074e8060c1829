// CUDA kernels of context_scan_states.h on raw pointers (float32; no C++ core here).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

// Sizes of a composition: C ranks, B rows (2B local rows), nH heads, S state elements per row,
// L tokens per chunk (for seq).
struct ContextStatesCudaArgs {
  const float* in = nullptr;     // F (forward) or d0 (backward), [C, 2B, S]
  const float* decay = nullptr;  // [C, 2B, nH]
  const int32_t* seq = nullptr;  // [C, 2B, L] or null
  float* out = nullptr;          // [2B, S]
  int64_t C = 0, B = 0, nH = 0, S = 0, L = 0;
  int rank = 0;
};

cudaError_t chunk_decay_cuda(const float* dt, const float* A, float* decay, int64_t R, int64_t L, int64_t nH,
                             cudaStream_t stream);
cudaError_t context_states_forward_cuda(const ContextStatesCudaArgs& a, cudaStream_t stream);
cudaError_t context_states_backward_cuda(const ContextStatesCudaArgs& a, cudaStream_t stream);

}  // namespace nemotron::ops
