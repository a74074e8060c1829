#include "data/numpy_random.h"

#include <algorithm>
#include <numeric>

namespace nemotron::data {

Mt19937::Mt19937(uint32_t seed) {
  key_[0] = seed;
  for (uint32_t i = 1; i < 624; ++i) key_[i] = 1812433253u * (key_[i - 1] ^ (key_[i - 1] >> 30)) + i;
  pos_ = 624;
}

Mt19937::Mt19937(std::span<const uint32_t> init_key) : Mt19937(19650218u) {
  const size_t n = 624, len = std::max<size_t>(init_key.size(), 1);
  auto key = [&](size_t j) { return init_key.empty() ? 0u : init_key[j]; };
  size_t i = 1, j = 0;
  for (size_t k = std::max(n, len); k > 0; --k) {
    key_[i] = (key_[i] ^ ((key_[i - 1] ^ (key_[i - 1] >> 30)) * 1664525u)) + key(j) + static_cast<uint32_t>(j);
    if (++i >= n) key_[0] = key_[n - 1], i = 1;
    if (++j >= len) j = 0;
  }
  for (size_t k = n - 1; k > 0; --k) {
    key_[i] = (key_[i] ^ ((key_[i - 1] ^ (key_[i - 1] >> 30)) * 1566083941u)) - static_cast<uint32_t>(i);
    if (++i >= n) key_[0] = key_[n - 1], i = 1;
  }
  key_[0] = 0x80000000u;
  pos_ = 624;
}

void Mt19937::regenerate() {
  constexpr uint32_t kUpper = 0x80000000u, kLower = 0x7fffffffu, kMatrixA = 0x9908b0dfu;
  for (int i = 0; i < 624; ++i) {
    const uint32_t y = (key_[i] & kUpper) | (key_[(i + 1) % 624] & kLower);
    key_[i] = key_[(i + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? kMatrixA : 0u);
  }
  pos_ = 0;
}

uint32_t Mt19937::next_u32() {
  if (pos_ == 624) regenerate();
  uint32_t y = key_[pos_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

uint64_t Mt19937::next_u64() {
  const uint64_t hi = next_u32();
  return (hi << 32) | next_u32();
}

uint64_t NumpyRandomState::random_interval(uint64_t max) {
  if (max == 0) return 0;
  uint64_t mask = max;
  mask |= mask >> 1;
  mask |= mask >> 2;
  mask |= mask >> 4;
  mask |= mask >> 8;
  mask |= mask >> 16;
  mask |= mask >> 32;
  uint64_t value;
  if (max <= 0xffffffffull) {
    while ((value = (mt_.next_u32() & mask)) > max) {
    }
  } else {
    while ((value = (mt_.next_u64() & mask)) > max) {
    }
  }
  return value;
}

std::vector<int64_t> NumpyRandomState::permutation(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t{0});
  shuffle(std::span<int64_t>(v));
  return v;
}

double numpy_sum(std::span<const double> a) {
  const size_t n = a.size();
  if (n < 8) {
    double res = 0.0;
    for (double x : a) res += x;
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    size_t i = 8;
    for (; i < n - (n % 8); i += 8)
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  size_t n2 = n / 2;
  n2 -= n2 % 8;
  return numpy_sum(a.subspan(0, n2)) + numpy_sum(a.subspan(n2));
}

}  // namespace nemotron::data
