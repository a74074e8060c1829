#include "data/python_random.h"

#include <bit>
#include <vector>

#include "core/error.h"

namespace nemotron::data {

namespace {

Mt19937 seeded(uint64_t seed) {
  std::vector<uint32_t> key;
  for (uint64_t s = seed; s != 0; s >>= 32) key.push_back(static_cast<uint32_t>(s));
  if (key.empty()) key.push_back(0);  // random.seed(0) seeds with the one-word key [0]
  return Mt19937(std::span<const uint32_t>(key));
}

}  // namespace

PythonRandom::PythonRandom(uint64_t seed) : mt_(seeded(seed)) {}

uint64_t PythonRandom::getrandbits(int k) {
  NM_CHECK(k >= 0 && k <= 64, "getrandbits: k out of range");
  if (k == 0) return 0;
  if (k <= 32) return mt_.next_u32() >> (32 - k);
  // Words least significant first; the last word keeps its top (k mod 32) bits.
  const uint64_t low = mt_.next_u32();
  const uint64_t high = mt_.next_u32() >> (64 - k);
  return low | (high << 32);
}

uint64_t PythonRandom::randbelow(uint64_t n) {
  NM_CHECK(n > 0, "randbelow: n must be positive");
  const int k = std::bit_width(n);
  uint64_t r = getrandbits(k);
  while (r >= n) r = getrandbits(k);
  return r;
}

double PythonRandom::random() {
  const uint32_t a = mt_.next_u32() >> 5, b = mt_.next_u32() >> 6;
  return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

}  // namespace nemotron::data
