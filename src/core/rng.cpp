#include "core/rng.h"

#include <cmath>

namespace nemotron {

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(kM0) * c[0];
    uint64_t p1 = static_cast<uint64_t>(kM1) * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
    k[0] += kW0;
    k[1] += kW1;
  }
  return c;
}

uint32_t Philox::bits(uint64_t i) const {
  uint64_t block = i / 4;
  std::array<uint32_t, 4> ctr = {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                                 static_cast<uint32_t>(stream_), static_cast<uint32_t>(stream_ >> 32)};
  return philox4x32(ctr, {static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32)})[i % 4];
}

double Philox::uniform(uint64_t i) const {
  uint64_t hi = bits(2 * i) >> 5, lo = bits(2 * i + 1) >> 6;  // 27 + 26 bits
  return (static_cast<double>(hi) * 67108864.0 + static_cast<double>(lo)) / 9007199254740992.0;
}

double Philox::normal(uint64_t i) const {
  double u1 = uniform(2 * i), u2 = uniform(2 * i + 1);
  return std::sqrt(-2.0 * std::log1p(-u1)) * std::cos(2.0 * M_PI * u2);
}

namespace {
template <class F>
void fill_with(Tensor& t, F value) {
  NM_CHECK(is_float(t.dtype()), "random fill of a {} tensor", dtype_name(t.dtype()));
  Tensor h = Tensor::empty(t.shape(), DType::f64);
  double* p = h.data<double>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = value(static_cast<uint64_t>(i));
  t.copy_from(h.to_host(t.dtype()));
}
}  // namespace

void fill_uniform(Tensor& t, const Philox& rng, double lo, double hi) {
  fill_with(t, [&](uint64_t i) { return lo + (hi - lo) * rng.uniform(i); });
}

void fill_normal(Tensor& t, const Philox& rng, double mean, double std) {
  fill_with(t, [&](uint64_t i) { return mean + std * rng.normal(i); });
}

}  // namespace nemotron
