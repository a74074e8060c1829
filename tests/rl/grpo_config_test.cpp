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

// The rest of NeMo RL's ClippedPGLossConfig and grpo.adv_estimator, as grpo_math_1B.yaml writes them
// (every key explicit, with its default), then each set.
TEST(GrpoConfig, nemo_rl_loss_options_are_accepted_with_their_defaults) {
  const GrpoConfig d = read("{}");
  const GrpoConfig c = read(R"(
grpo:
  advantage_clip_low: null
  advantage_clip_high: null
  adv_estimator: {name: grpo, normalize_rewards: true, use_leave_one_out_baseline: true, minus_baseline: true}
loss_fn:
  truncated_importance_sampling_type: null
  truncated_importance_sampling_ratio: null
  truncated_importance_sampling_ratio_min: null
  sequence_level_importance_ratios: false
  force_on_policy_ratio: false
  use_kl_in_reward: false
  use_cispo: false
  disable_ppo_ratio: false
  positive_example_nll_weight: 0.0
)");
  for (const GrpoConfig* x : {&d, &c}) {
    const LossFnSection& l = x->loss_fn;
    EXPECT_TRUE(l.truncated_importance_sampling_type.empty());
    EXPECT_FALSE(l.truncated_importance_sampling_ratio || l.truncated_importance_sampling_ratio_min);
    EXPECT_FALSE(l.sequence_level_importance_ratios || l.force_on_policy_ratio || l.use_kl_in_reward || l.use_cispo ||
                 l.disable_ppo_ratio);
    EXPECT_EQ(l.positive_example_nll_weight, 0.0);
    EXPECT_EQ(l.loss_kl_penalty(), 0.01);
    EXPECT_EQ(x->grpo.adv_estimator.name, "grpo");
    EXPECT_TRUE(x->grpo.adv_estimator.normalize_rewards && x->grpo.adv_estimator.use_leave_one_out_baseline &&
                x->grpo.adv_estimator.minus_baseline);
    EXPECT_FALSE(x->grpo.advantage_clip_low || x->grpo.advantage_clip_high);
    EXPECT_TRUE(x->needs_reference());
  }
  // The estimator's GRPO keys default to grpo.normalize_rewards / use_leave_one_out_baseline.
  EXPECT_FALSE(read("grpo: {normalize_rewards: false}").grpo.adv_estimator.normalize_rewards);
  EXPECT_FALSE(read("grpo: {use_leave_one_out_baseline: false}").grpo.adv_estimator.use_leave_one_out_baseline);

  const GrpoConfig s = read(R"(
grpo: {num_prompts_per_step: 2, num_generations_per_prompt: 4, advantage_clip_low: -2, advantage_clip_high: 3,
       adv_estimator: {name: reinforce_plus_plus, minus_baseline: false}}
policy: {train_global_batch_size: 8, train_micro_batch_size: 2}
loss_fn: {use_importance_sampling_correction: true, truncated_importance_sampling_type: icepop,
          truncated_importance_sampling_ratio: 5, truncated_importance_sampling_ratio_min: 0.5,
          sequence_level_importance_ratios: true, token_level_loss: false, force_on_policy_ratio: true,
          disable_ppo_ratio: true, use_kl_in_reward: true, reference_policy_kl_penalty: 0,
          positive_example_nll_weight: 0.1}
)");
  EXPECT_EQ(s.grpo.adv_estimator.name, "reinforce_plus_plus");
  EXPECT_FALSE(s.grpo.adv_estimator.minus_baseline);
  EXPECT_EQ(s.grpo.advantage_clip_low, -2.0);
  EXPECT_EQ(s.grpo.advantage_clip_high, 3.0);
  EXPECT_EQ(s.loss_fn.truncated_importance_sampling_type, "icepop");
  EXPECT_EQ(s.loss_fn.truncated_importance_sampling_ratio, 5.0);
  EXPECT_EQ(s.loss_fn.truncated_importance_sampling_ratio_min, 0.5);
  EXPECT_TRUE(s.loss_fn.sequence_level_importance_ratios && s.loss_fn.force_on_policy_ratio &&
              s.loss_fn.disable_ppo_ratio && s.loss_fn.use_kl_in_reward);
  EXPECT_EQ(s.loss_fn.positive_example_nll_weight, 0.1);
  EXPECT_FALSE(s.needs_reference());
  // use_kl_in_reward moves the KL out of the loss; the reference is read only by reinforce++.
  EXPECT_EQ(read("loss_fn: {use_kl_in_reward: true}").loss_fn.loss_kl_penalty(), 0.0);
  EXPECT_FALSE(read("loss_fn: {use_kl_in_reward: true}").needs_reference());
  EXPECT_TRUE(read("grpo: {adv_estimator: {name: reinforce_plus_plus}}\nloss_fn: {use_kl_in_reward: true}")
                  .needs_reference());
  const GrpoConfig cispo = read("loss_fn: {use_cispo: true, truncated_importance_sampling_type: tis, "
                                "truncated_importance_sampling_ratio: 2, use_importance_sampling_correction: true}");
  EXPECT_TRUE(cispo.loss_fn.use_cispo);
  EXPECT_FALSE(cispo.loss_fn.truncated_importance_sampling_ratio_min);  // tis: 0 when null
}

