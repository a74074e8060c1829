// Token embedding lookup: y[n, :] = W[ids[n], :]. ids are int32 or int64 in [0, V); the op
// checks the range and names the offending position (on CUDA with device ids: a flag the kernel
// sets, read back once per call, which waits for the stream). Backward scatters:
// dW[ids[n]] += dy[n], with dW a parameter gradient in grad_dtype (float32 for bf16 dy).
// Deterministic on both devices: repeated ids add in position order (CUDA sorts the ids).
#pragma once
#include "core/context.h"

namespace nemotron::ops {

// ids [N] (any shape, flattened), W [V, D] -> y [N, D] (y may be viewed as [B, T, D]).
void embedding_forward(Context& ctx, const Tensor& ids, const Tensor& w, Tensor& y);
void embedding_backward(Context& ctx, const Tensor& ids, const Tensor& dy, Tensor& dw);

}  // namespace nemotron::ops
