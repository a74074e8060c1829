// GEMM on tensors: c = alpha * op(a) op(b) + beta * c, op = optional transpose of the last two
// dims. a, b, c are 2-D; or 3-D with a common leading batch (b may be 2-D and is then shared).
// Linear layers use it as y = x W^T (trans_b), dx = dy W, dW += dy^T x (beta = 1: accumulate).
// Dtypes: a and b share one dtype; c has it too, except that on CUDA bfloat16 a/b may write a
// float32 c (parameter gradients dW accumulate in grad_dtype, the MoE router wants float32
// logits). CUDA runs float32 or bfloat16 through cuBLASLt with float32 accumulation (no TF32);
// the CPU reference computes in float32 or float64 with one dtype throughout.
#pragma once
#include "core/context.h"

namespace nemotron::ops {

void matmul(Context& ctx, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, double alpha = 1.0,
            double beta = 0.0);

// y[..., out] = x[..., in] W[out, in]^T (+ bias[out] when given; on CUDA fused into the GEMM's
// epilogue). x's leading dims are flattened to rows. bias has y's dtype.
void linear_forward(Context& ctx, const Tensor& x, const Tensor& w, Tensor& y, const Tensor* bias = nullptr);
// dx = dy W (overwrite, or accumulate when accumulate_dx); dW += dy^T x (dW in grad_dtype).
void linear_backward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& dy, Tensor* dx, Tensor* dw,
                     bool accumulate_dx = false);

}  // namespace nemotron::ops