// NeMo RL's asserts in ClippedPGLossFn.__init__ and grpo.py's setup, as one-line errors naming the key.
TEST(GrpoConfig, nemo_rl_loss_option_conflicts_name_their_key) {
  const std::string is = "use_importance_sampling_correction: true, ";
  expect_error("loss_fn: {sequence_level_importance_ratios: true}",
               "grpo.yaml: loss_fn.sequence_level_importance_ratios: true (GSPO) needs loss_fn.token_level_loss: false");
  expect_error("loss_fn: {use_cispo: true, disable_ppo_ratio: true}", "loss_fn.use_cispo: true but disable_ppo_ratio");
  expect_error("grpo: {num_prompts_per_step: 2, num_generations_per_prompt: 2}\npolicy: {train_global_batch_size: 4, "
               "train_micro_batch_size: 1}\nloss_fn: {use_cispo: true, force_on_policy_ratio: true}",
               "loss_fn.use_cispo: true but force_on_policy_ratio");
  expect_error("loss_fn: {use_cispo: true, sequence_level_importance_ratios: true, token_level_loss: false}",
               "loss_fn.use_cispo: true but sequence_level_importance_ratios");
  expect_error("loss_fn: {use_cispo: true, ratio_clip_c: 3}", "loss_fn.use_cispo: true but ratio_clip_c is set");
  expect_error("loss_fn: {use_cispo: true, token_level_loss: false}", "loss_fn.use_cispo: true but token_level_loss");
  expect_error("loss_fn: {use_cispo: 1}", "loss_fn.use_cispo");
  expect_error("loss_fn: {truncated_importance_sampling_type: tis, truncated_importance_sampling_ratio: 2}",
               "loss_fn.truncated_importance_sampling_type: \"tis\" needs loss_fn.use_importance_sampling_correction");
  expect_error("loss_fn: {" + is + "truncated_importance_sampling_type: tiss, truncated_importance_sampling_ratio: 2}",
               "loss_fn.truncated_importance_sampling_type: expected tis, icepop, seq-mask-tis or null, got \"tiss\"");
  expect_error("loss_fn: {" + is + "truncated_importance_sampling_type: tis}",
               "loss_fn.truncated_importance_sampling_ratio: expected a number > 0 with truncated_importance_sampling_type "
               "\"tis\", got null");
  expect_error("loss_fn: {" + is + "truncated_importance_sampling_type: tis, truncated_importance_sampling_ratio: 0}",
               "loss_fn.truncated_importance_sampling_ratio: expected a number > 0");
  expect_error("loss_fn: {" + is + "truncated_importance_sampling_type: tis, truncated_importance_sampling_ratio: 2, "
               "truncated_importance_sampling_ratio_min: 3}",
               "loss_fn.truncated_importance_sampling_ratio_min: 3 exceeds truncated_importance_sampling_ratio 2");
  for (const std::string type : {"icepop", "seq-mask-tis"})
    expect_error("loss_fn: {" + is + "truncated_importance_sampling_type: " + type +
                     ", truncated_importance_sampling_ratio: 2}",
                 "loss_fn.truncated_importance_sampling_ratio_min: must be set with truncated_importance_sampling_type");
  expect_error("loss_fn: {" + is + "truncated_importance_sampling_type: seq-mask-tis, truncated_importance_sampling_ratio: "
               "2, truncated_importance_sampling_ratio_min: 0.5, sequence_level_importance_ratios: true, "
               "token_level_loss: false}",
               "loss_fn.truncated_importance_sampling_type: \"seq-mask-tis\" (token-level weights, sequence-level "
               "masking) is incompatible with sequence_level_importance_ratios: true");
  expect_error("loss_fn: {truncated_importance_sampling_ratio: 2}",
               "loss_fn.truncated_importance_sampling_ratio: set but truncated_importance_sampling_type is null");
  expect_error("loss_fn: {positive_example_nll_weight: -0.1}", "loss_fn.positive_example_nll_weight: expected a number >= 0");
  expect_error("loss_fn: {disable_ppo_ratio: yes please}", "loss_fn.disable_ppo_ratio");
  EXPECT_TRUE(read("loss_fn: {force_on_policy_ratio: true}").loss_fn.force_on_policy_ratio);  // 512 = 32 x 16
  expect_error("policy: {train_global_batch_size: 256}\nloss_fn: {force_on_policy_ratio: true}",
               "loss_fn.force_on_policy_ratio: true needs one optimizer step per rollout batch: "
               "policy.train_global_batch_size 256 must equal grpo.num_prompts_per_step * "
               "grpo.num_generations_per_prompt = 512");
  expect_error("grpo: {num_prompts_per_step: 2, num_generations_per_prompt: 2}\npolicy: {train_global_batch_size: 4, "
               "train_micro_batch_size: 1}\nloss_fn: {force_on_policy_ratio: true, use_kl_in_reward: true}",
               "loss_fn.use_kl_in_reward: true with a non-zero reference_policy_kl_penalty needs the policy's log-probs");
  expect_error("grpo: {adv_estimator: {name: gdpo}}", "grpo.adv_estimator.name: \"gdpo\" is not supported");
  expect_error("grpo: {adv_estimator: {name: opd}}", "grpo.adv_estimator.name: \"opd\" is not supported");
  expect_error("grpo: {adv_estimator: {name: ppo}}", "grpo.adv_estimator.name: expected grpo or reinforce_plus_plus");
  expect_error("grpo: {adv_estimator: {minus_baselin: true}}", "grpo.adv_estimator.minus_baselin: unknown key");
  expect_error("grpo: {advantage_clip_low: 1, advantage_clip_high: -1}",
               "grpo.advantage_clip_low: 1 exceeds advantage_clip_high -1");
  expect_error("grpo: {advantage_clip_high: high}", "grpo.advantage_clip_high");
}

}  // namespace
}  // namespace nemotron::rl

