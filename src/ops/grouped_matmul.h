// The routed experts' linear layers on an expert-major slot matrix (ops/moe_dispatch.h): expert e
// owns rows [offsets[e], offsets[e+1]) of x and y, and its own weight W_e [out, in] (separate
// tensors: the Hub's per-expert parameters). Empty experts (no rows) are skipped.
//   forward:   y[rows_e] = x[rows_e] W_e^T
//   backward:  dx[rows_e] = dy[rows_e] W_e (overwritten), dW_e += dy[rows_e]^T x[rows_e]
// Dtypes (ops/CUDA.md): x, y, dx, dy and the weights are the compute dtype T; dW_e are
// grad_dtype(T) (float32 for bf16, accumulated in float32). On CUDA every product is one launch
// over all experts (float32 compute): our grouped wgmma kernel for bf16 (deterministic: no
// atomics, K summed in a fixed order), cuBLAS's grouped GEMM otherwise; see grouped_matmul_cuda.h.
#pragma once
#include <vector>

#include "core/context.h"

namespace nemotron::ops {

// x [S, in], offsets [E + 1] (host, offsets[0] = 0, offsets[E] = S), weights E x [out, in] -> y [S, out].
void grouped_linear_forward(Context& ctx, const Tensor& x, const std::vector<int64_t>& offsets,
                            const std::vector<Tensor>& weights, Tensor& y);
// The forward with the experts' row counts on the device (counts [E] int32, summing to S; expert
// e owns the rows after those of experts 0..e-1): no host synchronisation where
// grouped_linear_counted_on_device says so (CUDA, bf16, our Hopper kernel); elsewhere the counts
// are read back and grouped_linear_forward runs. For inference (MoE decode): the sum is trusted.
bool grouped_linear_counted_on_device(const Tensor& x, const std::vector<Tensor>& weights, const Tensor& y);
void grouped_linear_forward_counted(Context& ctx, const Tensor& x, const Tensor& counts,
                                    const std::vector<Tensor>& weights, Tensor& y);
// dy [S, out] -> dx [S, in] (overwritten; may be undefined to skip), dweights E x [out, in] (+=;
// empty to skip the weight gradients, e.g. frozen experts).
void grouped_linear_backward(Context& ctx, const Tensor& x, const std::vector<int64_t>& offsets,
                             const std::vector<Tensor>& weights, const Tensor& dy, Tensor& dx,
                             std::vector<Tensor>& dweights);

}  // namespace nemotron::ops
