// CUDA kernels of vocab_parallel_cross_entropy.h on raw pointers (free of the C++ core). logits
// and dlogits are float32 or bfloat16 (`bf16`), dlogits may alias logits; stats, gathered, lse and
// losses are float32; mask is float32 (`mask_f32`) or bfloat16, or null; targets int32 or int64
// (`targets64`) on the device.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

struct VocabShardCudaArgs {
  const void* logits = nullptr;  // [N, Vl]
  void* dlogits = nullptr;       // [N, Vl] (grad)
  const void* targets = nullptr; // [N], global ids
  bool targets64 = false;
  const void* mask = nullptr;    // [N] or null (combine, grad)
  bool mask_f32 = false;
  float* stats = nullptr;           // [N, 3] (stats)
  const float* gathered = nullptr;  // [shards, N, 3] (combine)
  float* lse = nullptr;             // [N] (combine writes, grad reads)
  float* losses = nullptr;          // [N] (combine)
  int64_t N = 0, Vl = 0, vocab_begin = 0, shards = 0;
  int64_t vocab_size = 0;  // stats: > 0 flags targets >= vocab_size
  float grad_scale = 1.0f;
  bool bf16 = false;
};

// With a.vocab_size > 0, reads back (one 8-byte copy, which waits for the stream) the first row
// whose target is >= vocab_size into *bad_row (-1 when none); otherwise never waits.
cudaError_t vocab_shard_stats_cuda(const VocabShardCudaArgs& a, cudaStream_t stream, int64_t* bad_row);
cudaError_t vocab_shard_combine_cuda(const VocabShardCudaArgs& a, cudaStream_t stream);
cudaError_t vocab_shard_grad_cuda(const VocabShardCudaArgs& a, cudaStream_t stream);

}  // namespace nemotron::ops
