// Mamba-2's gated grouped RMSNorm, gate first (norm_before_gate = False; reference/
// architectures.md A.3.2 step 6, A.3.5 "Gated norm"). Per row of d channels split into G
// contiguous groups of d/G:
//   v = y * SiLU(z);  out = w * v * rstd,  rstd = (mean_group(v^2) + eps)^(-1/2)
// Forward saves rstd [rows, G]; backward recomputes v from y and z, overwrites dy and dz and
// accumulates dw (+=). Given `out`, the backward also writes the forward's output (bit for bit as
// the forward does, from the saved rstd): Mamba's out_proj needs it for dW, and a layer that
// recomputes it would read y and z once more (mamba_ssm's recompute_output).
// Dtypes (src/ops/CUDA.md): y, z, w, out, dout, dy, dz in the compute dtype; rstd in stat_dtype
// (float32 for bfloat16); dw is a parameter gradient in grad_dtype (float32 for bfloat16), reduced
// over rows in a fixed order. The CUDA backward takes groups of up to 12288 channels.
#pragma once
#include "core/context.h"

namespace nemotron::ops {

// y, z [..., d], w [d], d % n_groups == 0 -> out like y, rstd [rows, n_groups] (rows = numel / d).
void gated_rmsnorm_forward(Context& ctx, const Tensor& y, const Tensor& z, const Tensor& w, int64_t n_groups,
                           double eps, Tensor& out, Tensor& rstd);
void gated_rmsnorm_backward(Context& ctx, const Tensor& y, const Tensor& z, const Tensor& w, const Tensor& rstd,
                            int64_t n_groups, const Tensor& dout, Tensor& dy, Tensor& dz, Tensor& dw,
                            Tensor* out = nullptr);

}  // namespace nemotron::ops
