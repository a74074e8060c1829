// MoE routing for Nemotron 3 (reference/architectures.md A.7.2, A.7.3), per token n:
//   s = sigmoid(logits[n])                         scores [N, E]
//   q = s + e_score_correction_bias                used for the choice only
//   group-limited top-k on q: groups of E/n_group experts, group score = sum of its two best q,
//   keep the topk_group best groups, then the K best experts of those groups
//   w_j = s[I_j];  w /= (sum_j w_j + 1e-20) if norm_topk_prob;  w *= routed_scaling_factor
// Ties go to the lowest group / expert index, so the choice is deterministic. Experts of dropped
// groups are excluded outright (DeepSeek-V3 / vLLM); the HF remote code masks them to q = 0
// instead, which differs only when a kept expert has q < 0. topk_idx rows are sorted by q,
// best first. Only the K chosen scores get gradient; the bias gets none (it is a buffer).
// Dtypes (ops/CUDA.md): logits and dlogits are the compute dtype T (the gate GEMM's); scores, the
// bias, topk_w and dtopk_w are stat_dtype(T) (float32 for bf16: the router runs in float32, as
// Megatron's moe_router_dtype = fp32). topk_idx is int32 on the same device.
#pragma once
#include "core/context.h"

namespace nemotron::ops {

struct MoeRouterParams {
  int64_t num_experts = 0;  // E
  int64_t top_k = 0;        // K
  int64_t n_group = 1;
  int64_t topk_group = 1;
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.0;
  // Throws InputError naming the config field when the combination is impossible.
  void validate() const;
};

// scores = sigmoid(logits), logits [N, E] T -> scores [N, E] stat_dtype(T).
void moe_router_scores(Context& ctx, const Tensor& logits, Tensor& scores);
// The expert choice: scores [N, E], bias [E] (same dtype) -> topk_idx [N, K] int32. On CUDA,
// E <= 1024.
void moe_select_experts(Context& ctx, const MoeRouterParams& p, const Tensor& scores, const Tensor& bias,
                        Tensor& topk_idx);
// Combine weights of a given choice: scores [N, E], topk_idx [N, K] -> topk_w [N, K].
void moe_topk_weights(Context& ctx, const MoeRouterParams& p, const Tensor& scores, const Tensor& topk_idx,
                      Tensor& topk_w);
// All three: logits -> scores (saved for the backward), topk_idx, topk_w.
void moe_router_forward(Context& ctx, const MoeRouterParams& p, const Tensor& logits, const Tensor& bias,
                        Tensor& scores, Tensor& topk_idx, Tensor& topk_w);
// dtopk_w [N, K] (scores' dtype) -> dlogits [N, E] T (overwritten; zero outside the chosen
// experts), stat_dtype(T) == scores' dtype.
void moe_router_backward(Context& ctx, const MoeRouterParams& p, const Tensor& scores, const Tensor& topk_idx,
                         const Tensor& dtopk_w, Tensor& dlogits);

}  // namespace nemotron::ops
