// Attention of new queries against a paged KV cache (incremental decoding; reference/
// architectures.md A.5, the math of ops/attention.h). Sequence i of the call has n_i =
// cu_seqlens[i+1] - cu_seqlens[i] new tokens whose keys and values are already in the cache
// (kv_cache_decode.h), L_i = context_lens[i] tokens in all; new token j sits at position
// p = L_i - n_i + j and attends to cached positions s <= p (causal within the new tokens, all of
// the earlier context), GQA head j_kv = h / (nq / nkv):
//   o[n,h] = sum_{s<=p} softmax_s(q[n,h] . K[s,j_kv] / sqrt(hd)) V[s,j_kv],
// where position s of sequence i lies in block block_table[i, s / bs], row s % bs of the caches.
// Shapes: q, o [Ntot, nq, hd]; k_cache, v_cache [num_blocks, bs, nkv, hd]; block_table [S, M]
// int32 (M >= ceil(max L_i / bs)); cu_seqlens [S+1], context_lens [S] int32. Forward only (no
// lse, nothing saved): inference. One float dtype. CUDA (attention_decode_cuda.h): float32 or
// bfloat16, hd <= 256, the index tensors int32 on the device.
#pragma once
#include "core/context.h"

namespace nemotron::ops {

struct PagedAttentionMeta {
  Tensor block_table;   // [S, M] int32
  Tensor cu_seqlens;    // [S+1] int32, new-token offsets
  Tensor context_lens;  // [S] int32, cached tokens per sequence including the new ones
};

void attention_decode_forward(Context& ctx, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                              const PagedAttentionMeta& meta, Tensor& o);

}  // namespace nemotron::ops
