// RMSNorm over the last dim (reference/architectures.md A.2):
//   y = w * x * rstd,  rstd = (mean(x^2) + eps)^(-1/2)  per row.
// Forward saves rstd [rows] for the backward (in stat_dtype(x): float32 unless x is float64).
// Backward overwrites dx, accumulates dw (+=; dw in grad_dtype(x): float32 for bf16 x).
// The hybrid stack fuses its residual joins into these: add_rmsnorm_forward adds the residual
// before the norm, and the backward can add the residual stream's gradient into dx.
#pragma once
#include "core/context.h"

namespace nemotron::ops {

// x [..., D], w [D] -> y like x, rstd [rows] (rows = numel / D), all one float dtype.
void rmsnorm_forward(Context& ctx, const Tensor& x, const Tensor& w, double eps, Tensor& y, Tensor& rstd);
// dx = d(rmsnorm)/dx . dy, plus *dx_add when given (dx may be *dx_add: in place).
void rmsnorm_backward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& rstd, const Tensor& dy, Tensor& dx,
                      Tensor& dw, const Tensor* dx_add = nullptr);

// sum = x + r; y = rmsnorm(sum) (one pass; sum may be x).
void add_rmsnorm_forward(Context& ctx, const Tensor& x, const Tensor& r, const Tensor& w, double eps, Tensor& sum,
                         Tensor& y, Tensor& rstd);

}  // namespace nemotron::ops
