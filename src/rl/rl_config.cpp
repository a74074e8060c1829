#include "rl/rl_config.h"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>

#include "core/config_tree.h"
#include "core/error.h"
#include "data/chat_template.h"
#include "model/decode_state.h"
#include "model/model_info.h"
#include "model/shard_sizes.h"
#include "train/plan.h"
#include "train/train_loop_config.h"

namespace nemotron::rl {

using nlohmann::json;

double RlOptimizerSection::lr_at(int64_t step) const {
  train::LrSchedule s;
  s.max_lr = lr, s.min_lr = min_lr, s.warmup_init = lr_warmup_init;
  s.style = lr_decay_style;
  s.warmup_steps = lr_warmup_iters;
  s.decay_steps = std::max<int64_t>(lr_decay_iters, lr_warmup_iters + 1);
  return s.lr(step);
}

namespace {

void read_policy_extras(ConfigReader& root, RlConfig& c) {
  ConfigReader& p = root.section("policy");
  c.model_name = p.get_string("model_name", "");
  ConfigReader& t = p.section("tokenizer");
  c.tokenizer_path = t.get_string("name", "");
  if (c.tokenizer_path.empty()) t.fail("name", "missing (the tokenizer.json the policy was trained with)");
  c.chat_template = t.get_string("chat_template", c.chat_template);
  // A file is checked now (it exists and parses); auto and checkpoint need the policy checkpoint,
  // which an earlier pipeline stage may not have written yet: resolve_rl_chat_template, at the start.
  if (c.chat_template != "auto" && c.chat_template != "checkpoint") {
    try {
      data::ChatTemplate::load(c.chat_template, c.tokenizer_path);
    } catch (const InputError& e) {
      t.fail("chat_template", e.what());
    } catch (const data::ChatTemplateError& e) {
      t.fail("chat_template", e.what());
    }
  }

  // NeMo RL's policy.generation.vllm_cfg.tensor_parallel_size and expert_parallel_size, the
  // generator's own layout: the trainer's by default (the engine decodes with the trainer's
  // weights in place, no refit); other sizes get a generator copy resharded after every update
  // (model/weight_reshard.h: tensor parts gathered over the trainer's tensor group, routed experts
  // over its expert group). Context ranks hold whole copies of their tensor group's parts, so a
  // trainer with context split is resharded as its tensor layout is.
  ConfigReader& gen = p.section("generation");
  c.generator_tensor_parallel = c.model.parallel.tensor;
  c.generator_expert_parallel = c.model.parallel.expert;
  if (gen.has("vllm_cfg")) {
    ConfigReader& v = gen.section("vllm_cfg");
    const int64_t tp = c.model.parallel.tensor;
    const int64_t want = v.get_positive_int("tensor_parallel_size", tp);
    const parallel::LayoutModelFacts facts = model::layout_facts(c.model);
    if (want != tp)
      for (const auto& [key, size] : facts.tensor_split)
        if (size % want != 0)
          v.fail("tensor_parallel_size", fmt::format("{} does not divide {} ({}): the generator splits it over its "
                                                     "tensor-parallel ranks",
                                                     want, key, size));
    c.generator_tensor_parallel = want;
    const int64_t ep = v.get_positive_int("expert_parallel_size", c.model.parallel.expert);
    if (ep > 1 && facts.routed_experts == 0)
      v.fail("expert_parallel_size",
             fmt::format("{}: the model has no routed experts (no E layer in model.hybrid_override_pattern)", ep));
    if (ep > 1 && facts.routed_experts % ep != 0)
      v.fail("expert_parallel_size",
             fmt::format("{} does not divide model.n_routed_experts ({}): the generator splits the experts over its "
                         "expert-parallel ranks",
                         ep, facts.routed_experts));
    c.generator_expert_parallel = ep;
  }

  ConfigReader& o = p.section("optimizer");
  RlOptimizerSection& opt = c.optimizer;
  opt.lr = o.get_number("lr", opt.lr);
  if (!(opt.lr > 0)) o.fail("lr", fmt::format("expected a number > 0, got {}", opt.lr));
  opt.weight_decay = o.get_number("weight_decay", opt.weight_decay);
  if (!(opt.weight_decay >= 0)) o.fail("weight_decay", fmt::format("expected a number >= 0, got {}", opt.weight_decay));
  const json& betas = o.get_raw("betas");
  if (!betas.is_null()) {
    if (!betas.is_array() || betas.size() != 2 || !betas[0].is_number() || !betas[1].is_number())
      o.fail("betas", fmt::format("expected [beta1, beta2], got {}", describe_value(betas)));
    opt.beta1 = betas[0].get<double>(), opt.beta2 = betas[1].get<double>();
    if (!(opt.beta1 >= 0 && opt.beta1 < 1 && opt.beta2 >= 0 && opt.beta2 < 1))
      o.fail("betas", fmt::format("expected numbers in [0, 1), got {}", describe_value(betas)));
  }
  opt.eps = o.get_number("eps", opt.eps);
  if (!(opt.eps > 0)) o.fail("eps", fmt::format("expected a number > 0, got {}", opt.eps));
  opt.lr_warmup_iters = o.get_nonnegative_int("lr_warmup_iters", opt.lr_warmup_iters);
  opt.lr_warmup_init = o.get_number("lr_warmup_init", opt.lr_warmup_init);
  if (!(opt.lr_warmup_init >= 0)) o.fail("lr_warmup_init", "expected a number >= 0");
  // The styles GRPO's per-step schedule runs (no WSD anneal or inverse-square-root here).
  static constexpr train::LrDecayStyle kGrpoStyles[] = {train::LrDecayStyle::constant, train::LrDecayStyle::linear,
                                                        train::LrDecayStyle::cosine};
  opt.lr_decay_style = train::read_lr_decay_style(o, "lr_decay_style", opt.lr_decay_style, kGrpoStyles);
  opt.lr_decay_iters = o.get_nonnegative_int("lr_decay_iters", c.grpo.grpo.max_num_steps);
  if (opt.lr_decay_iters <= opt.lr_warmup_iters && opt.lr_decay_style != train::LrDecayStyle::constant)
    o.fail("lr_decay_iters", fmt::format("{} must exceed lr_warmup_iters {}", opt.lr_decay_iters, opt.lr_warmup_iters));
  opt.min_lr = o.get_number("min_lr", opt.min_lr);
  if (!(opt.min_lr >= 0 && opt.min_lr <= opt.lr))
    o.fail("min_lr", fmt::format("expected a number in [0, lr = {}], got {}", opt.lr, opt.min_lr));

  // NeMo RL's Megatron backend keys for the data-parallel optimizer. The rest of megatron_cfg
  // (parallel sizes, the optimizer's rates) has its place elsewhere in this schema (model:,
  // policy.optimizer) and is refused as unknown, so one value never has two homes.
  if (p.has("megatron_cfg")) {
    ConfigReader& m = p.section("megatron_cfg");
    opt.distributed = m.section("optimizer").get_bool("use_distributed_optimizer", opt.distributed);
    ConfigReader& ddp = m.section("distributed_data_parallel_config");
    // Megatron reads the sharding strategy only with its FSDP on (NeMo RL's own recipes carry
    // "optim_grads_params" beside use_custom_fsdp: false): validated, inert without FSDP.
    const std::string strategy = ddp.get_string("data_parallel_sharding_strategy", "no_shard");
    if (strategy != "no_shard" && strategy != "optim" && strategy != "optim_grads" && strategy != "optim_grads_params")
      ddp.fail("data_parallel_sharding_strategy",
               fmt::format("expected no_shard, optim, optim_grads or optim_grads_params, got \"{}\"", strategy));
    // Megatron FSDP: NeMo RL's use_custom_fsdp or newer Megatron's use_megatron_fsdp turns it on;
    // the strategy then says what is sharded, as ddp.data_parallel_sharding_strategy does in
    // pretraining (train/train_loop_config.h): no_shard nothing, optim and above the optimizer state.
    bool on = false;
    for (const char* key : {"use_custom_fsdp", "use_megatron_fsdp"})
      if (ddp.get_bool(key, false) && !on) on = true, opt.fsdp_key = key;
    if (on) {
      const std::string path = "policy.megatron_cfg.distributed_data_parallel_config.";
      opt.fsdp_key = path + opt.fsdp_key;
      if (strategy != "no_shard") opt.distributed = true;
      opt.fsdp = strategy == "optim_grads_params" ? train::Fsdp::grads_params
                 : strategy == "optim_grads"      ? train::Fsdp::grads
                                                  : train::Fsdp::off;
      const parallel::ParallelSizes& ps = c.model.parallel;
      if (opt.fsdp != train::Fsdp::off) {
        for (auto [key, n] : {std::pair{"model.tensor_model_parallel_size", ps.tensor},
                              std::pair{"model.expert_model_parallel_size", ps.expert},
                              std::pair{"model.context_parallel_size", ps.context}})
          if (n > 1)
            ddp.fail("data_parallel_sharding_strategy",
                     fmt::format("{} with {} {} is not supported yet in GRPO ({} runs with data parallelism only; use "
                                 "optim, the distributed optimizer)",
                                 strategy, key, n,
                                 opt.fsdp == train::Fsdp::grads_params ? "full parameter sharding"
                                                                       : "gradient sharding"));
        // The engine's copy is gathered whole at the trainer's layout: no generator layout of its own.
        for (auto [key, generator, trainer] :
             {std::tuple{"tensor_parallel_size", c.generator_tensor_parallel, ps.tensor},
              std::tuple{"expert_parallel_size", c.generator_expert_parallel, ps.expert}})
          if (opt.fsdp == train::Fsdp::grads_params && generator != trainer)
            ddp.fail("data_parallel_sharding_strategy",
                     fmt::format("optim_grads_params with policy.generation.vllm_cfg.{} {} is not supported yet (the "
                                 "engine's copy is gathered whole at the trainer's layout; set it to {} or leave it out)",
                                 key, generator, trainer));
      }
    }
  }
}

void read_data(ConfigReader& root, RlConfig& c) {
  ConfigReader& d = root.section("data");
  c.data.train_jsonl_fpath = d.get_string("train_jsonl_fpath", "");
  if (c.data.train_jsonl_fpath.empty())
    d.fail("train_jsonl_fpath", "missing (the train.jsonl of `data prep rl`)");
  c.data.validation_jsonl_fpath = d.get_string("validation_jsonl_fpath", "");
  c.data.shuffle = d.get_bool("shuffle", c.data.shuffle);
}

void check_supported(ConfigReader& root, const RlConfig& c) {
  // The trainer's log-probs are log softmax(logits / temperature), as NeMo RL's policy computes
  // them: the engine's processed log-probs at that temperature, so any temperature is on-policy.
  // Filtering (top-k / top-p) samples from a truncated distribution the trainer does not model:
  // allowed only with loss_fn.use_importance_sampling_correction, whose weight
  // exp(train_lp - gen_lp) corrects for it; the gap shows in token_mult_prob_error.
  const GenerationSection& g = c.grpo.policy.generation;
  ConfigReader& gen = root.section("policy").section("generation");
  const bool filtered = g.top_p != 1.0 || g.top_k.has_value();
  if (filtered && !c.grpo.loss_fn.use_importance_sampling_correction)
    gen.fail(g.top_k ? "top_k" : "top_p",
             "sampling with top-k or top-p needs loss_fn.use_importance_sampling_correction: true (the trainer's "
             "log-probs are those of the unfiltered distribution at the sampling temperature)");
}

}  // namespace

RlConfig read_rl_config(const json& tree, const std::string& source) {
  RlConfig c;
  c.source = source;
  c.tree = tree;
  ConfigReader root(c.tree, source);
  root.ignore("run");
  root.ignore("recipe");
  if (!root.has("model")) root.fail("model", "missing (a recipe holds the policy's shape in its model: section)");
  c.model = model::read_model_config(root.section("model"));
  c.grpo = read_grpo_sections(root, c.tree);
  read_policy_extras(root, c);
  read_data(root, c);
  train::read_device_keys(root, c.device, c.mixed_precision);  // the other stages' keys and checks
  ConfigReader& e = root.section("env");
  c.env_name = e.get_string("name", c.env_name);
  c.max_unscored_fraction = e.get_number("max_unscored_fraction", c.max_unscored_fraction);
  if (!(c.max_unscored_fraction >= 0 && c.max_unscored_fraction <= 1))
    e.fail("max_unscored_fraction",
           fmt::format("expected a fraction in [0, 1] of a step's rows the environment may leave unscored, got {}",
                       c.max_unscored_fraction));
  c.environment = env::make_environment(c.env_name, e);  // checks env's other keys
  check_supported(root, c);
  root.check_unknown_keys();
  model::validate(c.model, source, "model");
  if (c.grpo.policy.max_total_sequence_length > c.model.max_position_embeddings)
    root.section("policy").fail("max_total_sequence_length",
                                fmt::format("{} exceeds model.max_position_embeddings {}",
                                            c.grpo.policy.max_total_sequence_length, c.model.max_position_embeddings));
  return c;
}

data::ChatTemplate resolve_rl_chat_template(const RlConfig& c, const std::string& source) {
  try {
    if (c.chat_template == "auto" || c.chat_template == "checkpoint")
      return data::ChatTemplate::for_model(c.chat_template, c.model_name);
    return data::ChatTemplate::load(c.chat_template, c.tokenizer_path);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: policy.tokenizer.chat_template: {}", source, e.what()));
  } catch (const data::ChatTemplateError& e) {
    throw InputError(fmt::format("{}: policy.tokenizer.chat_template: {}", source, e.what()));
  }
}

RlConfig load_rl_config(const std::string& path, const std::vector<std::string>& overrides, const RlTreeHook& resolve) {
  json tree = load_config_file(path);
  if (!tree.is_object() && !tree.is_null()) throw_config_error(path, "", "expected a mapping of sections");
  apply_overrides(tree, overrides, path);
  if (resolve) resolve(tree, path);
  return read_rl_config(tree, path);
}

std::string rl_dry_run_text(const RlConfig& cfg, const std::string& recipe, size_t overrides) {
  const GrpoConfig& g = cfg.grpo;
  const int64_t L = g.policy.max_total_sequence_length;
  const model::ModelInfo info = model::model_info(cfg.model, L);
  const bool bf16 = cfg.mixed_precision == "bf16_mixed";
  const char* precision = bf16 ? "bf16" : "fp32";
  const int64_t per_seq = model::DecodeState::bytes_per_sequence(cfg.model, L, bf16 ? DType::bf16 : DType::f32);
  const int64_t rows = g.rollout_rows();
  const train::MemoryEstimate mem = train::estimate_memory(cfg.model, g.policy.train_micro_batch_size, L);
  std::string s = fmt::format("# {} ({} override(s)), resolved:\n{}\n", recipe, overrides, train::config_to_yaml(cfg.tree));
  s += fmt::format("model: {} layers \"{}\", hidden {}, vocab {}: {} parameters ({} active per token)\n",
                   cfg.model.num_layers(), cfg.model.hybrid_override_pattern, cfg.model.hidden_size,
                   cfg.model.vocab_size, model::human_count(static_cast<double>(info.total_params)),
                   model::human_count(static_cast<double>(info.active_params)));
  s += fmt::format("start: {}\n", cfg.model_name.empty() ? std::string("randomly initialised weights (policy.model_name unset)")
                                                         : cfg.model_name);
  s += fmt::format("data: {} (validation: {}), environment \"{}\" (stops past {}% unscored rows in a step)\n",
                   cfg.data.train_jsonl_fpath,
                   cfg.data.validation_jsonl_fpath.empty() ? "none" : cfg.data.validation_jsonl_fpath, cfg.env_name,
                   100 * cfg.max_unscored_fraction);
  s += fmt::format(
      "plan: {} steps x ({} prompts x {} generations = {} rollouts), up to {} new tokens each, sequences up to {} "
      "tokens; {} optimizer step(s) per rollout batch (train_global_batch_size {}, micro {})\n",
      g.grpo.max_num_steps, g.grpo.num_prompts_per_step, g.grpo.num_generations_per_prompt, rows,
      g.policy.generation.max_new_tokens, L, rows / g.policy.train_global_batch_size, g.policy.train_global_batch_size,
      g.policy.train_micro_batch_size);
  s += fmt::format("validation: every {} step(s){}, up to {} prompts, greedy\n", g.grpo.val_period,
                   g.grpo.val_at_start ? " and at start" : "", g.grpo.max_val_samples);
  s += fmt::format("checkpoints: {} every {} step(s), keep {}\n",
                   g.checkpointing.enabled ? g.checkpointing.checkpoint_dir : std::string("off"),
                   g.checkpointing.save_period, g.checkpointing.keep_top_k);
  s += fmt::format(
      "engine memory ({}): KV + SSM state {} per sequence at {} tokens; {} for the {} rollouts of a step at once\n",
      precision, train::human_bytes(static_cast<double>(per_seq)), L,
      train::human_bytes(static_cast<double>(per_seq * rows)), rows);
  // With a generator laid out otherwise, its copy (a rank's parts at the generator's layout) exists
  // only while it generates.
  const bool own_copy = cfg.generator_tensor_parallel != cfg.model.parallel.tensor ||
                        cfg.generator_expert_parallel != cfg.model.parallel.expert || cfg.model.parallel.context > 1;
  const model::ShardParams gen_params = model::shard_params(
      cfg.model, model::ModelShard{0, static_cast<int>(cfg.generator_expert_parallel), 0,
                                   static_cast<int>(cfg.generator_tensor_parallel), false});
  const std::string engine_weights =
      own_copy ? fmt::format("the generator (policy.generation.vllm_cfg.tensor_parallel_size {}, expert_parallel_size {}) "
                             "holds its own copy of the weights, {} per rank, only while it generates",
                             cfg.generator_tensor_parallel, cfg.generator_expert_parallel,
                             train::human_bytes(static_cast<double>(gen_params.total * (bf16 ? 2 : 4))))
      : cfg.optimizer.fsdp == train::Fsdp::grads_params
          ? fmt::format("with full parameter sharding over several data ranks ({}), the engine decodes from a whole "
                        "copy ({}) gathered before every step's rollouts and freed after them",
                        cfg.optimizer.fsdp_key, train::human_bytes(bf16 ? mem.param_bytes / 2 : mem.param_bytes))
      : bf16 ? std::string("the engine reads the same bf16 weights: no second copy")
             : std::string("the engine reads the same weights: no second copy");
  if (bf16)
    s += fmt::format("training memory on {} (bf16 weights, fp32 masters, gradients and Adam moments, bf16 activations "
                     "of one micro-batch): {}; {}\n",
                     cfg.device, train::human_bytes(mem.gpu_mixed_precision_total()), engine_weights);
  else
    s += fmt::format("training memory (fp32, one micro-batch): {} (weights, gradients, Adam moments, activations); {}\n",
                     train::human_bytes(mem.total()), engine_weights);
  if (g.needs_reference())
    s += fmt::format("reference policy: a frozen copy of the starting weights ({}) for the {} KL penalty, beta {}{}\n",
                     train::human_bytes(bf16 ? mem.param_bytes / 2 : mem.param_bytes), g.loss_fn.reference_policy_kl_type,
                     g.loss_fn.reference_policy_kl_penalty, g.loss_fn.use_kl_in_reward ? " (in reinforce++'s reward)" : "");
  return s;
}

}  // namespace nemotron::rl
