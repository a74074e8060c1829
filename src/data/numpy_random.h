// The part of numpy's legacy `numpy.random.RandomState` that Megatron's GPTDataset uses
// (shared/reference/data-formats.md §3.6), reproduced bit for bit so that sample order matches a
// Megatron run with the same seed: MT19937 seeded by init_genrand, `random_interval` (mask and
// reject, 32-bit draws up to 2^32-1, else 64-bit draws made of two 32-bit outputs, high first),
// and the Fisher-Yates `shuffle` from the end. Also numpy's pairwise float64 `sum`, which
// Megatron's weight normalization goes through. Checked against numpy 2.5.2's own outputs
// (tests/fixtures/megatron/numpy_vectors.json). Not checked, because no test can afford the
// sizes: the 64-bit draw path (arrays over 2^32 elements; numpy's C leaves the order of its two
// 32-bit draws to the compiler, high word first is assumed) and numpy.sum's buffered chunking of
// arrays over 8192 elements (weight lists are far shorter).
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace nemotron::data {

// The 32-bit Mersenne Twister (Matsumoto & Nishimura 1998), state as in numpy's mt19937.c.
class Mt19937 {
 public:
  explicit Mt19937(uint32_t seed);  // init_genrand(seed)
  // init_by_array(key): the seeding of CPython's random.Random (data/python_random.h).
  explicit Mt19937(std::span<const uint32_t> init_key);
  uint32_t next_u32();
  uint64_t next_u64();  // numpy's mt19937_next64: (first << 32) | second

 private:
  void regenerate();
  std::array<uint32_t, 624> key_{};
  int pos_ = 624;
};

// numpy.random.RandomState(seed) for an integer seed in [0, 2^32 - 1].
class NumpyRandomState {
 public:
  explicit NumpyRandomState(uint32_t seed) : mt_(seed) {}
  // A uniform integer in [0, max] (numpy's random_interval).
  uint64_t random_interval(uint64_t max);
  // In-place shuffle of a 1-D array; depends only on the length, not the element type.
  template <class T>
  void shuffle(std::span<T> a) {
    for (size_t i = a.size(); i-- > 1;) {
      const size_t j = static_cast<size_t>(random_interval(i));
      std::swap(a[i], a[j]);
    }
  }
  // RandomState.permutation(n): arange(n) shuffled.
  std::vector<int64_t> permutation(int64_t n);
  Mt19937& bit_generator() { return mt_; }

 private:
  Mt19937 mt_;
};

// numpy.sum of a contiguous float64 array (pairwise summation, blocks of 128, 8 accumulators).
double numpy_sum(std::span<const double> a);

}  // namespace nemotron::data
