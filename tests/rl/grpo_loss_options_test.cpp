// ClippedPGLoss's NeMo RL options past clipping and KL (disable_ppo_ratio, force_on_policy_ratio,
// GSPO's sequence-level ratios, CISPO, truncated importance sampling, VAPO's positive-example NLL)
// and its newer metrics (ratio extrema, Jensen-Shannon, is_oob_ratio, positive_nll_loss, the
// sequence-level kl_penalty), each against values worked out by hand in float64; the gradients of
// every option against central finite differences; a global batch with nothing to train.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <optional>

#include "core/rng.h"
#include "rl/grpo_loss.h"

namespace nemotron::rl {
namespace {

// One micro-batch of B rows x T positions, every label valid; `mask` (empty: all 1) the loss mask.
model::Batch batch(int64_t B, int64_t T, std::vector<double> mask = {}) {
  std::vector<int32_t> ids(static_cast<size_t>(B * T), 1);
  if (mask.empty()) mask.assign(ids.size(), 1.0);
  return {Tensor::from_vector<int32_t>({B, T}, ids), Tensor::from_vector<int32_t>({B, T}, ids),
          Tensor::from_vector<double>({B, T}, mask)};
}

struct Eval {
  train::TokenLossGrad g;
  double normaliser;
  double mean() const { return g.loss_sum / normaliser; }
  double d(size_t n) const { return g.dlogprob.to_f64_vector()[n]; }
  double metric(const std::string& k) const { return g.metrics.at(k); }
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

constexpr double kEps = 1e-8;  // NeMo RL's masked_mean epsilon

TEST(ClippedPGLossOptions, disable_ppo_ratio_is_reinforce_on_the_log_prob) {
  LossFnSection c = no_kl();
  c.disable_ppo_ratio = true;
  ClippedPGLoss loss(c);
  const std::vector<double> lp{-0.5, -2.0}, prev{-1.0, -1.0};
  const Eval e = run(loss, batch(1, 2), GrpoTokenData{{1, -1}, prev, prev, {}, {1}}, lp);
  // ratio = clamped = lp: l = max(-A lp, -A lp) = -A lp: -1 * -0.5 = 0.5, 1 * -2 = -2; d = -A.
  EXPECT_NEAR(e.g.loss_sum, 0.5 - 2.0, 1e-15);
  EXPECT_NEAR(e.mean(), -0.75, 1e-15);
  EXPECT_EQ(e.d(0), -1.0);
  EXPECT_EQ(e.d(1), 1.0);
  // The ratio metrics read the log-probs; nothing is clamped.
  EXPECT_NEAR(e.metric("probs_ratio"), -1.25, 1e-15);
  EXPECT_EQ(e.metric("probs_ratio_min"), -2.0);
  EXPECT_EQ(e.metric("probs_ratio_max"), -0.5);
  EXPECT_EQ(e.metric("probs_ratio_clamped_min"), -2.0);
  EXPECT_EQ(e.metric("clip_fraction_lower") + e.metric("clip_fraction_upper"), 0.0);
}

TEST(ClippedPGLossOptions, force_on_policy_ratio_uses_the_current_log_probs_as_prev) {
  LossFnSection c = no_kl();
  c.force_on_policy_ratio = true;
  c.use_importance_sampling_correction = true;
  ClippedPGLoss loss(c);
  const std::vector<double> lp{-1.0, -3.0}, gen{-1.5, -2.5};
  // No prev log-probs at all: NeMo RL does not read them under force_on_policy_ratio.
  const Eval e = run(loss, batch(1, 2), GrpoTokenData{{2, -1}, {}, gen, {}, {1}}, lp);
  // r = exp(lp - stopgrad(lp)) = 1, unclamped, d r / d lp = 1; w = exp(lp - gen) = e^0.5, e^-0.5.
  // l = -A r: -2, 1 -> loss_sum = -2 e^0.5 + e^-0.5; d = w * -A = -2 e^0.5, e^-0.5.
  EXPECT_NEAR(e.g.loss_sum, -2 * std::exp(0.5) + std::exp(-0.5), 1e-14);
  EXPECT_NEAR(e.d(0), -2 * std::exp(0.5), 1e-14);
  EXPECT_NEAR(e.d(1), std::exp(-0.5), 1e-14);
  EXPECT_EQ(e.metric("probs_ratio"), 1.0);
  EXPECT_EQ(e.metric("probs_ratio_clamped_max"), 1.0);
  // token_mult_prob_error with prev = lp: mean exp|gen - lp| = e^0.5.
  EXPECT_NEAR(e.metric("token_mult_prob_error"), std::exp(0.5), 1e-14);
}

TEST(ClippedPGLossOptions, gspo_one_ratio_and_one_weight_per_sequence) {
  LossFnSection c = no_kl();
  c.sequence_level_importance_ratios = true;
  c.token_level_loss = false;
  c.use_importance_sampling_correction = true;
  ClippedPGLoss loss(c);
  // Row 0: lp - prev = 0.1, 0.05 -> r = exp(0.15 / (2 + 1e-8)) ~ 1.0779 (inside [0.8, 1.2]);
  // prev - gen = 0.1, 0 -> w = exp(0.1 + 0) (a sum, not a mean). Row 1: sample mask 0.
  const std::vector<double> lp{-1.0, -2.0, -1.0, -1.0};
  const std::vector<double> prev{-1.1, -2.05, -1.0, -1.0}, gen{-1.2, -2.05, -1.0, -1.0};
  const Eval e = run(loss, batch(2, 2), GrpoTokenData{{1, 1, 5, 5}, prev, gen, {}, {1, 0}}, lp);
  const double r = std::exp(0.15 / (2 + kEps)), w = std::exp(0.1);
  EXPECT_EQ(e.normaliser, 1);  // one valid sequence
  // Row 0's token mean of w * -A r over 2 tokens: -2 w r / (2 + 1e-8).
  EXPECT_NEAR(e.g.loss_sum, -2 * w * r / (2 + kEps), 1e-14);
  // d/dlp_t = -2 w / (2 + 1e-8) * d r / d lp_t = -2 w / (2 + 1e-8) * r / (2 + 1e-8), both tokens.
  EXPECT_NEAR(e.d(0), -2 * w * r / ((2 + kEps) * (2 + kEps)), 1e-14);
  EXPECT_NEAR(e.d(1), e.d(0), 1e-15);
  EXPECT_EQ(e.d(2), 0.0);
  EXPECT_NEAR(e.metric("probs_ratio"), r, 1e-14);  // over the 2 valid tokens
  EXPECT_NEAR(e.metric("sampling_importance_ratio"), w, 1e-14);  // a mean over the 1 valid sequence
}

TEST(ClippedPGLossOptions, cispo_weighs_the_log_prob_by_the_detached_clamped_ratio) {
  LossFnSection c = no_kl();
  c.use_cispo = true;
  c.ratio_clip_max = 0.28;
  ClippedPGLoss loss(c);
  const std::vector<double> lp{-1.0, -2.0};
  const std::vector<double> prev{-1.0 - std::log(1.5), -2.0 - std::log(0.9)};  // ratios 1.5, 0.9
  const Eval e = run(loss, batch(1, 2), GrpoTokenData{{1, -1}, prev, prev, {}, {1}}, lp);
  // l = -A * sg(clamp(r, 0.8, 1.28)) * lp: -1 * 1.28 * -1 = 1.28; 1 * 0.9 * -2 = -1.8.
  // d = -A * clamp(r): -1.28 (the clipped token still learns), 0.9.
  EXPECT_NEAR(e.g.loss_sum, 1.28 - 1.8, 1e-14);
  EXPECT_NEAR(e.d(0), -1.28, 1e-14);
  EXPECT_NEAR(e.d(1), 0.9, 1e-14);
  EXPECT_NEAR(e.metric("probs_ratio_max"), 1.5, 1e-14);
  EXPECT_NEAR(e.metric("probs_ratio_clamped_max"), 1.28, 1e-14);
  EXPECT_NEAR(e.metric("probs_ratio_min"), 0.9, 1e-14);
}

// On-policy (r = 1), A = 1: l = -1 per token, so the loss is -sum of the truncated weights.
// w = exp(prev - gen) = 0.25, 1, 4.
struct TisCase {
  const char* type;
  std::optional<double> lo;
  double hi;
  std::vector<double> w;  // after truncation
  double oob;
};

TEST(ClippedPGLossOptions, truncated_importance_sampling_tis_and_icepop) {
  const std::vector<double> lp(3, -1.0);
  const std::vector<double> gen{-1.0 - std::log(0.25), -1.0, -1.0 - std::log(4.0)};
  for (const TisCase& k : {TisCase{"tis", std::nullopt, 2.0, {0.25, 1, 2}, 1.0 / 3},  // clamp to [0, 2]
                           TisCase{"tis", 0.5, 2.0, {0.5, 1, 2}, 2.0 / 3},            // clamp to [0.5, 2]
                           TisCase{"icepop", 0.5, 2.0, {0, 1, 0}, 2.0 / 3}}) {        // zero outside
    LossFnSection c = no_kl();
    c.use_importance_sampling_correction = true;
    c.truncated_importance_sampling_type = k.type;
    c.truncated_importance_sampling_ratio = k.hi;
    c.truncated_importance_sampling_ratio_min = k.lo;
    ClippedPGLoss loss(c);
    const Eval e = run(loss, batch(1, 3), GrpoTokenData{{1, 1, 1}, lp, gen, {}, {1}}, lp);
    const double sum = k.w[0] + k.w[1] + k.w[2];
    EXPECT_NEAR(e.g.loss_sum, -sum, 1e-14) << k.type;
    for (size_t n = 0; n < 3; ++n) EXPECT_NEAR(e.d(n), -k.w[n], 1e-14) << k.type << " token " << n;  // w * -A * r
    EXPECT_NEAR(e.metric("is_oob_ratio"), k.oob, 1e-15) << k.type;
    EXPECT_NEAR(e.metric("sampling_importance_ratio"), sum / 3, 1e-14) << k.type;  // of the truncated weights
  }
}

TEST(ClippedPGLossOptions, truncated_importance_sampling_seq_mask_tis) {
  LossFnSection c = no_kl();
  c.use_importance_sampling_correction = true;
  c.truncated_importance_sampling_type = "seq-mask-tis";
  c.truncated_importance_sampling_ratio = 2.0;
  c.truncated_importance_sampling_ratio_min = 0.5;
  ClippedPGLoss loss(c);
  const std::vector<double> lp(4, -1.0);
  // Row 0: w = 0.25, 4 -> geometric mean exp((ln 0.25 + ln 4) / 2) = 1: kept, its raw (untruncated)
  // token weights stay. Row 1: w = 4, 4 -> geometric mean ~4 > 2: the whole row's weights -> 0.
  const double l4 = std::log(4.0);
  const std::vector<double> gen{-1.0 + l4, -1.0 - l4, -1.0 - l4, -1.0 - l4};
  const Eval e = run(loss, batch(2, 2), GrpoTokenData{{1, 1, 1, 1}, lp, gen, {}, {1, 1}}, lp);
  EXPECT_NEAR(e.g.loss_sum, -(0.25 + 4.0), 1e-14);
  EXPECT_NEAR(e.d(1), -4.0, 1e-14);
  EXPECT_EQ(e.d(2), 0.0);
  EXPECT_NEAR(e.metric("is_oob_ratio"), 0.5, 1e-15);  // 1 of 2 sequences
  EXPECT_NEAR(e.metric("sampling_importance_ratio"), (0.25 + 4.0) / 4, 1e-14);
}

TEST(ClippedPGLossOptions, sequence_level_kl_penalty_is_a_mean_over_sequences) {
  LossFnSection c;
  c.reference_policy_kl_penalty = 0.1;
  c.reference_policy_kl_type = "k1";
  c.token_level_loss = false;
  ClippedPGLoss loss(c);
  // k1 = -(ref - lp) = lp - ref: row 0 tokens 0.2, 0.4; row 1 one valid token (loss mask 1, 0) 1.0.
  const std::vector<double> lp{-1.0, -1.0, -1.0, -1.0}, ref{-1.2, -1.4, -2.0, -7.0};
  const Eval e = run(loss, batch(2, 2, {1, 1, 1, 0}), GrpoTokenData{{0, 0, 0, 0}, lp, lp, ref, {1, 1}}, lp);
  // Per row the token mean, then the mean over the 2 sequences:
  // (0.6 / (2 + 1e-8) + 1.0 / (1 + 1e-8)) / 2 ~ 0.65 (the token mean would be 1.6 / 3 ~ 0.533).
  const double seq_mean = (0.6 / (2 + kEps) + 1.0 / (1 + kEps)) / 2;
  EXPECT_NEAR(e.metric("kl_penalty"), seq_mean, 1e-14);
  EXPECT_NEAR(e.mean(), 0.1 * seq_mean, 1e-14);  // A = 0: the loss is the KL term
  // Token level, the same data: the token mean.
  LossFnSection t = c;
  t.token_level_loss = true;
  ClippedPGLoss tok(t);
  EXPECT_NEAR(run(tok, batch(2, 2, {1, 1, 1, 0}), GrpoTokenData{{0, 0, 0, 0}, lp, lp, ref, {1, 1}}, lp)
                  .metric("kl_penalty"),
              1.6 / 3, 1e-14);
}

TEST(ClippedPGLossOptions, use_kl_in_reward_takes_the_kl_out_of_the_loss) {
  LossFnSection c;
  c.reference_policy_kl_penalty = 0.1;
  c.use_kl_in_reward = true;
  ClippedPGLoss loss(c);
  const std::vector<double> lp{-1.0};
  // No reference log-probs needed: the loss's KL weight is 0.
  const Eval e = run(loss, batch(1, 1), GrpoTokenData{{2}, lp, lp, {}, {1}}, lp);
  EXPECT_EQ(e.g.loss_sum, -2.0);
  EXPECT_EQ(e.metric("kl_penalty"), 0.0);
}

TEST(ClippedPGLossOptions, positive_example_nll_on_rows_with_reward_above_zero) {
  LossFnSection c = no_kl();
  c.positive_example_nll_weight = 0.5;
  ClippedPGLoss loss(c);
  const std::vector<double> lp{-1.0, -2.0, -3.0, -4.0};
  GrpoTokenData d{{0, 0, 0, 0}, lp, lp, {}, {1, 1}};
  d.rewards = {1.0, 0.0};  // only row 0 is a positive example
  const Eval e = run(loss, batch(2, 2), d, lp);
  // NLL = mean -lp over row 0's 2 tokens = (1 + 2) / (2 + 1e-8); loss = 0.5 * NLL (A = 0).
  const double nll = 3.0 / (2 + kEps);
  EXPECT_NEAR(e.mean(), 0.5 * nll, 1e-14);
  EXPECT_NEAR(e.metric("positive_nll_loss"), nll, 1e-14);
  // d mean / d lp = -0.5 / (2 + 1e-8) on row 0; the step scales d numerator by 1 / normaliser (4).
  EXPECT_NEAR(e.d(0) / e.normaliser, -0.5 / (2 + kEps), 1e-14);
  EXPECT_EQ(e.d(2), 0.0);
  // Without rewards (or weight 0) the term is off.
  LossFnSection off = no_kl();
  ClippedPGLoss none(off);
  EXPECT_EQ(run(none, batch(2, 2), d, lp).metric("positive_nll_loss"), 0.0);
}

TEST(ClippedPGLossOptions, js_divergence_and_ratio_extrema) {
  LossFnSection c = no_kl();
  c.ratio_clip_max = 0.28;
  ClippedPGLoss loss(c);
  // Token 0: prev -1, gen -2, ratio 1.5; token 1: prev = gen = -1, ratio 0.5.
  const std::vector<double> prev{-1.0, -1.0}, gen{-2.0, -1.0};
  const std::vector<double> lp{-1.0 + std::log(1.5), -1.0 + std::log(0.5)};
  const Eval e = run(loss, batch(1, 2), GrpoTokenData{{1, 1}, prev, gen, {}, {1}}, lp);
  // JS through M = (p + q) / 2 with p = e^-1, q = e^-2: p/M = 2 / (1 + e^-1) ~ 1.4621, q/M ~ 0.5379;
  // KL(p||M) = p/M - ln(p/M) - 1 ~ 0.0822, KL(q||M) ~ 0.1580; JS = their mean ~ 0.1201. Token 1: 0.
  const double pm = 2 / (1 + std::exp(-1.0)), qm = 2 * std::exp(-1.0) / (1 + std::exp(-1.0));
  const double js = 0.5 * ((pm - std::log(pm) - 1) + (qm - std::log(qm) - 1));
  EXPECT_NEAR(js, 0.1201145, 1e-7);
  EXPECT_NEAR(e.metric("js_divergence_error"), js / 2, 1e-15);
  EXPECT_NEAR(e.metric("probs_ratio_min"), 0.5, 1e-14);
  EXPECT_NEAR(e.metric("probs_ratio_max"), 1.5, 1e-14);
  EXPECT_NEAR(e.metric("probs_ratio_clamped_min"), 0.8, 1e-14);
  EXPECT_NEAR(e.metric("probs_ratio_clamped_max"), 1.28, 1e-14);
  EXPECT_EQ(loss.metric_op("probs_ratio_min"), parallel::ReduceOp::min);
  EXPECT_EQ(loss.metric_op("probs_ratio_clamped_max"), parallel::ReduceOp::max);
  EXPECT_EQ(loss.metric_op("js_divergence_error"), parallel::ReduceOp::sum);
  EXPECT_FALSE(e.g.metrics.count("is_oob_ratio"));  // only with truncated importance sampling
}

TEST(ClippedPGLossOptions, a_global_batch_with_nothing_to_train_gives_zero) {
  for (bool token_level : {true, false}) {
    LossFnSection c;
    c.token_level_loss = token_level;
    ClippedPGLoss loss(c);
    EXPECT_TRUE(loss.zero_when_empty());
    const std::vector<double> lp{-1.0, -2.0};
    const Eval e = run(loss, batch(2, 1), GrpoTokenData{{1, -1}, lp, lp, lp, {0, 0}}, lp);
    EXPECT_EQ(e.normaliser, 0);
    EXPECT_EQ(e.g.loss_sum, 0.0);
    EXPECT_EQ(e.d(0), 0.0);
    EXPECT_EQ(e.d(1), 0.0);
    EXPECT_EQ(e.metric("probs_ratio"), 0.0);
    EXPECT_TRUE(std::isinf(e.metric("probs_ratio_min")));  // no token: NeMo RL's +inf (logged as -1)
  }
}

// Each option's gradient is the derivative of its numerator (finite differences, float64). CISPO's
// and force_on_policy_ratio's are not derivatives of their values (a detached clamped ratio;
// exp(lp - stopgrad(lp)) whose value is always 1): tested by hand above.
TEST(ClippedPGLossOptions, gradients_match_finite_differences) {
  struct Opt {
    const char* name;
    std::function<void(LossFnSection&)> set;
  };
  const std::vector<Opt> opts = {
      {"gspo", [](LossFnSection& c) { c.sequence_level_importance_ratios = true, c.token_level_loss = false; }},
      {"gspo+tis", [](LossFnSection& c) {
         c.sequence_level_importance_ratios = true, c.token_level_loss = false;
         c.truncated_importance_sampling_type = "tis", c.truncated_importance_sampling_ratio = 1.05;
       }},
      {"disable_ppo_ratio", [](LossFnSection& c) { c.disable_ppo_ratio = true; }},
      {"icepop", [](LossFnSection& c) {
         c.truncated_importance_sampling_type = "icepop", c.truncated_importance_sampling_ratio = 1.05;
         c.truncated_importance_sampling_ratio_min = 0.97;
       }},
      {"seq-mask-tis", [](LossFnSection& c) {
         c.truncated_importance_sampling_type = "seq-mask-tis", c.truncated_importance_sampling_ratio = 1.01;
         c.truncated_importance_sampling_ratio_min = 0.99;
       }},
      {"positive_nll", [](LossFnSection& c) { c.positive_example_nll_weight = 0.3, c.token_level_loss = false; }},
  };
  for (const Opt& o : opts) {
    LossFnSection c;
    c.reference_policy_kl_penalty = 0.05;
    c.ratio_clip_max = 0.28;
    c.ratio_clip_c = 3.0;
    c.use_importance_sampling_correction = true;
    c.use_on_policy_kl_approximation = true;
    o.set(c);
    const int64_t B = 3, T = 12, N = B * T;
    Philox rng(11);
    auto uni = [&](uint64_t i) { return rng.uniform(i); };
    GrpoTokenData d;
    std::vector<double> lp(N);
    for (int64_t n = 0; n < N; ++n) {
      lp[n] = -0.1 - 3 * uni(5 * n);
      d.prev_logprobs.push_back(lp[n] + 0.6 * (uni(5 * n + 1) - 0.5));
      d.generation_logprobs.push_back(d.prev_logprobs.back() + 0.2 * (uni(5 * n + 2) - 0.5));
      d.reference_logprobs.push_back(lp[n] + 2 * (uni(5 * n + 3) - 0.5));
      d.advantages.push_back(4 * (uni(5 * (n / T) + 4) - 0.5));
    }
    d.sample_mask = {1, 1, 1};
    d.rewards = {1.0, 0.0, 0.5};
    std::vector<double> mask(N, 1.0);
    mask[3] = mask[20] = 0;
    const model::Batch mb = batch(B, T, mask);
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
    EXPECT_LT(worst, 1e-7) << o.name;
  }
}

}  // namespace
}  // namespace nemotron::rl
