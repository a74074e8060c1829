// The attention mixer beyond its harness cases (attention_cases.cpp): Hub names, init scales, the
// FLOP formula, where RoPE acts, and the k_proj bias gradient that vanishes without RoPE.
#include <gtest/gtest.h>

#include <cmath>

#include "block_configs.h"
#include "core/rng.h"
#include "harness.h"
#include "model/attention_mixer.h"

namespace nemotron::testing {
namespace {

using model::AttentionMixer;
using model::ModelConfig;

TEST(AttentionMixer, registers_hub_names_and_shapes) {
  model::ParamStore store(host_backend(), DType::f64);
  AttentionMixer m(attention_config(12, 4, 2, 5, false, true), store, "backbone.layers.1.mixer.", 1);
  auto shape = [&](const std::string& n) { return store.get("backbone.layers.1.mixer." + n).value.shape(); };
  EXPECT_EQ(shape("q_proj.weight"), Shape({20, 12}));
  EXPECT_EQ(shape("k_proj.weight"), Shape({10, 12}));
  EXPECT_EQ(shape("v_proj.weight"), Shape({10, 12}));
  EXPECT_EQ(shape("o_proj.weight"), Shape({12, 20}));
  EXPECT_EQ(shape("q_proj.bias"), Shape({20}));
  EXPECT_EQ(shape("o_proj.bias"), Shape({12}));
  EXPECT_EQ(store.all().size(), 8u);
  model::ParamStore plain(host_backend(), DType::f64);
  AttentionMixer p(attention_config(12, 4, 2, 5, false, false), plain, "x.", 0);
  EXPECT_EQ(plain.all().size(), 4u);
}

TEST(AttentionMixer, without_rope_k_bias_gradient_vanishes_and_v_bias_gradient_does_not) {
  Context ctx = cpu_context(DType::f64);
  model::ParamStore store(host_backend(), DType::f64);
  ModelConfig cfg = attention_config(8, 4, 2, 4, false, true);
  cfg.initializer_range = 0.5;
  AttentionMixer m(cfg, store, "", 0);
  m.init(2);
  Tensor u = Tensor::empty({2, 5, 8}, DType::f64), dy = Tensor::empty({2, 5, 8}, DType::f64);
  fill_uniform(u, Philox(4), -1, 1);
  fill_uniform(dy, Philox(5), -1, 1);
  std::unique_ptr<model::MixerSaved> saved;
  m.forward(ctx, u, &saved);
  m.backward(ctx, *saved, dy);
  Tensor zero = Tensor::zeros({8}, DType::f64);  // nkv * hd
  double k_norm = relative_error(store.get("k_proj.bias").grad, zero);
  double v_norm = relative_error(store.get("v_proj.bias").grad, zero);
  EXPECT_LT(k_norm, 1e-14 * v_norm + 1e-14);
  EXPECT_GT(v_norm, 1e-3);
}

TEST(AttentionMixer, init_scales_and_flops) {
  ModelConfig cfg = attention_config(64, 4, 2, 32, false, false);
  cfg.hybrid_override_pattern = std::string(16, '*');
  model::ParamStore store(host_backend(), DType::f64);
  AttentionMixer m(cfg, store, "", 0);
  m.init(7);
  auto stddev = [&](const std::string& n) {
    std::vector<double> v = store.get(n).value.to_f64_vector();
    double ss = 0;
    for (double x : v) ss += x * x;
    return std::sqrt(ss / double(v.size()));
  };
  EXPECT_NEAR(stddev("q_proj.weight"), 0.02, 0.002);
  EXPECT_NEAR(stddev("k_proj.weight"), 0.02, 0.002);
  EXPECT_NEAR(stddev("o_proj.weight"), 0.02 / 4.0, 0.0005);  // sqrt(16 layers)
  // 2 H hd (2 nq + 2 nkv) + 4 nq hd (T + 1) / 2 at T = 9.
  EXPECT_DOUBLE_EQ(m.forward_flops_per_token(9), 2.0 * 64 * 32 * (8 + 4) + 4.0 * 4 * 32 * 5);
}

TEST(AttentionMixer, rope_leaves_position_zero_and_moves_later_positions) {
  Context ctx = cpu_context(DType::f64);
  Tensor u = Tensor::empty({2, 4, 8}, DType::f64);
  fill_uniform(u, Philox(5), -1, 1);
  auto run = [&](bool rope) {
    model::ParamStore store(host_backend(), DType::f64);
    ModelConfig cfg = attention_config(8, 2, 1, 4, rope, false);
    cfg.initializer_range = 0.5;
    AttentionMixer m(cfg, store, "", 0);
    m.init(3);
    return m.forward(ctx, u, nullptr);
  };
  Tensor a = run(false), b = run(true);
  // Token 0 attends only to itself: both q and k rotate by 0. Token 1 sees a relative angle.
  EXPECT_LT(relative_error(a.select(0).slice(0, 1), b.select(0).slice(0, 1)), 1e-14);
  EXPECT_GT(relative_error(a.select(0).slice(1, 2), b.select(0).slice(1, 2)), 1e-6);
}

}  // namespace
}  // namespace nemotron::testing
