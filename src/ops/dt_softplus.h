// The Mamba-2 step size (reference/architectures.md A.3.2 step 4, A.3.5):
//   dt[..., h] = clamp(softplus(dt_raw[..., h] + dt_bias[h]), lo, hi)
// softplus(v) = max(v, 0) + log1p(exp(-|v|)) (exact, smooth; no threshold). The gradient is
// sigmoid(v) where lo <= softplus(v) <= hi and zero where the clamp is active. Nothing is saved:
// backward recomputes from dt_raw. It overwrites d_dt_raw and accumulates d_dt_bias (+=).
// Dtypes (src/ops/CUDA.md), T = dt_raw's dtype: dt_bias and d_dt_raw are T; dt and ddt are
// stat_dtype(T) (float32 for bfloat16: the scan's decay exp(dt A) needs it); d_dt_bias is a
// parameter gradient in grad_dtype(T), reduced over rows in a fixed order.
#pragma once
#include "core/context.h"

namespace nemotron::ops {

// dt_raw [..., nH], dt_bias [nH] -> dt, shaped like dt_raw. lo < hi; hi may be +inf.
void dt_softplus_forward(Context& ctx, const Tensor& dt_raw, const Tensor& dt_bias, double lo, double hi, Tensor& dt);
void dt_softplus_backward(Context& ctx, const Tensor& dt_raw, const Tensor& dt_bias, double lo, double hi,
                          const Tensor& ddt, Tensor& d_dt_raw, Tensor& d_dt_bias);

}  // namespace nemotron::ops
