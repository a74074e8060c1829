#include "rl/grpo_config.h"

#include <fmt/format.h>

#include <cmath>

#include "core/config_tree.h"
#include "core/error.h"

namespace nemotron::rl {

namespace {

// True when `key` is written as null in `node` (NeMo RL's None: "off"), as opposed to absent
// (the default applies); the reader treats both as absent.
bool explicit_null(const nlohmann::json& node, const std::string& key) {
  return node.is_object() && node.contains(key) && node.at(key).is_null();
}

// An optional number: absent or null = none.
std::optional<double> optional_number(ConfigReader& r, const std::string& key) {
  r.ignore(key);  // registered even when absent
  if (!r.has(key)) return std::nullopt;
  return r.get_number(key, 0.0);
}

void read_adv_estimator(ConfigReader& grpo, GrpoSection& g) {
  ConfigReader& r = grpo.section("adv_estimator");
  AdvEstimator& a = g.adv_estimator;
  a.name = r.get_string("name", a.name);
  if (a.name == "gdpo" || a.name == "opd")
    r.fail("name", fmt::format("\"{}\" is not supported: it needs {} that our environments do not produce (use grpo "
                               "or reinforce_plus_plus)",
                               a.name, a.name == "gdpo" ? "several named reward components" : "a teacher's log-probs"));
  if (a.name != "grpo" && a.name != "reinforce_plus_plus")
    r.fail("name", fmt::format("expected grpo or reinforce_plus_plus, got \"{}\"", a.name));
  // NeMo RL's recipe writes these as ${grpo.normalize_rewards} / ${grpo.use_leave_one_out_baseline}.
  a.normalize_rewards = r.get_bool("normalize_rewards", g.normalize_rewards);
  a.use_leave_one_out_baseline = r.get_bool("use_leave_one_out_baseline", g.use_leave_one_out_baseline);
  a.minus_baseline = r.get_bool("minus_baseline", a.minus_baseline);
}

void read_grpo(ConfigReader& root, GrpoSection& g) {
  ConfigReader& r = root.section("grpo");
  g.num_prompts_per_step = r.get_positive_int("num_prompts_per_step", g.num_prompts_per_step);
  g.num_generations_per_prompt = r.get_positive_int("num_generations_per_prompt", g.num_generations_per_prompt);
  g.max_num_steps = r.get_positive_int("max_num_steps", g.max_num_steps);
  g.max_num_epochs = r.get_positive_int("max_num_epochs", g.max_num_epochs);
  g.normalize_rewards = r.get_bool("normalize_rewards", g.normalize_rewards);
  g.use_leave_one_out_baseline = r.get_bool("use_leave_one_out_baseline", g.use_leave_one_out_baseline);
  g.overlong_filtering = r.get_bool("overlong_filtering", g.overlong_filtering);
  g.use_dynamic_sampling = r.get_bool("use_dynamic_sampling", g.use_dynamic_sampling);
  g.batch_multiplier = r.get_number("batch_multiplier", g.batch_multiplier);
  if (!(g.batch_multiplier >= 1.0) || !std::isfinite(g.batch_multiplier))
    r.fail("batch_multiplier", fmt::format("{} must be a number >= 1 (prompts drawn per generation round: "
                                           "num_prompts_per_step times it)", g.batch_multiplier));
  if (g.batch_multiplier != 1.0 && !g.use_dynamic_sampling)
    r.fail("batch_multiplier", fmt::format("{} needs use_dynamic_sampling: true (NeMo RL refuses it too: without "
                                           "the filter every drawn prompt is trained)", g.batch_multiplier));
  g.dynamic_sampling_max_gen_batches = r.get_positive_int("dynamic_sampling_max_gen_batches",
                                                          g.dynamic_sampling_max_gen_batches);
  g.val_period = r.get_nonnegative_int("val_period", g.val_period);
  g.val_at_start = r.get_bool("val_at_start", g.val_at_start);
  g.max_val_samples = r.get_nonnegative_int("max_val_samples", g.max_val_samples);
  g.val_batch_size = r.get_positive_int("val_batch_size", g.val_batch_size);
  g.seed = static_cast<uint64_t>(r.get_nonnegative_int("seed", static_cast<int64_t>(g.seed)));
  r.get_positive_int("max_rollout_turns", 1);  // turns are the environment's business; checked here
  g.advantage_clip_low = optional_number(r, "advantage_clip_low");
  g.advantage_clip_high = optional_number(r, "advantage_clip_high");
  if (g.advantage_clip_low && g.advantage_clip_high && !(*g.advantage_clip_low <= *g.advantage_clip_high))
    r.fail("advantage_clip_low", fmt::format("{} exceeds advantage_clip_high {}", *g.advantage_clip_low,
                                             *g.advantage_clip_high));
  read_adv_estimator(r, g);

  ConfigReader& s = r.section("reward_scaling");
  RewardScaling& sc = g.reward_scaling;
  sc.enabled = s.get_bool("enabled", sc.enabled);
  sc.source_min = s.get_number("source_min", sc.source_min);
  sc.source_max = s.get_number("source_max", sc.source_max);
  sc.target_min = s.get_number("target_min", sc.target_min);
  sc.target_max = s.get_number("target_max", sc.target_max);
  if (sc.enabled && !(sc.source_max > sc.source_min))
    s.fail("source_max", fmt::format("{} must exceed source_min {}", sc.source_max, sc.source_min));

  ConfigReader& h = r.section("reward_shaping");
  RewardShaping& sh = g.reward_shaping;
  sh.enabled = h.get_bool("enabled", sh.enabled);
  sh.overlong_buffer_length = h.get_nonnegative_int("overlong_buffer_length", sh.overlong_buffer_length);
  sh.overlong_buffer_penalty = h.get_number("overlong_buffer_penalty", sh.overlong_buffer_penalty);
  sh.max_response_length = h.get_nonnegative_int("max_response_length", sh.max_response_length);
  h.ignore("stop_properly_penalty_coef");
  if (h.has("stop_properly_penalty_coef")) {
    const double c = h.get_number("stop_properly_penalty_coef", 1.0);
    if (!(c >= 0.0 && c <= 1.0)) h.fail("stop_properly_penalty_coef", fmt::format("expected a number in [0, 1], got {}", c));
    sh.stop_properly_penalty_coef = c;
  }
  if (sh.overlong_buffer_penalty < 0) h.fail("overlong_buffer_penalty", "must be >= 0");
  if (sh.enabled && sh.overlong_buffer_length > 0 && sh.max_response_length <= sh.overlong_buffer_length)
    h.fail("max_response_length", fmt::format("{} must exceed overlong_buffer_length {}", sh.max_response_length,
                                              sh.overlong_buffer_length));
}

// The keys past clipping and KL, with the combinations NeMo RL's ClippedPGLossFn asserts against
// refused here (loss_functions.py, __init__).
void read_loss_options(ConfigReader& r, LossFnSection& l) {
  l.disable_ppo_ratio = r.get_bool("disable_ppo_ratio", l.disable_ppo_ratio);
  l.sequence_level_importance_ratios = r.get_bool("sequence_level_importance_ratios", l.sequence_level_importance_ratios);
  l.use_kl_in_reward = r.get_bool("use_kl_in_reward", l.use_kl_in_reward);
  l.force_on_policy_ratio = r.get_bool("force_on_policy_ratio", l.force_on_policy_ratio);
  l.use_cispo = r.get_bool("use_cispo", l.use_cispo);
  l.positive_example_nll_weight = r.get_number("positive_example_nll_weight", l.positive_example_nll_weight);
  if (!(l.positive_example_nll_weight >= 0))
    r.fail("positive_example_nll_weight",
           fmt::format("expected a number >= 0 (0 = off), got {}", l.positive_example_nll_weight));
  r.ignore("truncated_importance_sampling_type");
  if (r.has("truncated_importance_sampling_type"))
    l.truncated_importance_sampling_type = r.get_string("truncated_importance_sampling_type", "");
  l.truncated_importance_sampling_ratio = optional_number(r, "truncated_importance_sampling_ratio");
  l.truncated_importance_sampling_ratio_min = optional_number(r, "truncated_importance_sampling_ratio_min");

  if (l.sequence_level_importance_ratios && l.token_level_loss)
    r.fail("sequence_level_importance_ratios",
           "true (GSPO) needs loss_fn.token_level_loss: false (sequence-level importance ratios are mutually "
           "exclusive with a token-level loss)");
  if (l.use_cispo) {
    const char* conflict = l.disable_ppo_ratio                  ? "disable_ppo_ratio is true (CISPO needs the ratio)"
                           : l.force_on_policy_ratio            ? "force_on_policy_ratio is true (CISPO needs the ratio)"
                           : l.sequence_level_importance_ratios ? "sequence_level_importance_ratios is true (CISPO "
                                                                  "weighs tokens)"
                           : l.ratio_clip_c                     ? "ratio_clip_c is set (dual clipping would overwrite "
                                                                  "the CISPO loss; set it to null)"
                           : !l.token_level_loss                ? "token_level_loss is false (CISPO needs a "
                                                                  "token-level loss)"
                                                                : nullptr;
    if (conflict) r.fail("use_cispo", fmt::format("true but {}", conflict));
  }
  const std::string& type = l.truncated_importance_sampling_type;
  if (type.empty()) {
    if (l.truncated_importance_sampling_ratio)
      r.fail("truncated_importance_sampling_ratio",
             "set but truncated_importance_sampling_type is null (set it to tis, icepop or seq-mask-tis)");
    return;
  }
  if (type != "tis" && type != "icepop" && type != "seq-mask-tis")
    r.fail("truncated_importance_sampling_type",
           fmt::format("expected tis, icepop, seq-mask-tis or null, got \"{}\"", type));
  if (!l.use_importance_sampling_correction)
    r.fail("truncated_importance_sampling_type",
           fmt::format("\"{}\" needs loss_fn.use_importance_sampling_correction: true (it truncates those weights)",
                       type));
  if (!l.truncated_importance_sampling_ratio || !(*l.truncated_importance_sampling_ratio > 0))
    r.fail("truncated_importance_sampling_ratio",
           fmt::format("expected a number > 0 with truncated_importance_sampling_type \"{}\", got {}", type,
                       l.truncated_importance_sampling_ratio ? fmt::format("{}", *l.truncated_importance_sampling_ratio)
                                                             : std::string("null")));
  const std::optional<double>& lo = l.truncated_importance_sampling_ratio_min;
  if (lo && !(*lo <= *l.truncated_importance_sampling_ratio))
    r.fail("truncated_importance_sampling_ratio_min",
           fmt::format("{} exceeds truncated_importance_sampling_ratio {}", *lo, *l.truncated_importance_sampling_ratio));
  if (!lo && type != "tis")
    r.fail("truncated_importance_sampling_ratio_min",
           fmt::format("must be set with truncated_importance_sampling_type \"{}\" (the lower bound)", type));
  if (type == "seq-mask-tis" && l.sequence_level_importance_ratios)
    r.fail("truncated_importance_sampling_type",
           "\"seq-mask-tis\" (token-level weights, sequence-level masking) is incompatible with "
           "sequence_level_importance_ratios: true");
}

void read_loss_fn(ConfigReader& root, const nlohmann::json& node, LossFnSection& l) {
  ConfigReader& r = root.section("loss_fn");
  l.reference_policy_kl_penalty = r.get_number("reference_policy_kl_penalty", l.reference_policy_kl_penalty);
  if (!(l.reference_policy_kl_penalty >= 0))
    r.fail("reference_policy_kl_penalty", fmt::format("expected a number >= 0, got {}", l.reference_policy_kl_penalty));
  l.reference_policy_kl_type = r.get_string("reference_policy_kl_type", l.reference_policy_kl_type);
  if (l.reference_policy_kl_type != "k1" && l.reference_policy_kl_type != "k2" && l.reference_policy_kl_type != "k3")
    r.fail("reference_policy_kl_type", fmt::format("expected k1, k2 or k3, got \"{}\"", l.reference_policy_kl_type));
  for (auto [key, slot] : {std::pair{"kl_input_clamp_value", &l.kl_input_clamp_value},
                           std::pair{"kl_output_clamp_value", &l.kl_output_clamp_value}}) {
    r.ignore(key);
    if (explicit_null(node, key)) {
      *slot = std::nullopt;
    } else if (r.has(key)) {
      *slot = r.get_number(key, 0.0);
      if (!(**slot > 0)) r.fail(key, fmt::format("expected a number > 0 or null (no clamp), got {}", **slot));
    }
  }
  l.ratio_clip_min = r.get_number("ratio_clip_min", l.ratio_clip_min);
  if (!(l.ratio_clip_min >= 0 && l.ratio_clip_min < 1))
    r.fail("ratio_clip_min", fmt::format("expected an epsilon in [0, 1) (the ratio is clipped below at 1 - "
                                         "ratio_clip_min), got {}",
                                         l.ratio_clip_min));
  l.ratio_clip_max = r.get_number("ratio_clip_max", l.ratio_clip_max);
  if (!(l.ratio_clip_max >= 0))
    r.fail("ratio_clip_max", fmt::format("expected an epsilon >= 0 (the ratio is clipped above at 1 + "
                                         "ratio_clip_max), got {}",
                                         l.ratio_clip_max));
  r.ignore("ratio_clip_c");  // registered even when absent
  if (r.has("ratio_clip_c")) {
    const double c = r.get_number("ratio_clip_c", 0.0);
    if (!(c > 1)) r.fail("ratio_clip_c", fmt::format("the dual-clip bound must exceed 1 (or be null), got {}", c));
    l.ratio_clip_c = c;
  }
  l.use_on_policy_kl_approximation = r.get_bool("use_on_policy_kl_approximation", l.use_on_policy_kl_approximation);
  l.use_importance_sampling_correction =
      r.get_bool("use_importance_sampling_correction", l.use_importance_sampling_correction);
  l.token_level_loss = r.get_bool("token_level_loss", l.token_level_loss);
  read_loss_options(r, l);
}

void read_policy(ConfigReader& root, PolicySection& p) {
  ConfigReader& r = root.section("policy");
  p.max_total_sequence_length = r.get_positive_int("max_total_sequence_length", p.max_total_sequence_length);
  if (p.max_total_sequence_length < 2)
    r.fail("max_total_sequence_length", "must be >= 2 (a prompt token and a response token)");
  p.train_global_batch_size = r.get_positive_int("train_global_batch_size", p.train_global_batch_size);
  p.train_micro_batch_size = r.get_positive_int("train_micro_batch_size", p.train_micro_batch_size);
  if (p.train_global_batch_size % p.train_micro_batch_size != 0)
    r.fail("train_global_batch_size", fmt::format("{} is not a multiple of train_micro_batch_size {}",
                                                  p.train_global_batch_size, p.train_micro_batch_size));
  p.max_grad_norm = r.get_number("max_grad_norm", p.max_grad_norm);
  if (!(p.max_grad_norm >= 0)) r.fail("max_grad_norm", fmt::format("expected a number >= 0, got {}", p.max_grad_norm));

  ConfigReader& g = r.section("generation");
  GenerationSection& gen = p.generation;
  gen.temperature = g.get_number("temperature", gen.temperature);
  if (!(gen.temperature > 0)) g.fail("temperature", fmt::format("expected a number > 0, got {}", gen.temperature));
  gen.top_p = g.get_number("top_p", gen.top_p);
  if (!(gen.top_p > 0 && gen.top_p <= 1)) g.fail("top_p", fmt::format("expected a number in (0, 1], got {}", gen.top_p));
  g.ignore("top_k");
  if (g.has("top_k")) {
    const int64_t k = g.get_int("top_k", -1);
    if (k == 0 || k < -1) g.fail("top_k", fmt::format("expected a positive integer, -1 or null (off), got {}", k));
    if (k > 0) gen.top_k = k;
  }
  g.ignore("max_new_tokens");
  gen.max_new_tokens = g.has("max_new_tokens") ? g.get_positive_int("max_new_tokens", 1) : p.max_total_sequence_length;
  gen.prefix_sharing = g.get_bool("prefix_sharing", gen.prefix_sharing);
  g.ignore("stop_strings");
  if (g.has("stop_strings")) {
    const nlohmann::json& v = g.get_raw("stop_strings");
    if (!v.is_array()) g.fail("stop_strings", fmt::format("expected a list of strings or null, got {}", describe_value(v)));
    for (const nlohmann::json& s : v) {
      if (!s.is_string() || s.get<std::string>().empty())
        g.fail("stop_strings", fmt::format("expected non-empty strings, got {}", describe_value(s)));
      gen.stop_strings.push_back(s.get<std::string>());
    }
  }
}

void read_checkpointing(ConfigReader& root, CheckpointingSection& c) {
  ConfigReader& r = root.section("checkpointing");
  c.enabled = r.get_bool("enabled", c.enabled);
  c.checkpoint_dir = r.get_string("checkpoint_dir", c.checkpoint_dir);
  if (c.enabled && c.checkpoint_dir.empty()) r.fail("checkpoint_dir", "empty (where step_<N>/ directories go)");
  c.metric_name = r.get_string("metric_name", c.metric_name);
  c.higher_is_better = r.get_bool("higher_is_better", c.higher_is_better);
  c.keep_top_k = r.get_positive_int("keep_top_k", c.keep_top_k);
  c.save_period = r.get_positive_int("save_period", c.save_period);
}

}  // namespace

GrpoConfig read_grpo_sections(ConfigReader& root, const nlohmann::json& tree) {
  GrpoConfig c;
  read_grpo(root, c.grpo);
  const nlohmann::json none;
  read_loss_fn(root, tree.is_object() && tree.contains("loss_fn") ? tree.at("loss_fn") : none, c.loss_fn);
  read_policy(root, c.policy);
  read_checkpointing(root, c.checkpointing);
  // Each of the batch's rows is a sequence held in memory at once: past 2^31 the product is no
  // plan (and past 2^63 it wraps around to nonsense such as 0 rollouts).
  constexpr int64_t kMaxRolloutRows = int64_t{1} << 31;
  if (c.grpo.num_generations_per_prompt > kMaxRolloutRows / c.grpo.num_prompts_per_step)
    root.section("grpo").fail("num_generations_per_prompt",
                              fmt::format("{} x grpo.num_prompts_per_step {} rollouts per step is more than {} "
                                          "(every rollout of a step is held in memory at once)",
                                          c.grpo.num_generations_per_prompt, c.grpo.num_prompts_per_step, kMaxRolloutRows));
  if (c.grpo.use_dynamic_sampling &&
      c.grpo.batch_multiplier * static_cast<double>(c.rollout_rows()) > static_cast<double>(kMaxRolloutRows))
    root.section("grpo").fail("batch_multiplier",
                              fmt::format("{} x {} rollouts per generation round is more than {} (every rollout of a "
                                          "round is held in memory at once)",
                                          c.grpo.batch_multiplier, c.rollout_rows(), kMaxRolloutRows));
  const int64_t rows = c.rollout_rows();
  if (c.loss_fn.force_on_policy_ratio && c.policy.train_global_batch_size != rows)
    root.section("loss_fn").fail(
        "force_on_policy_ratio",
        fmt::format("true needs one optimizer step per rollout batch: policy.train_global_batch_size {} must equal "
                    "grpo.num_prompts_per_step * grpo.num_generations_per_prompt = {}",
                    c.policy.train_global_batch_size, rows));
  if (c.loss_fn.use_kl_in_reward && c.loss_fn.reference_policy_kl_penalty != 0 && c.loss_fn.force_on_policy_ratio)
    root.section("loss_fn").fail("use_kl_in_reward",
                                 "true with a non-zero reference_policy_kl_penalty needs the policy's log-probs before "
                                 "the update, which force_on_policy_ratio: true skips (NeMo RL refuses it too)");
  if (rows % c.policy.train_global_batch_size != 0)
    root.section("policy").fail("train_global_batch_size",
                                fmt::format("{} does not divide the rollout batch grpo.num_prompts_per_step * "
                                            "grpo.num_generations_per_prompt = {} (each optimizer step takes a "
                                            "whole global batch)",
                                            c.policy.train_global_batch_size, rows));
  return c;
}

GrpoConfig read_grpo_config(const nlohmann::json& tree, const std::string& source) {
  ConfigReader root(tree, source);
  GrpoConfig c = read_grpo_sections(root, tree);
  root.check_unknown_keys();
  return c;
}

}  // namespace nemotron::rl
