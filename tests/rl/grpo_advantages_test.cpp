// GRPO advantages against values worked out by hand from NeMo RL's formulas.
#include <gtest/gtest.h>

#include <cmath>

#include "rl/grpo_advantages.h"

namespace nemotron::rl {
namespace {

TEST(GrpoAdvantages, leave_one_out_baseline_and_std) {
  // One group of four: row 0 (r = 1) sees {0, 0, 1}: b = 1/3, std = sqrt((1/3 - 1/9) * 3/2) = sqrt(1/3).
  // Row 1 (r = 0) sees {0, 1, 1}: b = 2/3, std = sqrt((2/3 - 4/9) * 3/2) = sqrt(1/3).
  const std::vector<double> r{1, 0, 0, 1};
  const std::vector<int64_t> g{0, 0, 0, 0};
  const BaselineStd bs = baseline_and_std_per_prompt(r, g, true);
  EXPECT_NEAR(bs.baseline[0], 1.0 / 3, 1e-15);
  EXPECT_NEAR(bs.baseline[1], 2.0 / 3, 1e-15);
  EXPECT_NEAR(bs.std[0], std::sqrt(1.0 / 3), 1e-15);
  const std::vector<double> a = grpo_advantages(r, g, true, true);
  const double s = std::sqrt(1.0 / 3) + 1e-6;
  EXPECT_NEAR(a[0], (2.0 / 3) / s, 1e-12);
  EXPECT_NEAR(a[1], (-2.0 / 3) / s, 1e-12);
  EXPECT_NEAR(a[3], a[0], 1e-15);
  // Without normalisation: the raw differences.
  const std::vector<double> raw = grpo_advantages(r, g, true, false);
  EXPECT_NEAR(raw[0], 2.0 / 3, 1e-15);
  EXPECT_NEAR(raw[2], -2.0 / 3, 1e-15);
}

TEST(GrpoAdvantages, group_mean_and_unbiased_std_without_leave_one_out) {
  const std::vector<double> a = grpo_advantages({1, 0, 0, 1, 2, 4}, {0, 0, 0, 0, 1, 1}, false, true);
  const double s = std::sqrt(1.0 / 3) + 1e-6;  // unbiased std of {1, 0, 0, 1}
  EXPECT_NEAR(a[0], 0.5 / s, 1e-12);
  EXPECT_NEAR(a[1], -0.5 / s, 1e-12);
  const double s2 = std::sqrt(2.0) + 1e-6;  // unbiased std of {2, 4}
  EXPECT_NEAR(a[4], -1.0 / s2, 1e-12);
  EXPECT_NEAR(a[5], 1.0 / s2, 1e-12);
}

TEST(GrpoAdvantages, equal_rewards_give_zero) {
  for (bool loo : {true, false}) {
    const std::vector<double> a = grpo_advantages({0.5, 0.5, 0.5, 0.5, 1, 1, 1}, {0, 0, 0, 0, 1, 1, 1}, loo, true);
    for (double v : a) EXPECT_EQ(v, 0.0);
    // Where the group sum rounds, NeMo RL's formula leaves a rounding residue of A (1e-16) and of
    // std, and the division by (std + 1e-6) only lifts it to ~1e-10: still no learning signal.
    for (double v : grpo_advantages({0.7, 0.7, 0.7, 0.7}, {0, 0, 0, 0}, loo, true)) EXPECT_LT(std::fabs(v), 1e-9);
  }
}

TEST(GrpoAdvantages, one_generation_per_prompt_gives_zero) {
  // G = 1: every group has one row; the baseline is the row's own reward.
  const std::vector<double> a = grpo_advantages({1, 0, 0.5}, {0, 1, 2}, true, true);
  EXPECT_EQ(a, (std::vector<double>{0, 0, 0}));
}

TEST(GrpoAdvantages, two_generations_leave_one_out_keep_the_raw_difference) {
  // G = 2: the other row alone is the baseline, its std is 0 * (1/0) = NaN -> 0, so no division.
  const std::vector<double> a = grpo_advantages({1, 0, 0.25, 0.75}, {0, 0, 1, 1}, true, true);
  EXPECT_EQ(a, (std::vector<double>{1, -1, -0.5, 0.5}));
}

TEST(GrpoAdvantages, one_prompt_group_by_prompt_merges_duplicates) {
  EXPECT_EQ(group_by_prompt({{1, 2}, {1, 2}, {3}, {1, 2}, {3}, {1}}), (std::vector<int64_t>{0, 0, 1, 0, 1, 2}));
  // One prompt, three generations: rewards {1, 0, 0}; row 0 sees {0, 0}: b = 0, std 0 -> A = 1.
  // Rows 1 and 2 see {0, 1}: b = 1/2, std = sqrt((1/2 - 1/4) * 2) = sqrt(1/2).
  const std::vector<double> a = grpo_advantages({1, 0, 0}, group_by_prompt({{5}, {5}, {5}}), true, true);
  EXPECT_EQ(a[0], 1.0);
  EXPECT_NEAR(a[1], -0.5 / (std::sqrt(0.5) + 1e-6), 1e-12);
  EXPECT_EQ(a[1], a[2]);
}

TEST(GrpoAdvantages, equal_inexact_other_rewards_have_zero_std) {
  // One right answer (1) among format-only rewards (0.2, not exact in binary): the right row's
  // others are all 0.2, so its std is 0 and its advantage stays the raw 0.8 (a one-pass variance
  // left ~1e-17 there and divided 0.8 by ~1e-6: advantages of ~1e5 and a grad norm of 1e5 seen on
  // the tiny recipe).
  const std::vector<double> r = {1.0, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2};
  const std::vector<double> a = grpo_advantages(r, std::vector<int64_t>(8, 0), true, true);
  EXPECT_NEAR(a[0], 0.8, 1e-15);
  // Others of a 0.2 row: one 1 and six 0.2: mean 2.2/7, unbiased std over 7 values.
  const double b = 2.2 / 7, var = ((1 - b) * (1 - b) + 6 * (0.2 - b) * (0.2 - b)) / 6;
  EXPECT_NEAR(a[1], (0.2 - b) / (std::sqrt(var) + 1e-6), 1e-12);
  for (double x : a) EXPECT_LT(std::abs(x), 3.0);
  // And an all-0.2 group: every advantage exactly 0.
  for (double x : grpo_advantages(std::vector<double>(8, 0.2), std::vector<int64_t>(8, 0), true, true)) EXPECT_EQ(x, 0.0);
}

TEST(GrpoAdvantages, reward_scaling_and_shaping) {
  RewardScaling sc;
  sc.enabled = true;
  sc.source_min = 0, sc.source_max = 1, sc.target_min = -1, sc.target_max = 1;
  std::vector<double> r{-3, 0, 0.25, 1, 7};
  scale_rewards(sc, r);
  EXPECT_EQ(r, (std::vector<double>{-1, -1, -0.5, 1, 1}));

  RewardShaping sh;
  sh.enabled = true;
  sh.max_response_length = 20, sh.overlong_buffer_length = 4, sh.overlong_buffer_penalty = 1.0;
  std::vector<double> s{1, 1, 1};
  shape_rewards(sh, s, {10, 18, 20}, {false, false, true});  // expected = 16
  EXPECT_EQ(s, (std::vector<double>{1, 0.5, 0}));
  sh.stop_properly_penalty_coef = 0.5;
  std::vector<double> t{1, 1};
  shape_rewards(sh, t, {30, 30}, {false, true});
  EXPECT_EQ(t, (std::vector<double>{1, 0.5}));
  sh.enabled = false;
  shape_rewards(sh, t, {30, 30}, {true, true});
  EXPECT_EQ(t, (std::vector<double>{1, 0.5}));
}

// Rows the environment could not score (valid = false) are in no baseline: every other row's
// advantage equals the one computed with the unscored rows removed from the batch, and the
// unscored rows get advantage 0 (they are also masked out of the loss).
TEST(GrpoAdvantages, unscored_rows_are_left_out_of_the_group_baselines) {
  // Groups: 0 (rows 0-4, row 2 unscored), 1 (rows 5-8, rows 6-8 unscored: one valid row left),
  // 2 (rows 9-11, all valid); rewards of unscored rows are junk that must not matter.
  const std::vector<double> r{1, 0, 7, 0.5, 1, 0.25, -3, 1, 9, 0, 1, 1};
  const std::vector<int64_t> g{0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2};
  const std::vector<bool> valid{true, true, false, true, true, true, false, false, false, true, true, true};
  std::vector<double> kept_r;
  std::vector<int64_t> kept_g;
  std::vector<size_t> kept;
  for (size_t i = 0; i < r.size(); ++i)
    if (valid[i]) kept_r.push_back(r[i]), kept_g.push_back(g[i]), kept.push_back(i);
  for (const bool loo : {true, false})
    for (const bool normalize : {true, false}) {
      const std::vector<double> a = grpo_advantages(r, g, loo, normalize, valid);
      const std::vector<double> want = grpo_advantages(kept_r, kept_g, loo, normalize);
      for (size_t k = 0; k < kept.size(); ++k) EXPECT_EQ(a[kept[k]], want[k]) << "row " << kept[k] << " loo " << loo;
      for (size_t i : {2, 6, 7, 8}) EXPECT_EQ(a[i], 0.0) << "unscored row " << i;
      // Group 1 keeps one valid row: nothing to compare it with, zero advantage.
      EXPECT_EQ(a[5], 0.0);
    }
  // By hand, leave-one-out, row 0 of group 0 sees {0, 0.5, 1} (not the unscored 7): b = 0.5,
  // std = 0.5, A = (1 - 0.5) / (0.5 + 1e-6).
  const BaselineStd bs = baseline_and_std_per_prompt(r, g, true, valid);
  EXPECT_DOUBLE_EQ(bs.baseline[0], 0.5);
  EXPECT_DOUBLE_EQ(bs.std[0], 0.5);
  EXPECT_NEAR(grpo_advantages(r, g, true, true, valid)[0], 0.5 / (0.5 + 1e-6), 1e-12);
  // Counted as scored zeros (the old behaviour) they would shift the baselines.
  EXPECT_NE(grpo_advantages(r, g, true, true)[0], grpo_advantages(r, g, true, true, valid)[0]);
}

// grpo.adv_estimator reinforce_plus_plus (NeMo RL's ReinforcePlusPlusAdvantageEstimator).
TEST(GrpoAdvantages, reinforce_plus_plus_minus_baseline_then_global_token_normalisation) {
  // One group, rewards 1, 0: minus_baseline (the group mean 0.5, self included) -> 0.5, -0.5.
  const std::vector<double> row = grpo_advantages({1, 0}, {0, 0}, false, false);
  EXPECT_EQ(row, (std::vector<double>{0.5, -0.5}));
  // Two micro-batches: row 0 (one token) in the first, row 1 (three tokens) in the second; one
  // more token in each is masked (prompt or sample mask 0) and must not count.
  std::vector<double> a0{0.5, 9.0}, a1{-0.5, -0.5, -0.5, 9.0};
  std::vector<TokenAdvantages> parts{{&a0, {1, 0}, nullptr, nullptr}, {&a1, {1, 1, 1, 0}, nullptr, nullptr}};
  reinforce_plus_plus_token_advantages(parts, 0.0, "k3", nullptr);
  // Tokens 0.5, -0.5, -0.5, -0.5: mean -0.25, population variance (0.75^2 + 3 * 0.25^2) / 4 = 0.1875;
  // (a - mean) / sqrt(0.1875): 0.75 / 0.4330 = sqrt(3), -0.25 / 0.4330 = -1/sqrt(3).
  EXPECT_NEAR(a0[0], std::sqrt(3.0), 1e-14);
  EXPECT_NEAR(a1[0], -1 / std::sqrt(3.0), 1e-14);
  EXPECT_NEAR(a1[2], -1 / std::sqrt(3.0), 1e-14);
  EXPECT_EQ(a0[1], 9.0);  // masked: left as it was (the loss never reads it)
}

TEST(GrpoAdvantages, reinforce_plus_plus_kl_in_reward) {
  // Two tokens of one row with value 1 each; token 0's KL(prev || ref) is k3 with logr = ref - prev =
  // ln 2: 2 - 1 - ln 2 ~ 0.30685; token 1's is 0 (ref = prev). With coefficient 0.5: a = 1 - 0.15343,
  // 1; mean 1 - 0.076713, variance 0.076713^2, so (a - mean) / |0.076713| = -1, +1.
  std::vector<double> a{1.0, 1.0};
  const std::vector<double> prev{-2.0, -1.0}, ref{-2.0 + std::log(2.0), -1.0};
  std::vector<TokenAdvantages> parts{{&a, {1, 1}, &prev, &ref}};
  reinforce_plus_plus_token_advantages(parts, 0.5, "k3", nullptr);
  const double k = 0.5 * (1 - std::log(2.0)) / 2;  // half the gap between the two tokens
  EXPECT_NEAR(k, 0.076713, 1e-6);
  EXPECT_NEAR(a[0], -1.0, 1e-12);
  EXPECT_NEAR(a[1], 1.0, 1e-12);
  // Equal values: variance 0 -> divided by sqrt(1e-8) after subtracting the mean: all 0.
  std::vector<double> same{2.0, 2.0};
  std::vector<TokenAdvantages> flat{{&same, {1, 1}, nullptr, nullptr}};
  reinforce_plus_plus_token_advantages(flat, 0.0, "k3", nullptr);
  EXPECT_EQ(same, (std::vector<double>{0.0, 0.0}));
}

}  // namespace
}  // namespace nemotron::rl
