#include <gtest/gtest.h>

#include <random>

#include "data/numpy_random.h"

namespace nemotron::data {
namespace {

TEST(Mt19937, reference_outputs_for_the_default_seed_5489) {
  // Matsumoto & Nishimura's mt19937ar with init_genrand(5489).
  Mt19937 mt(5489);
  EXPECT_EQ(mt.next_u32(), 3499211612u);
  EXPECT_EQ(mt.next_u32(), 581869302u);
  EXPECT_EQ(mt.next_u32(), 3890346734u);
  EXPECT_EQ(mt.next_u32(), 3586334585u);
  EXPECT_EQ(mt.next_u32(), 545404204u);
  // The C++ standard fixes the 10000th output of default-seeded mt19937 ([rand.predef]).
  Mt19937 again(5489);
  uint32_t v = 0;
  for (int i = 0; i < 10000; ++i) v = again.next_u32();
  EXPECT_EQ(v, 4123659995u);
}

TEST(Mt19937, matches_std_mt19937_for_other_seeds) {
  for (uint32_t seed : {0u, 1u, 1234u, 0xffffffffu}) {
    Mt19937 ours(seed);
    std::mt19937 std_mt(seed);
    for (int i = 0; i < 2000; ++i) ASSERT_EQ(ours.next_u32(), std_mt()) << "seed " << seed << " output " << i;
  }
}

TEST(Mt19937, next_u64_is_two_outputs_high_word_first) {
  Mt19937 a(7), b(7);
  const uint64_t hi = b.next_u32(), lo = b.next_u32();
  EXPECT_EQ(a.next_u64(), (hi << 32) | lo);
}

TEST(NumpyRandomState, permutation_matches_published_numpy_outputs) {
  // numpy.random.RandomState(0).permutation(10) and RandomState(42).permutation(10).
  EXPECT_EQ(NumpyRandomState(0).permutation(10), (std::vector<int64_t>{2, 8, 4, 9, 1, 6, 7, 3, 0, 5}));
  EXPECT_EQ(NumpyRandomState(42).permutation(10), (std::vector<int64_t>{8, 1, 5, 0, 7, 2, 9, 4, 3, 6}));
}

TEST(NumpyRandomState, random_interval_masks_and_rejects) {
  // max = 5: mask 7; each draw is next_u32() & 7, redrawn while > 5.
  NumpyRandomState rs(3);
  Mt19937 mt(3);
  for (int i = 0; i < 200; ++i) {
    uint32_t expect;
    while ((expect = mt.next_u32() & 7u) > 5u) {
    }
    ASSERT_EQ(rs.random_interval(5), expect);
  }
  EXPECT_EQ(NumpyRandomState(3).random_interval(0), 0u);  // no draw at all
}

TEST(NumpyRandomState, shuffle_depends_only_on_length) {
  std::vector<int32_t> a(37);
  std::vector<int64_t> b(37);
  for (int i = 0; i < 37; ++i) a[i] = 100 + i, b[i] = i;
  NumpyRandomState(9).shuffle(std::span<int32_t>(a));
  NumpyRandomState(9).shuffle(std::span<int64_t>(b));
  for (int i = 0; i < 37; ++i) EXPECT_EQ(a[i], 100 + b[i]);
}

TEST(NumpySum, small_arrays_add_left_to_right_and_longer_ones_pairwise) {
  const std::vector<double> few = {0.1, 0.2, 0.3};
  EXPECT_EQ(numpy_sum(few), (0.0 + 0.1 + 0.2) + 0.3);
  // Nine values: eight accumulators combined as ((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7)), then a8.
  const std::vector<double> v = {1e16, 1, 1, 1, 1, 1, 1, 1, 3};
  const double pairwise = ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7])) + v[8];
  double sequential = 0;
  for (double x : v) sequential += x;
  EXPECT_EQ(numpy_sum(v), pairwise);
  EXPECT_NE(pairwise, sequential);  // the order matters for this input
}

}  // namespace
}  // namespace nemotron::data
