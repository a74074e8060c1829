// The attention kernels' entry points behind attention_cuda.cu's path choice (see attention_cuda.h).
#pragma once
#include "ops/attention_cuda.h"

namespace nemotron::ops::attn {

// d[b, h, t] = sum_c dout[b,t,h,c] * o[b,t,h,c] in float32 (both paths' backward start here).
cudaError_t row_dot(const AttentionCudaArgs& a, float* d, cudaStream_t s);

cudaError_t simt_forward(const AttentionCudaArgs& a, cudaStream_t s);
cudaError_t simt_backward(const AttentionCudaArgs& a, const float* d, cudaStream_t s);

// strips: 16-row strips per warp (1 or 2; 0 = the default), exposed for bench/cuda_attention.
cudaError_t flash_forward(const AttentionCudaArgs& a, cudaStream_t s, int strips = 0);
cudaError_t flash_backward(const AttentionCudaArgs& a, const float* d, cudaStream_t s);

}  // namespace nemotron::ops::attn
