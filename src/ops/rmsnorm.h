// RMSNorm over the last dim (reference/architectures.md A.2):
//   y = w * x * rstd,  rstd = (mean(x^2) + eps)^(-1/2)  per row.
// Forward saves rstd [rows] for the backward (in stat_dtype(x): float32 unless x is float64).
// Backward overwrites dx, accumulates dw (+=).
#pragma once
#include "core/context.h"

namespace nemotron::ops {

// x [..., D], w [D] -> y like x, rstd [rows] (rows = numel / D), all one float dtype.
void rmsnorm_forward(Context& ctx, const Tensor& x, const Tensor& w, double eps, Tensor& y, Tensor& rstd);
void rmsnorm_backward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& rstd, const Tensor& dy, Tensor& dx,
                      Tensor& dw);

}  // namespace nemotron::ops
