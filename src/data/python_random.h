// The part of CPython's `random.Random` that Nemotron's SFT data prep uses, bit for bit:
// seeding from an integer (init_by_array over the integer's 32-bit words, least significant
// first), getrandbits, _randbelow (draw bit_length(n) bits, reject >= n) and `shuffle` (from the
// end, swapping x[i] with x[randbelow(i + 1)]). first_fit_shuffle packing and the shard-to-split
// assignment go through it (reference/data-formats.md §6.4, §6.6), so the same seed gives the
// same bins and splits as the Python stack. Checked against CPython's outputs in
// tests/data/python_random_test.cpp.
#pragma once
#include <cstdint>
#include <span>
#include <utility>

#include "data/numpy_random.h"

namespace nemotron::data {

class PythonRandom {
 public:
  // random.Random(seed) for a non-negative integer seed (Python seeds with abs(seed)).
  explicit PythonRandom(uint64_t seed);
  // random.getrandbits(k), k in [0, 64].
  uint64_t getrandbits(int k);
  // random._randbelow(n): uniform in [0, n), n > 0.
  uint64_t randbelow(uint64_t n);
  // random.shuffle(x): depends only on the length.
  template <class T>
  void shuffle(std::span<T> x) {
    for (size_t i = x.size(); i-- > 1;) std::swap(x[i], x[static_cast<size_t>(randbelow(i + 1))]);
  }
  // random.random(): 53-bit float in [0, 1).
  double random();

 private:
  Mt19937 mt_;
};

}  // namespace nemotron::data
