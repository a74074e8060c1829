// Counter-based random numbers (Philox 4x32-10, Salmon et al. 2011): value i of stream `offset`
// under `seed` is a pure function of (seed, offset, i), so any run, resumed or sharded, draws
// exactly the same numbers in any order and on any device.
#pragma once
#include <array>
#include <cstdint>

#include "core/tensor.h"

namespace nemotron {

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

class Philox {
 public:
  explicit Philox(uint64_t seed, uint64_t stream = 0) : seed_(seed), stream_(stream) {}
  // The i-th 32-bit word of this stream.
  uint32_t bits(uint64_t i) const;
  double uniform(uint64_t i) const;  // in [0, 1), 53 bits from words 2i, 2i+1
  double normal(uint64_t i) const;   // standard normal (Box-Muller on uniforms 2i, 2i+1)
  uint64_t seed() const { return seed_; }
  uint64_t stream() const { return stream_; }

 private:
  uint64_t seed_, stream_;
};

// Fill a float tensor (host or device) with U(lo, hi) or N(mean, std) drawn from `rng`.
void fill_uniform(Tensor& t, const Philox& rng, double lo, double hi);
void fill_normal(Tensor& t, const Philox& rng, double mean, double std);

}  // namespace nemotron
