// GRPO's config: NeMo RL's keys with grpo_math_1B.yaml's defaults, Nemotron's clip-higher values,
// explicit nulls, and bad values rejected with the dotted key named.
#include <gtest/gtest.h>

#include "core/config_tree.h"
#include "core/error.h"
#include "rl/grpo_config.h"

namespace nemotron::rl {
namespace {

GrpoConfig read(const std::string& yaml) { return read_grpo_config(parse_yaml_text(yaml, "grpo.yaml"), "grpo.yaml"); }

void expect_error(const std::string& yaml, const std::string& needle) {
  try {
    read(yaml);
    ADD_FAILURE() << "accepted:\n" << yaml;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(GrpoConfig, defaults_are_grpo_math_1b) {
  const GrpoConfig c = read("{}");
  EXPECT_EQ(c.grpo.num_prompts_per_step, 32);
  EXPECT_EQ(c.grpo.num_generations_per_prompt, 16);
  EXPECT_EQ(c.grpo.max_num_steps, 1000000);
  EXPECT_TRUE(c.grpo.normalize_rewards);
  EXPECT_TRUE(c.grpo.use_leave_one_out_baseline);
  EXPECT_EQ(c.grpo.val_period, 10);
  EXPECT_FALSE(c.grpo.val_at_start);
  EXPECT_EQ(c.grpo.max_val_samples, 256);
  EXPECT_EQ(c.grpo.seed, 42u);
  EXPECT_EQ(c.loss_fn.reference_policy_kl_penalty, 0.01);
  EXPECT_EQ(c.loss_fn.reference_policy_kl_type, "k3");
  EXPECT_EQ(c.loss_fn.kl_input_clamp_value, 20.0);
  EXPECT_EQ(c.loss_fn.kl_output_clamp_value, 10.0);
  EXPECT_EQ(c.loss_fn.ratio_clip_min, 0.2);
  EXPECT_EQ(c.loss_fn.ratio_clip_max, 0.2);
  EXPECT_FALSE(c.loss_fn.ratio_clip_c.has_value());
  EXPECT_FALSE(c.loss_fn.use_on_policy_kl_approximation);
  EXPECT_FALSE(c.loss_fn.use_importance_sampling_correction);
  EXPECT_TRUE(c.loss_fn.token_level_loss);
  EXPECT_EQ(c.policy.max_total_sequence_length, 512);
  EXPECT_EQ(c.policy.train_global_batch_size, 512);
  EXPECT_EQ(c.policy.train_micro_batch_size, 4);
  EXPECT_EQ(c.policy.generation.temperature, 1.0);
  EXPECT_EQ(c.policy.generation.top_p, 1.0);
  EXPECT_FALSE(c.policy.generation.top_k.has_value());
  EXPECT_EQ(c.policy.generation.max_new_tokens, 512);  // = max_total_sequence_length
  EXPECT_EQ(c.checkpointing.checkpoint_dir, "results/grpo");
  EXPECT_EQ(c.checkpointing.metric_name, "val:accuracy");
  EXPECT_TRUE(c.checkpointing.higher_is_better);
  EXPECT_EQ(c.checkpointing.keep_top_k, 3);
  EXPECT_EQ(c.checkpointing.save_period, 10);
  EXPECT_EQ(c.rollout_rows(), 512);
}

TEST(GrpoConfig, nemotron_rl_values_and_explicit_nulls) {
  const GrpoConfig c = read(R"(
grpo: {num_prompts_per_step: 4, num_generations_per_prompt: 8}
loss_fn: {reference_policy_kl_penalty: 0, ratio_clip_min: 0.2, ratio_clip_max: 0.28, ratio_clip_c: 3,
          use_importance_sampling_correction: true, use_on_policy_kl_approximation: true,
          kl_input_clamp_value: null}
policy:
  max_total_sequence_length: 64
  train_global_batch_size: 16
  train_micro_batch_size: 1
  generation: {temperature: 0.7, top_p: 0.9, top_k: null, max_new_tokens: 32, stop_strings: ["</answer>"]}
)");
  EXPECT_EQ(c.loss_fn.ratio_clip_max, 0.28);
  EXPECT_EQ(c.loss_fn.ratio_clip_c, 3.0);
  EXPECT_FALSE(c.loss_fn.kl_input_clamp_value.has_value());
  EXPECT_EQ(c.loss_fn.kl_output_clamp_value, 10.0);
  EXPECT_TRUE(c.loss_fn.use_importance_sampling_correction);
  EXPECT_EQ(c.policy.generation.max_new_tokens, 32);
  EXPECT_EQ(c.policy.generation.stop_strings, std::vector<std::string>{"</answer>"});
  EXPECT_EQ(c.rollout_rows(), 32);
}

TEST(GrpoConfig, bad_values_name_their_key) {
  expect_error("loss_fn: {ratio_clip_c: 0.5}", "grpo.yaml: loss_fn.ratio_clip_c: the dual-clip bound must exceed 1");
  expect_error("loss_fn: {ratio_clip_min: 1.5}", "loss_fn.ratio_clip_min");
  expect_error("loss_fn: {ratio_clip_max: -0.1}", "loss_fn.ratio_clip_max");
  expect_error("loss_fn: {reference_policy_kl_penalty: -1}", "loss_fn.reference_policy_kl_penalty");
  expect_error("loss_fn: {reference_policy_kl_type: k4}", "loss_fn.reference_policy_kl_type");
  expect_error("loss_fn: {kl_output_clamp_value: 0}", "loss_fn.kl_output_clamp_value");
  expect_error("loss_fn: {ratio_clip_maxx: 0.28}", "loss_fn.ratio_clip_maxx: unknown key");
  expect_error("grpo: {num_generations_per_prompt: 0}", "grpo.num_generations_per_prompt");
  expect_error("grpo: {normalize_rewards: maybe}", "grpo.normalize_rewards");
  expect_error("policy: {train_global_batch_size: 10, train_micro_batch_size: 4}",
               "policy.train_global_batch_size: 10 is not a multiple of train_micro_batch_size 4");
  expect_error("grpo: {num_prompts_per_step: 3, num_generations_per_prompt: 3}\npolicy: {train_global_batch_size: 4, "
               "train_micro_batch_size: 2}",
               "policy.train_global_batch_size: 4 does not divide the rollout batch");
  expect_error("policy: {generation: {temperature: 0}}", "policy.generation.temperature");
  expect_error("policy: {generation: {top_p: 1.5}}", "policy.generation.top_p");
  expect_error("policy: {generation: {top_k: 0}}", "policy.generation.top_k");
  expect_error("policy: {generation: {stop_strings: \"</s>\"}}", "policy.generation.stop_strings");
  expect_error("checkpointing: {keep_top_k: 0}", "checkpointing.keep_top_k");
  expect_error("grpo: {reward_shaping: {enabled: true, stop_properly_penalty_coef: 2}}",
               "grpo.reward_shaping.stop_properly_penalty_coef");
}

// 2^62 generations x 32 prompts wrapped to 0 rollouts (issue 25): the product is bounded first.
TEST(GrpoConfig, a_rollout_batch_past_2_pow_31_is_refused_not_wrapped) {
  expect_error("grpo: {num_generations_per_prompt: 4611686018427387904}",
               "grpo.yaml: grpo.num_generations_per_prompt: 4611686018427387904 x grpo.num_prompts_per_step 32 rollouts per "
               "step is more than 2147483648");
  expect_error("grpo: {num_prompts_per_step: 65536, num_generations_per_prompt: 65536}", "grpo.num_generations_per_prompt: 65536 x");
  EXPECT_EQ(read("grpo: {num_prompts_per_step: 2, num_generations_per_prompt: 4}\npolicy: {train_global_batch_size: 8, "
                 "train_micro_batch_size: 4}")
                .rollout_rows(),
            8);
}

}  // namespace
}  // namespace nemotron::rl
