// Elementwise helpers on same-shaped float tensors (the residual stream, gradient joins).
#pragma once
#include "core/context.h"

namespace nemotron::ops {

void add(Context& ctx, const Tensor& a, const Tensor& b, Tensor& out);  // out = a + b
void add_inplace(Context& ctx, Tensor& a, const Tensor& b);            // a += b
void scale_inplace(Context& ctx, Tensor& a, double s);                  // a *= s

}  // namespace nemotron::ops
