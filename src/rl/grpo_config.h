// GRPO's configuration, with NeMo RL's key names and the defaults of
// examples/configs/grpo_math_1B.yaml (reference/pipeline-and-rl.md §2.9), read from our config tree
// (core/config_tree.h) so a bad value is an InputError "<file>: <dotted.key>: <problem>".
// Sections: grpo:, loss_fn:, policy: (the keys GRPO needs; the model's shape stays in model:) and
// checkpointing:. Nemotron's RL recipes (nano3/super3 stage2_rl) differ: ratio clips 0.2 / 0.28
// (DAPO "clip-higher"), KL beta 0, importance-sampling correction and on-policy KL approximation
// on, micro-batch 1; a recipe sets them explicitly.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nemotron {
class ConfigReader;
}

namespace nemotron::rl {

// grpo.reward_scaling: clamp to [source_min, source_max], map linearly onto [target_min, target_max].
struct RewardScaling {
  bool enabled = false;
  double source_min = 0.0, source_max = 1.0, target_min = 0.0, target_max = 1.0;
};

// grpo.reward_shaping: DAPO's overlong penalty or a truncation penalty factor.
struct RewardShaping {
  bool enabled = false;
  int64_t overlong_buffer_length = 0;  // 0 = no overlong penalty
  double overlong_buffer_penalty = 0.0;
  int64_t max_response_length = 0;
  std::optional<double> stop_properly_penalty_coef;  // in [0, 1]; truncated rows get reward * c
};

// grpo.adv_estimator (NeMo RL's AdvEstimatorConfig, nemo_rl/algorithms/advantage_estimator.py):
//  - grpo: per-prompt baseline (leave-one-out by default), optionally divided by the std;
//  - reinforce_plus_plus: r minus the prompt's mean (minus_baseline) or raw r, broadcast over the
//    tokens, minus beta * KL(prev || reference) per token under loss_fn.use_kl_in_reward, then
//    normalised over every trained token of the rollout batch: (a - mean) / sqrt(max(var, 1e-8)).
// NeMo RL's gdpo (several reward components) and opd (a teacher's log-probs) need inputs our
// environments do not produce and are refused.
struct AdvEstimator {
  std::string name = "grpo";
  bool normalize_rewards = true;           // default: grpo.normalize_rewards
  bool use_leave_one_out_baseline = true;  // default: grpo.use_leave_one_out_baseline
  bool minus_baseline = true;              // reinforce_plus_plus only
};

struct GrpoSection {  // grpo:
  int64_t num_prompts_per_step = 32;
  int64_t num_generations_per_prompt = 16;
  int64_t max_num_steps = 1000000;
  int64_t max_num_epochs = 1;
  bool normalize_rewards = true;
  bool use_leave_one_out_baseline = true;
  bool overlong_filtering = false;
  // DAPO's dynamic sampling (NeMo RL's keys and defaults, docs/guides/dapo.md): a step trains only
  // on prompt groups whose rewards differ (a group of equal rewards has zero advantage everywhere:
  // no gradient, it only dilutes the batch). Each generation round draws
  // int(num_prompts_per_step * batch_multiplier) prompts; the groups with a reward spread are kept
  // until num_prompts_per_step of them are gathered (the surplus of the last round is discarded and
  // counted); a step still short after dynamic_sampling_max_gen_batches rounds is an error, as in
  // NeMo RL (rl/grpo_dynamic_sampling.h).
  bool use_dynamic_sampling = false;
  double batch_multiplier = 1.0;                  // >= 1; > 1 only with use_dynamic_sampling
  int64_t dynamic_sampling_max_gen_batches = 10;  // > 0
  int64_t val_period = 10;  // 0 = no validation
  bool val_at_start = false;
  int64_t max_val_samples = 256;
  int64_t val_batch_size = 256;
  uint64_t seed = 42;
  // Clamp bounds on the advantages after the estimator (null = none).
  std::optional<double> advantage_clip_low, advantage_clip_high;
  AdvEstimator adv_estimator;
  RewardScaling reward_scaling;
  RewardShaping reward_shaping;
};

struct LossFnSection {  // loss_fn: (ClippedPGLossFn)
  double reference_policy_kl_penalty = 0.01;
  std::string reference_policy_kl_type = "k3";  // k1 | k2 | k3
  std::optional<double> kl_input_clamp_value = 20.0;   // null = no clamp
  std::optional<double> kl_output_clamp_value = 10.0;  // null = no clamp
  double ratio_clip_min = 0.2;  // epsilon below 1 (Nemotron: 0.2)
  double ratio_clip_max = 0.2;  // epsilon above 1 (Nemotron: 0.28)
  std::optional<double> ratio_clip_c;  // dual clip, > 1; null = off
  bool use_on_policy_kl_approximation = false;
  bool use_importance_sampling_correction = false;
  bool token_level_loss = true;
  // The rest of NeMo RL's ClippedPGLossConfig (grpo_loss.h says what each does).
  bool disable_ppo_ratio = false;                 // REINFORCE/RLOO: the surrogate is A * log p
  bool sequence_level_importance_ratios = false;  // GSPO: one ratio per sequence (needs sequence-level loss)
  bool use_kl_in_reward = false;                  // the KL goes into reinforce++'s advantages, not the loss
  bool force_on_policy_ratio = false;             // ratio = exp(lp - stopgrad(lp)) = 1 (one update per rollout)
  bool use_cispo = false;                         // CISPO: -A * stopgrad(clamp(ratio)) * log p
  double positive_example_nll_weight = 0.0;       // VAPO: + mu * NLL of the rows with reward > 0
  // Truncated importance sampling of the IS-correction weights: "" (null) | tis | icepop | seq-mask-tis.
  std::string truncated_importance_sampling_type;
  std::optional<double> truncated_importance_sampling_ratio;      // the upper bound
  std::optional<double> truncated_importance_sampling_ratio_min;  // the lower bound (tis: 0 when null)
  // The KL weight in the loss: 0 under use_kl_in_reward (NeMo RL zeroes it there).
  double loss_kl_penalty() const { return use_kl_in_reward ? 0.0 : reference_policy_kl_penalty; }
};

struct GenerationSection {  // policy.generation:
  double temperature = 1.0;
  double top_p = 1.0;
  std::optional<int64_t> top_k;  // null = off
  int64_t max_new_tokens = 0;    // null/absent = policy.max_total_sequence_length
  std::vector<std::string> stop_strings;
  // The G generations of a prompt prefill it once (engine::EngineOptions::prefix_sharing): the
  // same rollouts on the CPU, fewer prefill tokens.
  bool prefix_sharing = true;
};

struct PolicySection {  // policy:
  int64_t max_total_sequence_length = 512;
  int64_t train_global_batch_size = 512;
  int64_t train_micro_batch_size = 4;
  double max_grad_norm = 1.0;
  GenerationSection generation;
};

struct CheckpointingSection {  // checkpointing:
  bool enabled = true;
  std::string checkpoint_dir = "results/grpo";
  std::string metric_name = "val:accuracy";
  bool higher_is_better = true;
  int64_t keep_top_k = 3;
  int64_t save_period = 10;
};

struct GrpoConfig {
  GrpoSection grpo;
  LossFnSection loss_fn;
  PolicySection policy;
  CheckpointingSection checkpointing;
  // Rows of one rollout batch: num_prompts_per_step * num_generations_per_prompt.
  int64_t rollout_rows() const { return grpo.num_prompts_per_step * grpo.num_generations_per_prompt; }
  // Prompts one generation round draws: num_prompts_per_step, times batch_multiplier (rounded down,
  // as NeMo RL's int()) under dynamic sampling.
  int64_t round_prompts() const {
    return grpo.use_dynamic_sampling
               ? static_cast<int64_t>(static_cast<double>(grpo.num_prompts_per_step) * grpo.batch_multiplier)
               : grpo.num_prompts_per_step;
  }
  // Whether the reference policy's log-probs are used: the KL in the loss, or in reinforce++'s reward.
  bool needs_reference() const {
    return loss_fn.reference_policy_kl_penalty != 0 &&
           (!loss_fn.use_kl_in_reward || grpo.adv_estimator.name == "reinforce_plus_plus");
  }
};

// Reads grpo:, loss_fn:, policy: and checkpointing: through `root` (the stage's reader: the
// caller reads its other sections and calls root.check_unknown_keys()) and validates them.
// `tree` is the node `root` reads (to tell a key written as null, "off", from an absent one).
GrpoConfig read_grpo_sections(ConfigReader& root, const nlohmann::json& tree);
// A tree holding only those sections (tests, tools): reads, validates, rejects unknown keys.
GrpoConfig read_grpo_config(const nlohmann::json& tree, const std::string& source);

}  // namespace nemotron::rl
