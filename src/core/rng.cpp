#include "core/rng.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

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

namespace {

// Block b of stream `stream` under `seed`: words 4b .. 4b+3 of the stream.
std::array<uint32_t, 4> philox_block(uint64_t seed, uint64_t stream, uint64_t b) {
  std::array<uint32_t, 4> ctr = {static_cast<uint32_t>(b), static_cast<uint32_t>(b >> 32),
                                 static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)};
  return philox4x32(ctr, {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}

// 53 bits from two words: 27 of `a`, 26 of `b`.
double uniform_of(uint32_t a, uint32_t b) {
  const uint64_t hi = a >> 5, lo = b >> 6;
  return (static_cast<double>(hi) * 67108864.0 + static_cast<double>(lo)) / 9007199254740992.0;
}

}  // namespace

uint32_t Philox::bits(uint64_t i) const { return philox_block(seed_, stream_, i / 4)[i % 4]; }

// Words 2i and 2i+1 share block i/2: one block computed instead of two.
double Philox::uniform(uint64_t i) const {
  const std::array<uint32_t, 4> w = philox_block(seed_, stream_, i / 2);
  const size_t k = 2 * (i % 2);
  return uniform_of(w[k], w[k + 1]);
}

// Uniforms 2i and 2i+1 are words 4i .. 4i+3: block i.
double Philox::normal(uint64_t i) const {
  const std::array<uint32_t, 4> w = philox_block(seed_, stream_, i);
  const double u1 = uniform_of(w[0], w[1]), u2 = uniform_of(w[2], w[3]);
  return std::sqrt(-2.0 * std::log1p(-u1)) * std::cos(2.0 * M_PI * u2);
}

namespace {
// Value i is a pure function of i, so a large fill is split over threads without changing a bit
// of it: model start-up is mostly this (a 132M-parameter model's init took ~23 s on one core).
template <class F>
void fill_with(Tensor& t, F value) {
  NM_CHECK(is_float(t.dtype()), "random fill of a {} tensor", dtype_name(t.dtype()));
  Tensor h = Tensor::empty(t.shape(), DType::f64);
  double* p = h.data<double>();
  const int64_t n = t.numel();
  auto fill = [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) p[i] = value(static_cast<uint64_t>(i));
  };
  const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t workers = std::min<int64_t>(cores, n >> 16);  // >= 64K values per thread
  if (workers <= 1) {
    fill(0, n);
  } else {
    std::vector<std::thread> pool;
    for (int64_t w = 0; w < workers; ++w) pool.emplace_back(fill, w * n / workers, (w + 1) * n / workers);
    for (std::thread& th : pool) th.join();
  }
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
