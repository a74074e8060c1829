// ClippedPGLoss against values worked out by hand (on-policy, clipping on both sides with positive
// and negative advantages, dual clip, KL with its clamps, sample masks, sequence-level loss), and
// its d loss / d logprob against central finite differences.
#include <gtest/gtest.h>

#include <cmath>

#include "core/rng.h"
#include "rl/grpo_loss.h"

namespace nemotron::rl {
namespace {

// One micro-batch of B rows x T positions, every label valid and in the token mask.
model::Batch batch(int64_t B, int64_t T) {
  std::vector<int32_t> ids(static_cast<size_t>(B * T), 1);
  return {Tensor::from_vector<int32_t>({B, T}, ids), Tensor::from_vector<int32_t>({B, T}, ids),
          Tensor::from_vector<double>({B, T}, std::vector<double>(ids.size(), 1.0))};
}

struct Eval {
  train::TokenLossGrad g;
  double normaliser;
  double mean() const { return g.loss_sum / normaliser; }
  double d(size_t n) const { return g.dlogprob.to_f64_vector()[n]; }
};

Eval run(ClippedPGLoss& loss, const model::Batch& mb, const GrpoTokenData& d, const std::vector<double>& lp) {
  loss.set_data({d});
  Eval e;
  e.normaliser = loss.normaliser({mb});
  Context ctx{&host_backend(), nullptr, DType::f64};
  e.g = loss.per_token(ctx, 0, mb, Tensor::from_vector<double>({static_cast<int64_t>(lp.size())}, lp));
  return e;
}

LossFnSection no_kl() {
  LossFnSection c;
  c.reference_policy_kl_penalty = 0;
  return c;
}

TEST(ClippedPGLoss, on_policy_ratio_is_one_and_loss_is_minus_mean_advantage) {
  ClippedPGLoss loss(no_kl());
  const std::vector<double> lp{-0.5, -1.0, -2.0, -0.1, -3.0, -0.7};
  GrpoTokenData d{{1.5, 1.5, 1.5, -0.5, -0.5, -0.5}, lp, lp, {}, {1, 1}};
  const Eval e = run(loss, batch(2, 3), d, lp);
  EXPECT_EQ(e.normaliser, 6);
  EXPECT_NEAR(e.mean(), -(1.5 * 3 - 0.5 * 3) / 6, 1e-15);
  EXPECT_NEAR(e.g.metrics.at("probs_ratio"), 1.0, 1e-15);
  EXPECT_EQ(e.g.metrics.at("clip_fraction_lower") + e.g.metrics.at("clip_fraction_upper"), 0.0);
  EXPECT_NEAR(e.g.metrics.at("token_mult_prob_error"), 1.0, 1e-15);
  EXPECT_EQ(e.g.metrics.at("num_valid_samples"), 2);
  // d/dlp of -A * exp(lp - prev) at lp = prev: -A.
  EXPECT_NEAR(e.d(0), -1.5, 1e-15);
  EXPECT_NEAR(e.d(4), 0.5, 1e-15);
}

TEST(ClippedPGLoss, clips_both_sides_for_both_signs_of_the_advantage) {
  LossFnSection c = no_kl();
  c.ratio_clip_min = 0.2, c.ratio_clip_max = 0.28;  // Nemotron's clip-higher
  ClippedPGLoss loss(c);
  const std::vector<double> prev(4, -1.0);
  std::vector<double> lp(4);
  const double ratios[4] = {1.5, 0.5, 1.5, 0.5};
  for (int i = 0; i < 4; ++i) lp[i] = -1.0 + std::log(ratios[i]);
  GrpoTokenData d{{1, 1, -1, -1}, prev, prev, {}, {1}};
  const Eval e = run(loss, batch(1, 4), d, lp);
  // A = +1, ratio 1.5: max(-1.5, -1.28) = -1.28 (clipped, no gradient).
  // A = +1, ratio 0.5: max(-0.5, -0.8) = -0.5 (unclipped, d = -A * ratio = -0.5).
  // A = -1, ratio 1.5: max(1.5, 1.28) = 1.5 (unclipped, d = 1.5).
  // A = -1, ratio 0.5: max(0.5, 0.8) = 0.8 (clipped, no gradient).
  EXPECT_NEAR(e.g.loss_sum, -1.28 - 0.5 + 1.5 + 0.8, 1e-14);
  EXPECT_NEAR(e.mean(), (-1.28 - 0.5 + 1.5 + 0.8) / 4, 1e-14);
  EXPECT_EQ(e.d(0), 0.0);
  EXPECT_NEAR(e.d(1), -0.5, 1e-14);
  EXPECT_NEAR(e.d(2), 1.5, 1e-14);
  EXPECT_EQ(e.d(3), 0.0);
  EXPECT_NEAR(e.g.metrics.at("clip_fraction_lower"), 0.5, 1e-15);
  EXPECT_NEAR(e.g.metrics.at("clip_fraction_upper"), 0.5, 1e-15);
  EXPECT_NEAR(e.g.metrics.at("probs_ratio"), 1.0, 1e-14);
  EXPECT_NEAR(e.g.metrics.at("probs_ratio_clamped"), (1.28 + 0.8 + 1.28 + 0.8) / 4, 1e-14);
}

TEST(ClippedPGLoss, dual_clip_bounds_negative_advantages) {
  LossFnSection c = no_kl();
  c.ratio_clip_c = 3.0;
  ClippedPGLoss loss(c);
  const std::vector<double> prev(3, -2.0);
  const std::vector<double> lp{-2.0 + std::log(5.0), -2.0 + std::log(2.0), -2.0 + std::log(5.0)};
  GrpoTokenData d{{-1, -1, 2}, prev, prev, {}, {1}};
  const Eval e = run(loss, batch(1, 3), d, lp);
  // A = -1, ratio 5: max(5, 1.2) = 5 -> min(5, 3) = 3, no gradient. Ratio 2: 2 < 3 stays (d = 2).
  // A = 2, ratio 5: max(-10, -2.4) = -2.4 (clipped); the dual clip only acts on A < 0.
  EXPECT_NEAR(e.g.loss_sum, 3 + 2 - 2.4, 1e-14);
  EXPECT_EQ(e.d(0), 0.0);
  EXPECT_NEAR(e.d(1), 2.0, 1e-14);
  EXPECT_EQ(e.d(2), 0.0);
}

TEST(ClippedPGLoss, k3_kl_penalty_with_its_clamps) {
  LossFnSection c;
  c.reference_policy_kl_penalty = 0.1;
  ClippedPGLoss loss(c);
  const std::vector<double> lp{-1.0, -2.0, -30.0};
  const std::vector<double> ref{-1.5, -1.0, -5.0};  // logr = -0.5, 1, 25 (input clamp -> 20)
  GrpoTokenData d{{0, 0, 0}, lp, lp, ref, {1}};
  const Eval e = run(loss, batch(1, 3), d, lp);
  const double k0 = std::exp(-0.5) - 1 + 0.5, k1 = std::exp(1.0) - 1 - 1, k2 = 10.0;  // output clamp
  EXPECT_NEAR(e.g.loss_sum, 0.1 * (k0 + k1 + k2), 1e-14);
  EXPECT_NEAR(e.g.metrics.at("kl_penalty"), (k0 + k1 + k2) / 3, 1e-14);
  // d/dlp of exp(lp - stopgrad(lp)) * k3: k3 (the score-function term) - (exp(logr) - 1);
  // nothing through either clamp.
  EXPECT_NEAR(e.d(0), 0.1 * (k0 - (std::exp(-0.5) - 1)), 1e-14);
  EXPECT_NEAR(e.d(1), 0.1 * (k1 - (std::exp(1.0) - 1)), 1e-14);
  EXPECT_EQ(e.d(2), 0.0);
}

TEST(ClippedPGLoss, sample_mask_and_token_mask_drop_tokens) {
  ClippedPGLoss loss(no_kl());
  model::Batch mb = batch(2, 2);
  mb.loss_mask = Tensor::from_vector<double>({2, 2}, {1, 0, 1, 1});
  const std::vector<double> lp{-1, -1, -1, -1};
  GrpoTokenData d{{1, 5, 7, 7}, lp, lp, {}, {1, 0}};
  const Eval e = run(loss, mb, d, lp);
  EXPECT_EQ(e.normaliser, 1);
  EXPECT_NEAR(e.g.loss_sum, -1, 1e-15);
  EXPECT_EQ(e.d(1), 0.0);
  EXPECT_EQ(e.d(2), 0.0);
  // Sequence level: per row the token mean, normaliser = valid samples.
  LossFnSection c = no_kl();
  c.token_level_loss = false;
  ClippedPGLoss seq(c);
  GrpoTokenData d2{{1, 5, 3, 5}, lp, lp, {}, {1, 1}};
  const Eval s = run(seq, mb, d2, lp);
  EXPECT_EQ(s.normaliser, 2);
  EXPECT_NEAR(s.g.loss_sum, -1 / (1 + 1e-8) - 8 / (2 + 1e-8), 1e-12);
}

TEST(ClippedPGLoss, token_mult_prob_error_and_importance_weights) {
  LossFnSection c = no_kl();
  c.use_importance_sampling_correction = true;
  ClippedPGLoss loss(c);
  const std::vector<double> prev{-1.0, -2.0}, gen{-1.2, -1.5};
  GrpoTokenData d{{1, 1}, prev, gen, {}, {1}};
  const Eval e = run(loss, batch(1, 2), d, prev);
  EXPECT_NEAR(e.g.metrics.at("token_mult_prob_error"), (std::exp(0.2) + std::exp(0.5)) / 2, 1e-14);
  // w = exp(prev - gen) multiplies the on-policy surrogate -A.
  EXPECT_NEAR(e.g.loss_sum, -(std::exp(0.2) + std::exp(-0.5)), 1e-14);
  EXPECT_NEAR(e.g.metrics.at("sampling_importance_ratio"), (std::exp(0.2) + std::exp(-0.5)) / 2, 1e-14);
  EXPECT_NEAR(e.g.metrics.at("approx_entropy"), -(std::exp(0.2) * -1.0 + std::exp(-0.5) * -2.0) / 2, 1e-14);
}

// Everything on at once (clip-higher, dual clip, IS correction, k3 KL with the on-policy
// approximation, whose weight exp(lp - gen_lp) keeps its gradient): the returned gradient is the
// derivative of the returned numerator. (Without the approximation the weight is the
// straight-through exp(lp - stopgrad(lp)): tested by hand above.)
TEST(ClippedPGLoss, gradient_matches_finite_differences) {
  for (bool token_level : {true, false}) {
    LossFnSection c;
    c.reference_policy_kl_penalty = 0.05;
    c.ratio_clip_max = 0.28;
    c.ratio_clip_c = 3.0;
    c.use_importance_sampling_correction = true;
    c.use_on_policy_kl_approximation = true;
    c.token_level_loss = token_level;
    const int64_t B = 3, T = 16, N = B * T;
    Philox rng(7);
    auto uni = [&](uint64_t i) { return rng.uniform(i); };
    GrpoTokenData d;
    std::vector<double> lp(N);
    for (int64_t n = 0; n < N; ++n) {
      lp[n] = -0.1 - 3 * uni(5 * n);
      d.prev_logprobs.push_back(lp[n] + 1.6 * (uni(5 * n + 1) - 0.5));  // ratios ~ 0.45 .. 2.2: all regimes
      d.generation_logprobs.push_back(d.prev_logprobs.back() + 0.2 * (uni(5 * n + 2) - 0.5));
      d.reference_logprobs.push_back(lp[n] + 2 * (uni(5 * n + 3) - 0.5));
      d.advantages.push_back(4 * (uni(5 * (n / T) + 4) - 0.5));
    }
    d.sample_mask = {1, 0, 1};
    model::Batch mb = batch(B, T);
    std::vector<double> mask(N, 1.0);
    mask[3] = mask[20] = 0;
    mb.loss_mask = Tensor::from_vector<double>({B, T}, mask);
    ClippedPGLoss loss(c);
    const Eval e = run(loss, mb, d, lp);
    const double h = 1e-6;
    double worst = 0;
    for (int64_t n = 0; n < N; ++n) {
      std::vector<double> p = lp, m = lp;
      p[n] += h, m[n] -= h;
      const double fd = (run(loss, mb, d, p).g.loss_sum - run(loss, mb, d, m).g.loss_sum) / (2 * h);
      worst = std::max(worst, std::fabs(fd - e.d(static_cast<size_t>(n))));
    }
    EXPECT_LT(worst, 1e-8) << "token_level " << token_level;
  }
}

// use_on_policy_kl_approximation: the KL term is weighted by v = exp(lp - gen_lp), d v / d lp = v.
TEST(ClippedPGLoss, on_policy_kl_approximation_weight) {
  LossFnSection c;
  c.reference_policy_kl_penalty = 0.1;
  c.use_on_policy_kl_approximation = true;
  ClippedPGLoss loss(c);
  const std::vector<double> lp{-1.0}, gen{-1.3}, ref{-1.5};
  GrpoTokenData d{{0}, lp, gen, ref, {1}};
  const Eval e = run(loss, batch(1, 1), d, lp);
  const double kw = std::exp(0.3), k3 = std::exp(-0.5) - 1 + 0.5;
  EXPECT_NEAR(e.g.loss_sum, 0.1 * kw * k3, 1e-15);
  EXPECT_NEAR(e.d(0), 0.1 * kw * (k3 - (std::exp(-0.5) - 1)), 1e-15);
}

}  // namespace
}  // namespace nemotron::rl
