// Depthwise causal convolution over time with bias and fused SiLU, the Mamba-2 conv on xBC
// (reference/architectures.md A.3.2 step 2, A.3.5 "Conv"):
//   pre[b,t,c] = bias[c] + sum_{k<K} w[c,k] * x[b, t-(K-1)+k, c]   (x[t<0] = 0)
//   y[b,t,c]   = SiLU(pre[b,t,c])
// Nothing is saved: backward recomputes pre from x (K MACs per element). Backward overwrites dx and
// accumulates dw, dbias (+=). Channels are independent, so a channel range of x with the matching
// rows of w and bias (e.g. the x, B or C part of Mamba's xBC) is a valid call on its own.
// Dtypes (src/ops/CUDA.md): x, w, bias, y, dy, dx in the compute dtype; dw and dbias are parameter
// gradients in grad_dtype(x) (float32 for bfloat16 x), reduced over B*T in a fixed order.
// The CUDA kernels take K <= 4.
// Packed rows (ops/seq_idx.h): with seq_idx [B, T] int32 given, a tap reaching x[b, t-(K-1)+k] of
// another sequence than token t reads zero (the window restarts at every sequence start), in the
// forward and in dx, dw, dbias. Undefined = one sequence per row, the behaviour above unchanged.
#pragma once
#include <span>

#include "core/context.h"

namespace nemotron::ops {

// x [B, T, C] -> y [B, T, C]; w [C, K] or the Hugging Face layout [C, 1, K]; bias [C] or an
// undefined Tensor (use_conv_bias = false).
void causal_conv1d_forward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
                           const Tensor& seq_idx = {});

// dy [B, T, C] -> dx [B, T, C] (overwritten), dw like w (+=), dbias [C] (+=; must be defined iff
// bias is).
void causal_conv1d_backward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& dy,
                            Tensor& dx, Tensor& dw, Tensor& dbias, const Tensor& seq_idx = {});

// Channels split over several tensors (Mamba-2's x, B and C, each from its own GEMM): the same as
// one call on their concatenation along C, w, bias, dw and dbias covering the concatenation part
// after part, but one launch on CUDA. Parts [B, T, C_i] of one dtype, at most kCausalConv1dMaxParts.
inline constexpr int kCausalConv1dMaxParts = 3;
void causal_conv1d_forward_parts(Context& ctx, std::span<const Tensor> xs, const Tensor& w, const Tensor& bias,
                                 std::span<Tensor> ys, const Tensor& seq_idx = {});
void causal_conv1d_backward_parts(Context& ctx, std::span<const Tensor> xs, const Tensor& w, const Tensor& bias,
                                  std::span<const Tensor> dys, std::span<Tensor> dxs, Tensor& dw, Tensor& dbias,
                                  const Tensor& seq_idx = {});

}  // namespace nemotron::ops
