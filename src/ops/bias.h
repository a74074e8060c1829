// Bias of a linear layer over the last dim: y[..., D] += b[D]; its backward db += sum_rows dy.
// (The bias gradient is a parameter gradient, so it accumulates.)
#pragma once
#include "core/context.h"

namespace nemotron::ops {

void bias_add(Context& ctx, Tensor& y, const Tensor& b);
void bias_backward(Context& ctx, const Tensor& dy, Tensor& db);

}  // namespace nemotron::ops
