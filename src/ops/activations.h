// Elementwise MLP activations (reference/architectures.md A.6, B.3):
//   relu2(a)        = max(a, 0)^2                        (Nemotron-H MLP and MoE experts)
//   swiglu(g, u)    = silu(g) * u,  silu(g) = g sigmoid(g) (Llama/DeciLM gated MLP)
// Any shapes, all tensors one float dtype and the same number of elements. Backward overwrites.
#pragma once
#include "core/context.h"

namespace nemotron::ops {

void relu2_forward(Context& ctx, const Tensor& x, Tensor& y);
// dx = dy * 2 max(x, 0). dx may be dy.
void relu2_backward(Context& ctx, const Tensor& x, const Tensor& dy, Tensor& dx);
// The same from the forward's output y = relu2(x): max(x, 0) = sqrt(y), so a layer keeps y (which
// the next GEMM's dW needs anyway) instead of x and recomputes nothing. sqrt(y) is rounded to y's
// dtype first: sqrt(round(r^2)) rounds back to r exactly in binary floating point (no underflow),
// so dx equals relu2_backward's bit for bit; only inputs with x^2 below the smallest normal
// (|x| < 1.1e-19 in float32/bfloat16) give dx = 0 instead of a value as small. dx may be dy.
void relu2_backward_from_output(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx);

void swiglu_forward(Context& ctx, const Tensor& gate, const Tensor& up, Tensor& y);
// dgate = dy * u * silu'(g), silu'(g) = s (1 + g (1 - s)) with s = sigmoid(g); dup = dy * silu(g).
void swiglu_backward(Context& ctx, const Tensor& gate, const Tensor& up, const Tensor& dy, Tensor& dgate,
                     Tensor& dup);

}  // namespace nemotron::ops
