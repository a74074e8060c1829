// Dropout's mask beyond the harness cases: element i is kept iff word i of Philox(seed, stream)
// is >= p 2^32 (so the mask is core/rng.h's stream, on any device), the kept share is near
// 1 - p, p = 0 is the identity, and another stream draws another mask.
#include <gtest/gtest.h>

#include <cmath>

#include "core/rng.h"
#include "harness.h"
#include "ops/dropout.h"

namespace nemotron::testing {
namespace {

Tensor ones(int64_t n) { return Tensor::from_vector<double>({n}, std::vector<double>(static_cast<size_t>(n), 1.0)); }

TEST(Dropout, the_mask_is_the_philox_stream_and_keeps_about_one_minus_p) {
  Context ctx = cpu_context(DType::f64);
  const int64_t n = 20000;
  const ops::DropoutMask mask{0.25, 99, 7};
  Tensor y = Tensor::empty({n}, DType::f64);
  ops::dropout_apply(ctx, ones(n), mask, y);
  const Philox rng(99, 7);
  int64_t kept = 0;
  const double* py = y.data<double>();
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = rng.bits(static_cast<uint64_t>(i)) >= static_cast<uint32_t>(0.25 * 4294967296.0);
    ASSERT_EQ(py[i], keep ? 1.0 / 0.75 : 0.0) << i;
    kept += keep;
  }
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.75, 0.01);
  Tensor other = Tensor::empty({n}, DType::f64);
  ops::dropout_apply(ctx, ones(n), ops::DropoutMask{0.25, 99, 8}, other);
  int64_t same = 0;
  for (int64_t i = 0; i < n; ++i) same += (other.data<double>()[i] == py[i]);
  EXPECT_LT(same, n * 3 / 4);  // independent masks agree on ~62.5% of elements
}

TEST(Dropout, p_zero_is_the_identity_and_accumulate_adds) {
  Context ctx = cpu_context(DType::f64);
  Tensor x = Tensor::from_vector<double>({5}, {1, -2, 3, -4, 5});
  Tensor y = Tensor::from_vector<double>({5}, {10, 10, 10, 10, 10});
  ops::dropout_apply(ctx, x, ops::DropoutMask{0.0, 1, 2}, y, /*accumulate=*/true);
  EXPECT_EQ(y.to_f64_vector(), (std::vector<double>{11, 8, 13, 6, 15}));
  EXPECT_THROW(ops::dropout_apply(ctx, x, ops::DropoutMask{1.0, 1, 2}, y), Error);
}

}  // namespace
}  // namespace nemotron::testing
