// CUDA kernel of attention_decode.h on raw pointers (free of the C++ core). q, the caches and o are
// float32 or bfloat16 (`bf16`); the index arrays are int32 on the device and are never read by the
// host (no synchronisation per layer). hd <= kAttentionDecodeCudaMaxHd.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

constexpr int64_t kAttentionDecodeCudaMaxHd = 256;

struct AttentionDecodeCudaArgs {
  const void* q = nullptr;        // [Ntot, nq, hd]
  const void* k_cache = nullptr;  // [num_blocks, bs, nkv, hd]
  const void* v_cache = nullptr;
  const int32_t* block_table = nullptr;   // [S, M]
  const int32_t* cu_seqlens = nullptr;    // [S+1]
  const int32_t* context_lens = nullptr;  // [S]
  void* o = nullptr;              // [Ntot, nq, hd]
  float* workspace = nullptr;     // attention_decode_cuda_workspace(*this) floats (none when that is 0)
  int64_t Ntot = 0, S = 0, nq = 0, nkv = 0, hd = 0, bs = 0, M = 0, num_blocks = 0;
  bool bf16 = false;
};

// A row whose sequence has fewer cached tokens than new ones, or names a block outside the table
// or the pool, gets NaN (the kernel cannot throw; the CPU reference refuses such input).
// Float32 scratch the call needs (the bf16 chunk kernel's partial results; 0: none), from the
// shapes and pointers alone.
int64_t attention_decode_cuda_workspace(const AttentionDecodeCudaArgs& a);

cudaError_t attention_decode_forward_cuda(const AttentionDecodeCudaArgs& a, cudaStream_t stream);

}  // namespace nemotron::ops
