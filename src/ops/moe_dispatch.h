// Token <-> expert permutation for MoE (reference/architectures.md A.7.3). A routing (topk_idx
// [N, K]) becomes a MoeDispatch handle built once and reused by dispatch, combine and both
// backwards (STYLE.md lesson 4): slots 0..N*K-1 are grouped by expert (expert e owns slots
// [expert_offset[e], expert_offset[e+1])), tokens ascending within an expert, so every expert's
// rows are one contiguous GEMM operand. Backwards overwrite; no atomics, fixed summation order.
// Dtypes (ops/CUDA.md): x, xs, ys, y and their gradients are the compute dtype T; the combine
// weights w and their gradient dw are stat_dtype(T) (float32 for bf16). Sums run in float32 (or
// the CPU's float64) and round once.
#pragma once
#include <vector>

#include "core/context.h"

namespace nemotron::ops {

struct MoeDispatch {
  int64_t num_tokens = 0, top_k = 0, num_experts = 0;
  std::vector<int64_t> tokens_per_expert;  // [E], on the host (it sizes the expert GEMMs); empty when
  std::vector<int64_t> expert_offset;      // [E + 1]  the counts stayed on the device
  Tensor counts;                           // [E] int32 on ctx's device: tokens_per_expert there
  Tensor slot_token;                       // [N*K] int32 on ctx's device: the token held by each slot
  Tensor slot_of;                          // [N, K] int32 on ctx's device: slot of token n's j-th expert
  int64_t num_slots() const { return num_tokens * top_k; }
};

// topk_idx [N, K] int32 on ctx's device -> the handle. On CUDA the counts and slots are built on
// the device and only the E counts come back to the host (one copy, which waits for the stream);
// with counts_to_host false they stay there (no wait, and no check that every entry names an
// expert in range: for routings our own selection made), for consumers that read `counts` on the
// device (grouped_linear_forward_counted).
MoeDispatch moe_make_dispatch(Context& ctx, const Tensor& topk_idx, int64_t num_experts, bool counts_to_host = true);

// The same handle from a routing the host holds (topk_idx [N*K], row-major [N, K]): a counting sort
// on the host, then its index tensors copied to ctx's device; no wait for the device. For routings
// the host made, e.g. expert parallelism's received rows (model/expert_exchange.h).
MoeDispatch moe_make_dispatch_host(Context& ctx, const std::vector<int32_t>& topk_idx, int64_t num_tokens,
                                   int64_t top_k, int64_t num_experts);

// x [N, d] -> xs [N*K, d], xs[slot] = x[slot_token[slot]].
void moe_dispatch_forward(Context& ctx, const MoeDispatch& m, const Tensor& x, Tensor& xs);
// dxs [N*K, d] -> dx [N, d], dx[n] = sum_j dxs[slot_of[n, j]].
void moe_dispatch_backward(Context& ctx, const MoeDispatch& m, const Tensor& dxs, Tensor& dx);

// ys [N*K, d], w [N, K] -> y [N, d], y[n] = sum_j w[n, j] ys[slot_of[n, j]].
void moe_combine_forward(Context& ctx, const MoeDispatch& m, const Tensor& ys, const Tensor& w, Tensor& y);
// dy [N, d] -> dys[slot_of[n, j]] = w[n, j] dy[n] and dw[n, j] = <dy[n], ys[slot_of[n, j]]>.
void moe_combine_backward(Context& ctx, const MoeDispatch& m, const Tensor& ys, const Tensor& w, const Tensor& dy,
                          Tensor& dys, Tensor& dw);

}  // namespace nemotron::ops
