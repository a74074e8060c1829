// The MoE mixer beyond its harness cases (moe_cases.cpp): Hub names, the buffer rule for the
// bias, the FLOP formula, init scales, the forward against a direct per-token computation and
// pinning the choice.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "block_configs.h"
#include "core/rng.h"
#include "harness.h"
#include "model/moe_mixer.h"

namespace nemotron::testing {
namespace {

using model::ModelConfig;
using model::MoeMixer;

TEST(MoeMixer, registers_hub_names_and_bias_as_buffer) {
  model::ParamStore store(host_backend(), DType::f64);
  MoeMixer m(moe_config(kMoeLatent), store, kMoePrefix, 1);
  auto shape = [&](const std::string& n) { return store.get(kMoePrefix + n).value.shape(); };
  EXPECT_EQ(shape("gate.weight"), Shape({6, 5}));
  EXPECT_EQ(shape("gate.e_score_correction_bias"), Shape({6}));
  EXPECT_FALSE(store.get(kMoePrefix + "gate.e_score_correction_bias").requires_grad);
  EXPECT_FALSE(store.get(kMoePrefix + "gate.e_score_correction_bias").weight_decay);
  EXPECT_EQ(shape("experts.0.up_proj.weight"), Shape({4, 4}));  // [F_moe, d_lat]
  EXPECT_EQ(shape("experts.5.down_proj.weight"), Shape({4, 4}));
  EXPECT_EQ(shape("shared_experts.up_proj.weight"), Shape({3, 5}));
  EXPECT_EQ(shape("shared_experts.down_proj.weight"), Shape({5, 3}));
  EXPECT_EQ(shape("fc1_latent_proj.weight"), Shape({4, 5}));
  EXPECT_EQ(shape("fc2_latent_proj.weight"), Shape({5, 4}));
  EXPECT_EQ(store.all().size(), 2u + 2 * 6 + 2 + 2);

  model::ParamStore plain(host_backend(), DType::f64);
  MoeMixer p(moe_config(kMoeGrouped), plain, "", 0);
  EXPECT_EQ(plain.get("experts.7.up_proj.weight").value.shape(), Shape({5, 6}));  // [F_moe, H]
  EXPECT_EQ(plain.get("shared_experts.up_proj.weight").value.shape(), Shape({6, 6}));  // 3 x 2 shared
  EXPECT_EQ(plain.find("fc1_latent_proj.weight"), nullptr);
  // router 2 H E + K experts 4 d_e F + shared 4 H F_sh.
  EXPECT_DOUBLE_EQ(p.forward_flops_per_token(5), 2.0 * 6 * 8 + 2 * 4.0 * 6 * 5 + 4.0 * 6 * 6);
  EXPECT_DOUBLE_EQ(m.forward_flops_per_token(5), 2.0 * 5 * 6 + 3 * 4.0 * 4 * 4 + 4.0 * 5 * 3 + 2 * 2.0 * 5 * 4);
}

TEST(MoeMixer, init_scales_and_zero_bias) {
  MoeShape s{64, 4, 2, 1, 1, 96, 48, 1, 32, true, 1.0};
  ModelConfig cfg = moe_config(s);
  cfg.hybrid_override_pattern = std::string(25, 'E');
  model::ParamStore store(host_backend(), DType::f64);
  MoeMixer m(cfg, store, "", 0);
  init_constant(store.get("gate.e_score_correction_bias"), 1.0);
  m.init(9);
  auto stddev = [&](const std::string& n) {
    std::vector<double> v = store.get(n).value.to_f64_vector();
    double ss = 0;
    for (double x : v) ss += x * x;
    return std::sqrt(ss / double(v.size()));
  };
  EXPECT_NEAR(stddev("gate.weight"), 0.02, 0.003);
  EXPECT_NEAR(stddev("experts.3.up_proj.weight"), 0.02, 0.002);
  EXPECT_NEAR(stddev("experts.3.down_proj.weight"), 0.004, 0.0004);  // 0.02 / sqrt(25)
  EXPECT_NEAR(stddev("shared_experts.down_proj.weight"), 0.004, 0.0004);
  EXPECT_NEAR(stddev("fc1_latent_proj.weight"), 0.02, 0.002);
  EXPECT_NEAR(stddev("fc2_latent_proj.weight"), 0.004, 0.0004);
  EXPECT_EQ(stddev("gate.e_score_correction_bias"), 0.0);
}

// out_n = fc2(sum_j w_j Wd_e relu2(Wu_e fc1(x_n))) + Wsd relu2(Wsu x_n), with the plain top-k
// (n_group = 1) worked out per token from sigmoid scores + bias, and w from the unbiased scores.
TEST(MoeMixer, forward_matches_direct_per_token_formula_and_counts_tokens) {
  MoeShape s{5, 6, 2, 1, 1, 4, 3, 1, 3, true, 1.7};
  ModelConfig cfg = moe_config(s);
  cfg.initializer_range = 0.7;
  model::ParamStore store(host_backend(), DType::f64);
  MoeMixer m(cfg, store, "", 0);
  m.init(4);
  Tensor& bias = store.get("gate.e_score_correction_bias").value;
  fill_uniform(bias, Philox(8), -0.2, 0.2);
  Context ctx = cpu_context(DType::f64);
  const int64_t N = 2 * 9, H = s.H, E = s.E, d = s.latent;
  Tensor u = Tensor::empty({2, 9, H}, DType::f64);
  fill_uniform(u, Philox(6), -1, 1);
  std::unique_ptr<model::MixerSaved> saved;
  std::vector<double> y = m.forward(ctx, u, &saved).to_f64_vector();

  auto W = [&](const std::string& n) { return store.get(n).value.data<double>(); };
  auto matvec = [](const double* A, const std::vector<double>& x, int64_t rows) {
    std::vector<double> r(static_cast<size_t>(rows), 0.0);
    for (int64_t i = 0; i < rows; ++i)
      for (size_t k = 0; k < x.size(); ++k) r[i] += A[i * static_cast<int64_t>(x.size()) + k] * x[k];
    return r;
  };
  auto mlp = [&](const std::string& p, const std::vector<double>& x, int64_t F) {
    std::vector<double> a = matvec(W(p + "up_proj.weight"), x, F);
    for (double& v : a) v = v > 0 ? v * v : 0;
    return matvec(W(p + "down_proj.weight"), a, static_cast<int64_t>(x.size()));
  };
  std::vector<int64_t> counts(E, 0);
  double err = 0;
  for (int64_t n = 0; n < N; ++n) {
    std::vector<double> x(u.data<double>() + n * H, u.data<double>() + (n + 1) * H);
    std::vector<double> sc = matvec(W("gate.weight"), x, E), q(E);
    for (int64_t e = 0; e < E; ++e) sc[e] = 1 / (1 + std::exp(-sc[e])), q[e] = sc[e] + bias.data<double>()[e];
    std::vector<int64_t> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return q[a] > q[b]; });
    double S = sc[order[0]] + sc[order[1]] + 1e-20;
    std::vector<double> xl = matvec(W("fc1_latent_proj.weight"), x, d), r(d, 0.0);
    for (int64_t j = 0; j < s.K; ++j) {
      int64_t e = order[j];
      ++counts[e];
      std::vector<double> ye = mlp(fmt::format("experts.{}.", e), xl, s.F);
      for (int64_t c = 0; c < d; ++c) r[c] += s.scale * sc[e] / S * ye[c];
    }
    std::vector<double> out = matvec(W("fc2_latent_proj.weight"), r, H), sh = mlp("shared_experts.", x, 3);
    for (int64_t h = 0; h < H; ++h) err = std::max(err, std::fabs(y[n * H + h] - out[h] - sh[h]));
  }
  EXPECT_LT(err, 1e-13);
  EXPECT_EQ(dynamic_cast<const model::MoeSaved&>(*saved).dispatch.tokens_per_expert, counts);

