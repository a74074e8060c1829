// CUDA kernel of cross_entropy.h on raw pointers (free of the C++ core). logits and dlogits are
// float32 or bfloat16 (`bf16`), dlogits may alias logits; mask is float32 (`mask_f32`) or the
// logits dtype, or null; losses are float32; targets int32 or int64 (`targets64`).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

struct CrossEntropyCudaArgs {
  const void* logits = nullptr;
  void* dlogits = nullptr;  // null: forward only
  const void* targets = nullptr;
  bool targets64 = false;
  const void* mask = nullptr;
  bool mask_f32 = false;
  float* losses = nullptr;
  int64_t N = 0, V = 0;
  float grad_scale = 1.0f;
  bool bf16 = false;
  int threads = 0;  // block size: 0 (the default, 512), 256, 512 or 1024 (a benchmark knob)
};

// Reads back (one 8-byte copy, which waits for the stream) the first row whose target is >= V
// into *bad_row, or -1 when all are in range.
cudaError_t softmax_cross_entropy_cuda(const CrossEntropyCudaArgs& a, cudaStream_t stream, int64_t* bad_row);

}  // namespace nemotron::ops