namespace nemotron::rl {
namespace {

TEST(GrpoConfig, dynamic_sampling_keys_are_nemo_rls_with_its_defaults_and_checks) {
  const GrpoConfig off = read("{}");
  EXPECT_FALSE(off.grpo.use_dynamic_sampling);
  EXPECT_EQ(off.grpo.batch_multiplier, 1.0);
  EXPECT_EQ(off.grpo.dynamic_sampling_max_gen_batches, 10);
  EXPECT_EQ(off.round_prompts(), 32);
  const GrpoConfig on = read("grpo: {num_prompts_per_step: 5, use_dynamic_sampling: true, batch_multiplier: 1.5, "
                             "dynamic_sampling_max_gen_batches: 3}\npolicy: {train_global_batch_size: 80}");
  EXPECT_TRUE(on.grpo.use_dynamic_sampling);
  EXPECT_EQ(on.round_prompts(), 7);  // int(5 * 1.5), as NeMo RL's int()
  EXPECT_EQ(on.grpo.dynamic_sampling_max_gen_batches, 3);
  EXPECT_EQ(on.rollout_rows(), 5 * 16);  // the trained batch stays num_prompts_per_step groups
  expect_error("grpo: {use_dynamic_sampling: true, batch_multiplier: 0.5}", "grpo.yaml: grpo.batch_multiplier: 0.5 must be");
  expect_error("grpo: {batch_multiplier: 2}", "grpo.batch_multiplier: 2 needs use_dynamic_sampling: true");
  expect_error("grpo: {use_dynamic_sampling: true, dynamic_sampling_max_gen_batches: 0}",
               "grpo.dynamic_sampling_max_gen_batches");
  expect_error("grpo: {use_dynamic_sampling: yes please}", "grpo.use_dynamic_sampling");
  expect_error("grpo: {use_dynamic_sampling: true, batch_multiplier: 1.0e+12}", "grpo.batch_multiplier");
}

}  // namespace
}  // namespace nemotron::rl
