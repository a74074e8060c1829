// dst = src converted to dst's dtype (round to nearest even into bfloat16), same element count,
// same device. CPU: any of float64, float32, bfloat16 to any; CUDA: float32 and bfloat16.
// Its own adjoint: the gradient of a cast is the cast back.
#pragma once
#include "core/context.h"

namespace nemotron::ops {

void cast(Context& ctx, const Tensor& src, Tensor& dst);

}  // namespace nemotron::ops
