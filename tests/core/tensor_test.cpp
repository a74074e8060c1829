#include <gtest/gtest.h>

#include "core/rng.h"
#include "core/tensor.h"
#include "core/workspace.h"

namespace nemotron {

TEST(Tensor, view_and_slice_share_memory) {
  Tensor t = Tensor::from_vector<float>({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor row = t.slice(1, 3);
  EXPECT_EQ(row.shape(), Shape({2, 2}));
  row.data<float>()[0] = 30;
  EXPECT_EQ(t.data<float>()[2], 30);
  EXPECT_EQ(t.view({6}).data<float>()[5], 6);
  EXPECT_THROW(t.view({4}), Error);
}

TEST(Tensor, dtype_conversion_round_trips_bf16) {
  Tensor t = Tensor::from_vector<double>({4}, {1.0, -2.5, 3.140625, 1e-3});
  Tensor b = t.to_host(DType::bf16);
  std::vector<double> back = b.to_f64_vector();
  EXPECT_EQ(back[0], 1.0);
  EXPECT_EQ(back[1], -2.5);
  EXPECT_EQ(back[2], 3.140625);
  EXPECT_NEAR(back[3], 1e-3, 1e-5);
  EXPECT_THROW(b.data<float>(), Error);
}

TEST(Rng, philox_is_a_pure_function_of_seed_stream_index) {
  Philox a(42, 7), b(42, 7), c(43, 7), d(42, 8);
  EXPECT_EQ(a.bits(12345), b.bits(12345));
  EXPECT_NE(a.bits(12345), c.bits(12345));
  EXPECT_NE(a.bits(12345), d.bits(12345));
  // Known-answer test from the Random123 distribution (philox4x32-10, counter 0, key 0).
  auto r = philox4x32({0, 0, 0, 0}, {0, 0});
  EXPECT_EQ(r[0], 0x6627e8d5u);
  EXPECT_EQ(r[1], 0xe169c58du);
  EXPECT_EQ(r[2], 0xbc57ac4cu);
  EXPECT_EQ(r[3], 0x9b00dbd8u);
}

TEST(Rng, uniform_and_normal_have_the_right_moments) {
  Philox rng(1);
  double su = 0, sn = 0, sn2 = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    double u = rng.uniform(i), z = rng.normal(i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    su += u, sn += z, sn2 += z * z;
  }
  EXPECT_NEAR(su / n, 0.5, 0.005);
  EXPECT_NEAR(sn / n, 0.0, 0.01);
  EXPECT_NEAR(sn2 / n, 1.0, 0.01);
}

TEST(Workspace, reset_reuses_one_block) {
  Workspace ws(host_backend(), 1024);
  for (int step = 0; step < 3; ++step) {
    Tensor a = ws.alloc({300}, DType::f32);
    Tensor b = ws.alloc({300}, DType::f64);
    a.data<float>()[0] = 1;
    b.data<double>()[299] = 2;
    ws.reset();
  }
  EXPECT_GE(ws.capacity_bytes(), ws.high_water_bytes());
  Tensor c = ws.alloc({100}, DType::f32);
  EXPECT_EQ(ws.used_bytes(), 512u);
}

}  // namespace nemotron
