// The Mamba-2 selective state update continued across calls (reference/architectures.md A.3.2
// step 5, A.3.4): each sequence keeps its SSM state S [nH, P, N] in a slot, and its new tokens
// run the recurrence from it, token by token, per head h (group g(h) = h / (nH/G)):
//   S <- exp(dt_t A_h) S + dt_t x_t B_t^T,   y_t = S C_t + D_h x_t,
// leaving the state after its last new token in the slot. One new token per sequence is the
// single-token decode step; several are a prefill chunk, giving the same y and final state as
// ops/ssd_scan.h's ssd_scan_naive_forward with that initial state (the chunked scan equals it to
// rounding). Shapes: x, y [Ntot, nH, P]; dt [Ntot, nH] (softplus'ed, clamped); A, D [nH];
// Bm, Cm [Ntot, G, N]; state [slots, nH, P, N]; slot_ids [S], cu_seqlens [S+1] int32 (distinct
// slots). Dtypes as ssd_scan: x, Bm, Cm, D, y in the compute dtype T; dt, A and the state in
// stat_dtype(T) (the state is float32 under bf16, as mamba_ssm_cache_dtype). Inference only.
// CUDA (ssd_decode_cuda.h): float32 or bfloat16 (state float32), N <= 256, the index tensors int32 on the device.
#pragma once
#include "core/context.h"

namespace nemotron::ops {

struct SsdDecodeArgs {
  Tensor x, dt, A, Bm, Cm, D;
  Tensor slot_ids, cu_seqlens;
};

void ssd_decode(Context& ctx, const SsdDecodeArgs& args, Tensor& state, Tensor& y);

}  // namespace nemotron::ops
