#include <gtest/gtest.h>

#include "model/param.h"

namespace nemotron::model {

TEST(ParamStore, init_depends_on_seed_and_name_only) {
  ParamStore a(host_backend(), DType::f64), b(host_backend(), DType::f64);
  Param& a1 = a.add("x.weight", {4, 3});
  a.add("y.weight", {2, 2});
  b.add("y.weight", {2, 2});
  Param& b1 = b.add("x.weight", {4, 3});
  init_normal(a1, 7, 0.02);
  init_normal(b1, 7, 0.02);
  EXPECT_EQ(a1.value.to_f64_vector(), b1.value.to_f64_vector());
  EXPECT_EQ(a.numel(), 16);
  EXPECT_THROW(a.add("x.weight", {1}), Error);
  EXPECT_TRUE(a1.weight_decay);
  EXPECT_FALSE(a.add("n.weight", {5}).weight_decay);
}

}  // namespace nemotron::model
