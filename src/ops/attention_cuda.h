// CUDA kernels of attention.h on raw pointers (free of the C++ core so nvcc sees only kernels).
// q, k, v, o, dout, dq, dk, dv are float32 or bfloat16 (`bf16`), rows [B, T, heads, hd] dense;
// lse [B, nq, T] is float32 (stat_dtype) on both.
//
// Paths (attention_cuda.cu picks one):
//  - flash (bf16, hd % 8 == 0, 16-byte aligned rows): tensor-core kernels (mma.sync m16n8k16 bf16,
//    float32 accumulators) with an online softmax; T x T scores never reach memory. Head dims up
//    to 64 run in a 64-wide tile, up to 128 in a 128-wide one (padding columns are zero).
//  - simt (float32, or bf16 heads that the flash path cannot load): one warp per row, float32
//    registers; it exists for correctness, not speed.
// Head dims above 128 are refused (attention_cuda_max_hd).
//
// Backward (FlashAttention-2 style, deterministic, no atomics): D = rowsum(dO o O) first, then
// one kernel per key block that owns dK/dV of that block for all query heads of its KV group
// (accumulated in registers, fixed order), and a separate pass per query block for dQ. The dQ
// pass recomputes P and dP (about 1.4x the FLOPs of an atomic dQ) in exchange for bitwise
// reproducible gradients.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

constexpr int64_t attention_cuda_max_hd = 128;

struct AttentionCudaArgs {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;
  const void* dout = nullptr;  // backward only
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  int64_t B = 0, T = 0, nq = 0, nkv = 0, hd = 0;
  int64_t Tk = 0;  // key rows (attention.h: queries are the keys' last T rows); 0 = T
  bool bf16 = false;
  // [B, Tk] packed-sequence ids (attention.h) or null. The flash path takes it through a second
  // instance of each kernel (a call without it runs unchanged code) that masks keys of other
  // sequences and skips the key (query) blocks lying wholly before (after) the tile's sequences;
  // the simt path narrows its key/query loops to the row's sequence.
  const int32_t* seq_idx = nullptr;
};

cudaError_t attention_forward_cuda(const AttentionCudaArgs& a, cudaStream_t stream);
// Reads q, k, v, o, lse, dout; writes dq, dk, dv (overwrite).
cudaError_t attention_backward_cuda(const AttentionCudaArgs& a, cudaStream_t stream);

}  // namespace nemotron::ops
