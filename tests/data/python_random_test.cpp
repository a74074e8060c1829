// PythonRandom against CPython 3's random.Random (values printed by CPython, pasted here):
//   random.Random(s).shuffle(list(range(20))), getrandbits and _randbelow of Random(42).
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "data/python_random.h"

namespace nemotron::data {
namespace {

std::vector<int> shuffled(uint64_t seed, int n) {
  std::vector<int> x(static_cast<size_t>(n));
  std::iota(x.begin(), x.end(), 0);
  PythonRandom(seed).shuffle(std::span<int>(x));
  return x;
}

TEST(Mt19937, init_by_array_matches_mt19937ar_reference_output) {
  // mt19937ar.c's main(): init_by_array({0x123, 0x234, 0x345, 0x456}), first outputs of mt19937ar.out.
  const uint32_t key[] = {0x123, 0x234, 0x345, 0x456};
  Mt19937 mt{std::span<const uint32_t>(key)};
  EXPECT_EQ(mt.next_u32(), 1067595299u);
  EXPECT_EQ(mt.next_u32(), 955945823u);
  EXPECT_EQ(mt.next_u32(), 477289528u);
  EXPECT_EQ(mt.next_u32(), 4107218783u);
  EXPECT_EQ(mt.next_u32(), 4228976476u);
}

TEST(PythonRandom, shuffle_matches_cpython) {
  EXPECT_EQ(shuffled(0, 20), (std::vector<int>{10, 18, 16, 14, 0, 17, 11, 2, 3, 9, 5, 7, 4, 19, 6, 15, 8, 1, 13, 12}));
  EXPECT_EQ(shuffled(42, 20), (std::vector<int>{19, 5, 14, 4, 9, 13, 15, 18, 6, 12, 17, 10, 1, 11, 2, 16, 7, 8, 0, 3}));
  // A seed above 2^32 is seeded from two 32-bit words.
  EXPECT_EQ(shuffled(4294967303ull, 20),
            (std::vector<int>{18, 4, 6, 19, 8, 2, 3, 13, 5, 9, 16, 0, 15, 17, 14, 12, 1, 10, 11, 7}));
  std::vector<int> x = shuffled(12345, 1000);
  EXPECT_EQ(std::vector<int>(x.begin(), x.begin() + 10), (std::vector<int>{669, 944, 291, 633, 922, 752, 781, 258, 657, 615}));
  int64_t weighted = 0;
  for (size_t i = 0; i < x.size(); ++i) weighted += static_cast<int64_t>(i) * x[i];
  EXPECT_EQ(weighted, 244455654);
}

TEST(PythonRandom, draws_match_cpython) {
  PythonRandom r(42);
  EXPECT_EQ(r.getrandbits(32), 2746317213u);
  EXPECT_EQ(r.getrandbits(32), 478163327u);
  EXPECT_EQ(r.getrandbits(32), 107420369u);
  EXPECT_EQ(r.getrandbits(64), 5073395517033431291ull);
  EXPECT_EQ(r.getrandbits(33), 1051802512ull);
  EXPECT_EQ(r.randbelow(1000003), 146316u);
  EXPECT_DOUBLE_EQ(r.random(), 0.7364712141640124);
}

}  // namespace
}  // namespace nemotron::data
