// CUDA kernel of sample_rows.h on raw pointers (free of the C++ core): one thread block per row.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

struct SampleRowsCudaArgs {
  const void* logits = nullptr;      // [S, V] float32 or bfloat16 (elem_size 4 or 2)
  const double* params = nullptr;    // [S, 2] on the device: (1 / temperature, or 0 = greedy; u)
  int32_t* tokens = nullptr;         // [S] out
  float* logprobs = nullptr;         // [S, 2] out: (logprob, raw_logprob)
  int64_t S = 0, V = 0;
  int elem_size = 4;
};

cudaError_t sample_rows_cuda(const SampleRowsCudaArgs& a, cudaStream_t stream);

}  // namespace nemotron::ops
