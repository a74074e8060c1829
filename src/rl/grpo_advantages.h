// GRPO's advantages as NeMo RL computes them (reference/pipeline-and-rl.md §2.3-2.4;
// nemo_rl/algorithms/utils.py calculate_baseline_and_std_per_prompt and grpo.py): rows are grouped
// by identical prompt tokens, each row gets a baseline and a std from its group (leave-one-out by
// default), A = r - baseline, divided by (std + 1e-6) only where std > 0. Optional reward scaling
// and shaping come first.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "parallel/communicator.h"
#include "rl/grpo_config.h"

namespace nemotron::rl {

// Group ids by identical prompt token sequences, numbered in order of first appearance (NeMo RL
// uniques the padded prompt matrix; duplicate prompts in one batch merge into one group).
std::vector<int64_t> group_by_prompt(const std::vector<std::vector<int32_t>>& prompts);

struct BaselineStd {
  std::vector<double> baseline, std;
};

// Per row: with leave_one_out, b_i = mean of the group's other rewards and std_i their unbiased
// std, computed as NeMo RL does, sqrt((E[r^2] - E[r]^2) * m / (m - 1)) over the m = n - 1 others,
// NaN -> 0 (n = 2: 0/0; a negative rounding residue). Without, the group's mean and unbiased std.
// A group with at most one row gets b = r (zero advantage) and std 0. Sample masks do not change
// baselines (NeMo RL's valid mask is all ones there). `valid` (empty: every row) is NeMo RL's
// valid_mask: only valid rows enter a group's baseline and std, a group with at most one valid
// row gets b = r, and an invalid row gets b = r, std 0 (zero advantage). The trainer passes
// false for the rows the environment could not score, whose reward is unknown.
BaselineStd baseline_and_std_per_prompt(const std::vector<double>& rewards, const std::vector<int64_t>& group,
                                        bool leave_one_out, const std::vector<bool>& valid = {});

// A_i = r_i - b_i, then with normalize: A_i / (std_i + 1e-6) where std_i > 0.
std::vector<double> grpo_advantages(const std::vector<double>& rewards, const std::vector<int64_t>& group,
                                    bool leave_one_out, bool normalize, const std::vector<bool>& valid = {});
inline std::vector<double> grpo_advantages(const std::vector<double>& rewards, const std::vector<int64_t>& group,
                                           const GrpoSection& cfg, const std::vector<bool>& valid = {}) {
  return grpo_advantages(rewards, group, cfg.use_leave_one_out_baseline, cfg.normalize_rewards, valid);
}

// grpo.adv_estimator reinforce_plus_plus, its token part over one rollout batch (NeMo RL's
// ReinforcePlusPlusAdvantageEstimator): each part's advantages hold the row's value (r minus the
// group mean under minus_baseline: grpo_advantages without leave-one-out or normalising; else r) on
// its tokens; with kl_coef != 0 (loss_fn.use_kl_in_reward) a_t -= kl_coef * KL(prev_t || ref_t)
// (calculate_kl with its default clamps 20 / 10, not loss_fn's); then a = (a - mean) /
// sqrt(max(var, 1e-8)), mean and population variance over the tokens with mask > 0 of every part
// and, with `group`, of every data-parallel rank. In place; a batch with no such token is left as it is.
struct TokenAdvantages {
  std::vector<double>* advantages;  // [N], in place
  std::vector<double> mask;         // [N]: token mask * sample mask
  const std::vector<double>* prev;  // [N] the policy's log-probs before the update (kl_coef != 0)
  const std::vector<double>* ref;   // [N] the reference policy's (kl_coef != 0)
};
void reinforce_plus_plus_token_advantages(std::vector<TokenAdvantages>& parts, double kl_coef,
                                          const std::string& kl_type, parallel::Communicator* group);

// grpo.reward_scaling (when enabled): clamp to [source_min, source_max], map linearly onto
// [target_min, target_max]. In place.
void scale_rewards(const RewardScaling& cfg, std::vector<double>& rewards);
// grpo.reward_shaping (when enabled), in place: truncated rows get r * stop_properly_penalty_coef
// when that is set; else DAPO's overlong penalty with expected = max_response_length -
// overlong_buffer_length and l = response length: r += min(0, -(l - expected) /
// overlong_buffer_length * overlong_buffer_penalty).
void shape_rewards(const RewardShaping& cfg, std::vector<double>& rewards, const std::vector<int64_t>& response_length,
                   const std::vector<bool>& truncated);

}  // namespace nemotron::rl
