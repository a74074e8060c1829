// A decode step's fused q/k/v projection output handed on in one pass: the q columns rotated by
// RoPE (rope.h) into q, the k columns rotated and the v columns copied into the paged KV caches
// (kv_cache_decode.h). The same as split_columns (fused_projection.h) into q, k, v, rope_forward
// on q and k, and kv_cache_write_decode of k and v, which is what the CPU runs; on CUDA one kernel
// replaces those five launches per attention layer: in a profiled decode step of the 8B Llama
// shape on an H200, 0.97 -> 0.27 ms at batch 1 and 1.29 -> 0.33 ms at batch 256 (the five were
// mostly launches and RoPE's serial loop over heads; bench/results/decode_h200x1.log).
// Shapes: qkv [Ntot, (nq + 2 nkv) hd] (q's columns, then k's, then v's, as model/fused_linears.h
// stacks them), q [Ntot, nq, hd] (any shape of those elements), position_ids and slot_mapping
// [Ntot] int32 (any shape of Ntot elements), caches [num_blocks, block_size, nkv, hd]; one float
// dtype. freq null: no rotation (an attention layer without RoPE). CUDA: float32 or bfloat16,
// hd even, the index tensors on the device.
#pragma once
#include "core/context.h"
#include "ops/rope_freq.h"

namespace nemotron::ops {

void qkv_rope_cache_write(Context& ctx, const Tensor& qkv, const RopeFreq* freq, const Tensor& position_ids,
                          const Tensor& slot_mapping, Tensor& q, Tensor& k_cache, Tensor& v_cache);

}  // namespace nemotron::ops
