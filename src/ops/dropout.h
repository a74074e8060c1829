// Dropout with a counter-based mask: y = x * m / (1 - p) (or y += when accumulating), where
// m_i = 1 iff word i of Philox(seed, stream) (core/rng.h, i = x's flat index) is >= p * 2^32.
// The mask is a pure function of (seed, stream, i): the same on every device and in any call
// order, so a backward (or a recomputed forward) regenerates the forward's mask from the key and
// nothing is stored. Being linear in x, the same call is its own backward: dx = dy * m / (1 - p).
// LoRA's adapter dropout (model/lora.h) is its user. x and y share shape, dtype and device.
#pragma once
#include <cstdint>

#include "core/context.h"

namespace nemotron::ops {

struct DropoutMask {
  double p = 0;  // drop probability, in [0, 1)
  uint64_t seed = 0, stream = 0;
  // Word i of the stream is kept iff it is >= this (p * 2^32, rounded).
  uint64_t threshold() const;
};

void dropout_apply(Context& ctx, const Tensor& x, const DropoutMask& mask, Tensor& y, bool accumulate = false);

}  // namespace nemotron::ops
