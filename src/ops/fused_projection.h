// Ops on the output of a fused projection y = x [W_0; W_1; ...]^T, whose row blocks W_i are
// separate parameters stored back to back (model/fused_rows.h): one GEMM for several linears of
// one input (a decode step's q/k/v_proj, or SwiGLU's gate/up_proj), then these ops hand the
// column blocks of y on. All tensors one float dtype, contiguous; y has rows [rows, sum of widths].
#pragma once
#include <span>

#include "core/context.h"

namespace nemotron::ops {

// outs[i] [rows, w_i] = y[:, o_i : o_i + w_i], o_i = w_0 + ... + w_{i-1}, sum w_i = y's width (1..4 blocks).
void split_columns(Context& ctx, const Tensor& y, std::span<Tensor> outs);

// SwiGLU of a fused gate/up output gu [rows, 2F] (gate's columns first): out [rows, F] =
// silu(g) * u, the same arithmetic as swiglu_forward on the separate halves (activations.h).
void swiglu_halves_forward(Context& ctx, const Tensor& gate_up, Tensor& out);

}  // namespace nemotron::ops
