// GEMM on tensors: c = alpha * op(a) op(b) + beta * c, op = optional transpose of the last two
// dims. a, b, c are 2-D; or 3-D with a common leading batch (b may be 2-D and is then shared).
// Linear layers use it as y = x W^T (trans_b), dx = dy W, dW += dy^T x (beta = 1: accumulate).
#pragma once
#include "core/context.h"

namespace nemotron::ops {

void matmul(Context& ctx, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, double alpha = 1.0,
            double beta = 0.0);

// y[..., out] = x[..., in] W[out, in]^T  (shape of x flattened to rows)
void linear_forward(Context& ctx, const Tensor& x, const Tensor& w, Tensor& y);
// dx = dy W (overwrite, or accumulate when accumulate_dx); dW += dy^T x.
void linear_backward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& dy, Tensor* dx, Tensor* dw,
                     bool accumulate_dx = false);

}  // namespace nemotron::ops
