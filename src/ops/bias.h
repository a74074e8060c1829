// Bias of a linear layer over the last dim: y[..., D] += b[D]; its backward db += sum_rows dy.
// y and b share the compute dtype; db is a parameter gradient: grad_dtype(dy) (float32 for
// bfloat16 dy), accumulated (+=) with a fixed summation order (deterministic).
#pragma once
#include "core/context.h"

namespace nemotron::ops {

void bias_add(Context& ctx, Tensor& y, const Tensor& b);
void bias_backward(Context& ctx, const Tensor& dy, Tensor& db);

}  // namespace nemotron::ops
