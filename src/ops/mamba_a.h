// The Mamba-2 state decay rate from its log parameter (reference/architectures.md A.3.2):
//   A[h] = -exp(A_log[h]),  so  dA_log[h] += dA[h] * A[h].
// A_log is a parameter value (compute dtype T); A and dA are stat_dtype(T) (float32 for bfloat16:
// the scan's decay exp(dt A) needs it); dA_log is a parameter gradient in grad_dtype(T), accumulated.
#pragma once
#include "core/context.h"

namespace nemotron::ops {

// A_log [nH] -> A [nH] (overwritten).
void mamba_a_forward(Context& ctx, const Tensor& A_log, Tensor& A);
// A [nH] (the forward's output), dA [nH] -> dA_log [nH] (+=).
void mamba_a_backward(Context& ctx, const Tensor& A, const Tensor& dA, Tensor& dA_log);

}  // namespace nemotron::ops
