// The causal depthwise conv + SiLU of Mamba-2 (ops/causal_conv1d.h, reference/architectures.md
// A.3.2 step 2, A.3.4) continued across calls: each sequence keeps its last K-1 conv inputs as a
// window in its state slot, so feeding a sequence's tokens in pieces gives what one
// causal_conv1d_forward over the whole sequence gives. For sequence i (new-token rows
// [cu_seqlens[i], cu_seqlens[i+1]), window W = state[slot_ids[i]] [K-1, C], oldest first, then the
// new inputs X):
//   y[t,c] = SiLU(bias[c] + sum_{k<K} w[c,k] * [W; X][t + k, c])
// and afterwards state[slot] = the last K-1 rows of [W; X]. A zeroed window is the left zero
// padding of a fresh sequence. Shapes: x, y [Ntot, C] (any leading shape with Ntot rows);
// w [C, K] or [C, 1, K]; bias [C] or undefined; state [slots, K-1, C]; slot_ids [S],
// cu_seqlens [S+1] int32 (distinct slots). One float dtype. Inference: nothing saved, no backward.
// CUDA (causal_conv1d_decode_cuda.h): float32 or bfloat16, K <= 4, the index tensors int32 on the device.
#pragma once
#include "core/context.h"

namespace nemotron::ops {

void causal_conv1d_decode(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& state,
                          const Tensor& slot_ids, const Tensor& cu_seqlens, Tensor& y);

}  // namespace nemotron::ops