  // The backward leaves the bias (a buffer) without gradient.
  Tensor dy = Tensor::empty({2, 9, H}, DType::f64);
  fill_uniform(dy, Philox(1), -1, 1);
  m.backward(ctx, *saved, dy);
  EXPECT_FALSE(store.get("gate.e_score_correction_bias").grad.defined());
  EXPECT_GT(relative_error(store.get("gate.weight").grad, Tensor::zeros({E, H}, DType::f64)), 0.0);
}

TEST(MoeMixer, force_selection_pins_the_choice) {
  ModelConfig cfg = moe_config(kMoeGrouped);
  model::ParamStore store(host_backend(), DType::f64);
  MoeMixer m(cfg, store, "", 0);
  m.init(1);
  Context ctx = cpu_context(DType::f64);
  Tensor u = Tensor::empty({1, 3, kMoeGrouped.H}, DType::f64);
  fill_uniform(u, Philox(2), -1, 1);
  Tensor idx = Tensor::from_vector<int32_t>({3, 2}, {7, 0, 7, 1, 2, 3});
  m.force_selection(idx);
  std::unique_ptr<model::MixerSaved> saved;
  model::MoeLayerStats stats;
  m.forward(ctx, u, &saved, &stats);
  EXPECT_EQ(dynamic_cast<const model::MoeSaved&>(*saved).topk_idx.to_f64_vector(), idx.to_f64_vector());
  EXPECT_EQ(stats.tokens_per_expert, (std::vector<int64_t>{1, 1, 1, 1, 0, 0, 0, 2}));
  EXPECT_EQ(stats.selection.to_f64_vector(), idx.to_f64_vector());
  m.force_selection(Tensor::from_vector<int32_t>({3, 2}, {7, 7, 0, 1, 2, 3}));
  EXPECT_ANY_THROW(m.forward(ctx, u, nullptr));  // an expert twice in one row
}

}  // namespace
}  // namespace nemotron::testing
