// Writes new keys (or values) into a paged KV cache (the attention side of incremental decoding):
//   cache[slot_mapping[n] / bs, slot_mapping[n] % bs, :, :] = src[n, :, :]   for every new token n,
// where bs = block_size and slot_mapping[n] = block * bs + offset names the cache row that token
// n's position maps to through its sequence's block table. Rows not named are left untouched.
// Shapes: src [Ntot, nkv, hd] (any leading shape with Ntot rows), slot_mapping [Ntot] int32,
// cache [num_blocks, block_size, nkv, hd], one float dtype. CUDA (kv_cache_decode_cuda.h): float32
// or bfloat16, slot_mapping int32 on the device.
#pragma once
#include "core/context.h"

namespace nemotron::ops {

void kv_cache_write_decode(Context& ctx, const Tensor& src, const Tensor& slot_mapping, Tensor& cache);

}  // namespace nemotron::ops
