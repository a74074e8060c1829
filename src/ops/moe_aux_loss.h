// Megatron's sequence-level MoE load-balancing loss (reference/architectures.md A.7.4), the parts
// that touch every router score. For B sequences of S tokens, scores s [B*S, E] (sigmoid, no
// bias), p_t = s_t / (sum_i s_ti + 1e-20) (p = s when top_k = 1) and m_ti = 1 when i is in the
// top-k of s_t (no bias, no groups, ties to the lowest index):
//   counts[b, i] = sum_{t in b} m_ti,   psum[b, i] = sum_{t in b} p_ti.
// The loss, coeff * E / (K S^2 B) * sum_bi counts_bi psum_bi, is then a dot product of [B, E]
// vectors (the caller's); its backward treats the counts as constants.
// Dtypes: scores, counts, psum are stat_dtype(T) (float32 for bf16); dlogits is T.
#pragma once
#include "core/context.h"

namespace nemotron::ops {

// scores [B*S, E] -> counts [B, E], psum [B, E] (overwritten). On CUDA, E <= 1024.
void moe_seq_aux_forward(Context& ctx, int64_t top_k, const Tensor& scores, int64_t sequences, Tensor& counts,
                         Tensor& psum);
// dlogits [B*S, E] += weight * d/dlogits sum_bi counts_bi psum_bi  (through p and the sigmoid).
void moe_seq_aux_backward(Context& ctx, int64_t top_k, const Tensor& scores, const Tensor& counts, double weight,
                          Tensor& dlogits);

}  // namespace nemotron::ops
