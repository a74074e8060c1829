// Rotary position embedding, HF "rotate-half" convention (reference/architectures.md B.3): for a
// head vector x of size hd at position t, dim i < hd/2 is paired with i + hd/2 and rotated by
// angle t * f_i, f_i = theta^(-2i/hd):
//   y[i] = x[i] cos - x[i+hd/2] sin,   y[i+hd/2] = x[i+hd/2] cos + x[i] sin.
// The backward is the rotation by the negative angle. Angles are computed in float64.
// Frequencies: plain rope_theta, or Llama-3 scaled (ops/rope_freq.h). In place allowed (y may be x).
// Packed rows (data-formats.md §6.8): position_ids [B, T] int32, when given, replaces t as the
// position of token (b, t), so positions restart at 0 in every packed sequence; position_offset
// is added in both cases.
#pragma once
#include "core/context.h"
#include "ops/rope_freq.h"

namespace nemotron::ops {

// x [B, T, nh, hd] (hd even) -> y like x; token t of row b has position
// position_offset + (position_ids defined ? position_ids[b, t] : t).
void rope_forward(Context& ctx, const Tensor& x, const RopeFreq& freq, Tensor& y, int64_t position_offset = 0,
                  const Tensor& position_ids = {});
// dy -> dx (overwrite; dx may be dy).
void rope_backward(Context& ctx, const Tensor& dy, const RopeFreq& freq, Tensor& dx, int64_t position_offset = 0,
                   const Tensor& position_ids = {});

}  // namespace nemotron::ops
