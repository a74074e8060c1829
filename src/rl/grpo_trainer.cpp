#include "rl/grpo_trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <type_traits>

#include "core/error.h"
#include "core/rng.h"
#include "model/model_info.h"
#include "rl/grpo_advantages.h"
#include "rl/grpo_batch.h"
#include "rl/grpo_dynamic_sampling.h"
#include "rl/rollout_exchange.h"
#include "train/checkpoint.h"
#include "train/optimizer_bytes.h"
#include "train/shard_weight_sink.h"
#include "train/train_loop_config.h"

namespace nemotron::rl {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

constexpr double kGiB = double(1ull << 30);
constexpr double kHuge = std::numeric_limits<double>::infinity();

// Bytes of the policy's whole weights: what the engine reads (the trainer's own, or under full
// parameter sharding its gathered copy). Fixed for a run: the optimizer step writes the values in
// place, in the same dtype and shapes.
int64_t whole_weight_bytes(const model::ParamStore& params) {
  int64_t n = 0;
  for (const model::Param* p : params.all()) n += static_cast<int64_t>(p->value.numel()) * dtype_size(p->value.dtype());
  return n;
}

// Every rank holds the same routed experts at both layouts (the same expert-parallel size and
// coordinate): a refit between them gathers no expert.
bool same_expert_placement(const parallel::RankLayout& a, const parallel::RankLayout& b) {
  if (a.expert() != b.expert()) return false;
  for (int r = 0; r < a.world(); ++r)
    if (a.coords(r).expert != b.coords(r).expert) return false;
  return true;
}

// Bytes of the weights the trainer holds between steps: the whole ones, or under full parameter
// sharding the rank's slices, the gather buffers and the parameters outside them.
int64_t held_weight_bytes(const model::ParamStore& params, const train::ParamGather* gather) {
  const int64_t whole = whole_weight_bytes(params);
  return gather ? whole - gather->sharded_bytes() + gather->shard_bytes() + gather->buffer_bytes() : whole;
}

// Bytes of what a GPU run holds between steps besides the weights, by kind.
struct HeldBytes {
  int64_t masters = 0, grads = 0, moments = 0, reference = 0;
};

HeldBytes held_bytes(const model::ParamStore& params, const train::AdamW& opt, const train::GradSlots* slots,
                     model::HybridModel* reference) {
  HeldBytes h;
  h.masters = train::held_master_bytes(params, opt);  // the distributed optimizer's shard too
  for (const model::Param* p : params.all())
    if (p->grad.defined() && !slots) h.grads += static_cast<int64_t>(p->grad.nbytes());
  if (slots) h.grads = slots->slice_bytes() + slots->buffer_bytes();  // the gradients are views into these
  for (const auto* moments : {&opt.first_moments(), &opt.second_moments()})
    for (const Tensor& t : *moments)
      if (t.defined()) h.moments += static_cast<int64_t>(t.nbytes());
  if (reference)
    for (const model::Param* p : reference->params().all()) h.reference += static_cast<int64_t>(p->value.nbytes());
  return h;
}

// GRPO's keys in the loop's options, and the words its lines have always used.
train::LoopOptions loop_options(const RlConfig& cfg, const train::LoopHooks& hooks) {
  const GrpoConfig& g = cfg.grpo;
  const CheckpointingSection& k = g.checkpointing;
  train::LoopOptions o;
  o.total = g.grpo.max_num_steps;
  o.validate_every = g.grpo.val_period;
  o.validate_at_start = g.grpo.val_at_start;
  o.validate_at_end = g.grpo.val_period > 0;
  if (k.enabled) {
    o.save_dir = k.checkpoint_dir;
    o.save_every = k.save_period;
    o.keep_recent = k.keep_top_k;
    o.metrics_path = (fs::path(k.checkpoint_dir) / "metrics.jsonl").string();
    o.tensorboard_dir = (fs::path(k.checkpoint_dir) / "tb_logs").string();
  }
  o.unit = "step";
  o.total_key = "grpo.max_num_steps";
  o.saved_width = 0;
  o.resume_hint = "rerun the same command to resume";
  o.nothing_saved = "checkpointing.enabled is false";
  o.stop_line_last = false;
  o.announce_tensorboard = false;
  o.hooks = hooks;
  return o;
}

}  // namespace

GrpoTrainer::GrpoTrainer(const RlConfig& cfg, model::HybridModel& net, const data::Tokenizer& tok,
                         std::vector<RlPrompt> train, std::vector<RlPrompt> val, GrpoTrainerOptions opts)
    : cfg_(cfg),
      net_(net),
      tok_(tok),
      groups_(opts.groups ? opts.groups : parallel::ProcessGroups::single()),
      train_(std::move(train)),
      val_(std::move(val)),
      opts_(std::move(opts)),
      opt_(net.params(),
           train::AdamWConfig{cfg.optimizer.beta1, cfg.optimizer.beta2, cfg.optimizer.eps, cfg.optimizer.weight_decay},
           cfg.optimizer.distributed ? groups_->data.get() : nullptr, groups_->expert.get(), groups_->tensor.get(),
           train::kDefaultGradBucketElements, groups_->data->size() > 1 ? cfg.optimizer.fsdp : train::Fsdp::off),
      step_runner_(net, opt_, train::StepConfig{cfg.grpo.policy.max_grad_norm, {}, 0, groups_}),
      loss_(cfg.grpo.loss_fn),
      weight_bytes_(held_weight_bytes(net.params(), step_runner_.param_gather())),
      loop_(loop_options(cfg, train::rank_hooks(opts_))) {
  NM_CHECK(!train_.empty(), "no training prompts");
  if (!loop_.options().hooks.writes_logs) opts_.progress = false;
  loss_.set_context_group(groups_->context.get());
  const int64_t D = groups_->data->size();
  const GrpoConfig& g = cfg_.grpo;
  if (g.grpo.num_prompts_per_step % D != 0)
    throw InputError(fmt::format("{}: grpo.num_prompts_per_step: {} does not split over {} data-parallel ranks (each "
                                 "rank generates whole groups of prompts)",
                                 cfg_.source, g.grpo.num_prompts_per_step, D));
  if (g.policy.train_global_batch_size % D != 0)
    throw InputError(fmt::format("{}: policy.train_global_batch_size: {} does not split over {} data-parallel ranks",
                                 cfg_.source, g.policy.train_global_batch_size, D));
  if (g.grpo.use_dynamic_sampling && g.round_prompts() % D != 0)
    throw InputError(fmt::format("{}: grpo.batch_multiplier: {} x grpo.num_prompts_per_step {} = {} prompts a generation "
                                 "round do not split over {} data-parallel ranks (each rank generates whole groups)",
                                 cfg_.source, g.grpo.batch_multiplier, g.grpo.num_prompts_per_step, g.round_prompts(),
                                 D));
  if (g.grpo.use_dynamic_sampling && opts_.generator_groups)
    throw InputError(fmt::format("{}: grpo.use_dynamic_sampling: not yet with a generator laid out apart from the "
                                 "trainer (policy.generation.vllm_cfg tensor/expert-parallel size or context "
                                 "parallelism): set it false or run the generator at the trainer's layout",
                                 cfg_.source));
  if (opts_.generator_groups) {
    experts_stay_ = same_expert_placement(groups_->layout, opts_.generator_groups->layout);
    const int64_t E = opts_.generator_groups->data->size();
    if (g.grpo.num_prompts_per_step % E != 0)
      throw InputError(fmt::format("{}: grpo.num_prompts_per_step: {} does not split over the generator's {} data-parallel "
                                   "ranks (policy.generation.vllm_cfg.tensor_parallel_size {} over {} ranks; each "
                                   "generates whole groups of prompts)",
                                   cfg_.source, g.grpo.num_prompts_per_step, E, cfg_.generator_tensor_parallel,
                                   groups_->layout.world()));
  }
  order_ = epoch_order(0);
  // The trained policy is the one the engine samples from: log softmax(logits / temperature).
  net_.set_logit_temperature(cfg_.grpo.policy.generation.temperature);
}

GrpoTrainer::~GrpoTrainer() { net_.set_logit_temperature(1.0); }

std::vector<size_t> GrpoTrainer::epoch_order(int64_t epoch) const {
  std::vector<size_t> order(train_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (!cfg_.data.shuffle) return order;
  // Fisher-Yates on a counter-based stream of (grpo.seed, epoch): the order is a pure function of both.
  const Philox rng(cfg_.grpo.grpo.seed, static_cast<uint64_t>(epoch) + 1);
  for (size_t i = order.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(rng.uniform(i) * static_cast<double>(i));
    std::swap(order[i - 1], order[std::min(j, i - 1)]);
  }
  return order;
}

json GrpoTrainer::cursor() const {
  return {{"kind", "grpo_prompts"},
          {"rows", train_.size()},
          {"seed", cfg_.grpo.grpo.seed},
          {"shuffle", cfg_.data.shuffle},
          {"epoch", epoch_},
          {"index", index_}};
}

std::vector<const RlPrompt*> GrpoTrainer::next_prompts(int64_t P) {
  std::vector<const RlPrompt*> out;
  const int64_t N = static_cast<int64_t>(train_.size());
  while (static_cast<int64_t>(out.size()) < P) {
    if (index_ >= N) {  // the next epoch, in its own order (a batch may span two epochs)
      ++epoch_, index_ = 0;
      order_ = epoch_order(epoch_);
    }
    out.push_back(&train_[order_[static_cast<size_t>(index_++)]]);
  }
  return out;
}

void GrpoTrainer::load_weights(const std::string& dir) {
  // Distributed optimizer and FSDP: each rank writes only the part of the truth it keeps (no whole
  // float32 masters; under full parameter sharding only its range of the values is read), then
  // the values held whole are gathered again (collective).
  const train::ShardWeightSink sink(opt_, net_.params());
  train::load_checkpoint_weights(dir, net_.params(), "", &sink);
  if (train::ParamGather* gather = step_runner_.param_gather()) gather->refresh();
}

void GrpoTrainer::restore() {
  const CheckpointingSection& k = cfg_.grpo.checkpointing;
  if (k.enabled && train::has_checkpoint(k.checkpoint_dir)) {
    const std::string dir = train::resolve_checkpoint_dir(k.checkpoint_dir);
    train::check_checkpoint_model(dir, cfg_.model, cfg_.source);
    load_weights(dir);
    const train::TrainState st = loop_.resume(dir, opt_, net_.params());
    const json c = st.data.value("train", json());
    if (!c.is_object() || c.value("kind", "") != "grpo_prompts")
      throw InputError(fmt::format("{}/train_state.json: data.train: not a GRPO data cursor (a checkpoint of another "
                                   "stage in checkpointing.checkpoint_dir?)",
                                   dir));
    if (c.value("rows", int64_t{-1}) != static_cast<int64_t>(train_.size()) ||
        c.value("seed", uint64_t{0}) != cfg_.grpo.grpo.seed || c.value("shuffle", !cfg_.data.shuffle) != cfg_.data.shuffle)
      throw InputError(fmt::format(
          "{}/train_state.json: data.train: the cursor is for {} rows, seed {}, shuffle {}; this run has {} rows, "
          "seed {}, shuffle {} (another data set or grpo.seed: start a new checkpointing.checkpoint_dir)",
          dir, c.value("rows", int64_t{-1}), c.value("seed", uint64_t{0}), c.value("shuffle", false), train_.size(),
          cfg_.grpo.grpo.seed, cfg_.data.shuffle));
    epoch_ = c.value("epoch", int64_t{0});
    index_ = c.value("index", int64_t{0});
    order_ = epoch_order(epoch_);
    resumed_from_ = dir;
  } else if (!cfg_.model_name.empty()) {
    const std::string dir = train::resolve_checkpoint_dir(cfg_.model_name, true);
    train::check_checkpoint_model(dir, cfg_.model, cfg_.source);
    load_weights(dir);
  }
  if (cfg_.grpo.needs_reference()) {
    // The frozen initial policy: the starting weights, also when resuming. Split as the policy is,
    // and built as the trainer's model (so its log-probs round as the policy's do: a frozen store
    // would fuse its projections) but with its gradients deferred: it never runs a backward, and
    // whole float32 gradients would cost twice its bf16 weights.
    reference_ = std::make_unique<model::HybridModel>(cfg_.model, net_.params().backend(), net_.params().dtype(),
                                                      net_.shard(), /*trainable=*/true, /*defer_grads=*/true);
    reference_->set_logit_temperature(cfg_.grpo.policy.generation.temperature);
    if (cfg_.model_name.empty()) {
      if (!resumed_from_.empty())
        throw InputError(fmt::format("{}: loss_fn.reference_policy_kl_penalty > 0 needs policy.model_name (the "
                                     "reference policy's weights) to resume",
                                     cfg_.source));
      // Not resumed: the reference is the policy as it starts.
      reference_->init(0);
      if (train::ParamGather* pg = step_runner_.param_gather()) {
        pg->copy_whole_to(reference_->params());  // the policy's values are its slices: gathered
      } else {
        const auto& src = net_.params().all();
        const auto& dst = reference_->params().all();
        for (size_t i = 0; i < src.size(); ++i) dst[i]->value.copy_from(src[i]->value);
      }
    } else {
      train::load_checkpoint_weights(train::resolve_checkpoint_dir(cfg_.model_name, true), reference_->params());
    }
  }
}

train::CheckpointContent GrpoTrainer::checkpoint(int64_t step) {
  train::TrainState st;
  st.iteration = step;
  // The prompts drawn so far (dynamic sampling draws more than num_prompts_per_step a step).
  st.consumed_train_samples = epoch_ * static_cast<int64_t>(train_.size()) + index_;
  st.optimizer_steps = opt_.steps_taken();
  st.data = {{"train", cursor()}};
  st.rng = {{"seed", cfg_.grpo.grpo.seed},
            {"generator", "philox4x32-10, counter-based: sampling streams keyed by (seed, step, row)"}};
  st.last_lr = cfg_.optimizer.lr_at(opt_.steps_taken());
  return {&net_.params(), &opt_, st, train::config_to_yaml(cfg_.tree)};
}

json GrpoTrainer::note_unscored(const std::string& what, int64_t step, const RolloutBatch& rb, bool training) {
  json reasons = json::object();
  if (rb.unscored == 0) return reasons;
  const std::vector<env::UnscoredKind> kinds = env::unscored_by_kind(rb.results);
  for (const env::UnscoredKind& k : kinds) {
    reasons[k.kind] = k.rows;
    print("  {}: {} of {} rows unscored ({}): {}\n", what, k.rows, rb.scored_rows, k.kind, k.example);
  }
  const double limit = cfg_.max_unscored_fraction;
  if (rb.unscored_fraction() <= limit) return reasons;
  loop_.record({{"type", "env_fault"}, {"step", step}, {"what", what}, {"rows", rb.scored_rows},
          {"unscored_rows", rb.unscored}, {"unscored_reasons", reasons}});
  const CheckpointingSection& k = cfg_.grpo.checkpointing;
  throw Error(fmt::format(
      "{}: the environment \"{}\" could not score {} of {} rows ({:.1f}%), more than env.max_unscored_fraction {} "
      "allows; first reason ({}): {}. {}{}",
      what, cfg_.environment->name(), rb.unscored, rb.scored_rows, 100.0 * rb.unscored_fraction(), limit,
      kinds.front().kind, kinds.front().example,
      training ? "Stopped before training on them: nothing of this step is trained, saved or published"
               : "Stopped: nothing past the last checkpoint is saved or published",
      k.enabled ? fmt::format("; the checkpoints in {} are kept (rerun to resume from the last)", k.checkpoint_dir)
                : std::string()));
}

GrpoStepRecord GrpoTrainer::train_step() {
  loop_.step(*this, train::LoopClock{std::chrono::steady_clock::now(), step(), cfg_.grpo.grpo.max_num_steps});
  return last_step_;
}

GrpoStepRecord GrpoTrainer::rollout_and_train() {
  const auto t0 = std::chrono::steady_clock::now();
  const GrpoConfig& g = cfg_.grpo;
  GrpoStepRecord r;
  r.step = step() + 1;
  const int64_t D = groups_->data->size();
  const RolloutBatch rb = g.grpo.use_dynamic_sampling
                              ? dynamically_sampled_rollouts(r)
                              : generate_round(r, 0, next_prompts(g.grpo.num_prompts_per_step));
  r.generation_seconds = rb.generation_seconds + rb.reward_seconds;
  r.engine_setup_seconds = rb.engine_setup_seconds;
  r.generated_tokens = rb.generated_tokens;
  r.prefill_tokens = rb.prefill_tokens;
  r.shared_prefill_tokens = rb.shared_prefill_tokens;
  r.engine_idle_steps = rb.idle_steps;
  r.prefill_seconds = rb.prefill_seconds;
  r.overlong_prompts = rb.overlong_prompts;
  r.unscored_rows = rb.unscored;
  r.reward_mean = rb.mean_reward();
  r.accuracy = rb.accuracy();
  if (D > 1) {  // the step's figures over every rank's rows (weighted by the rows each mean is over)
    int64_t rewarded = 0, judged = 0;
    for (const Rollout& x : rb.rows)  // as mean_reward() and accuracy() count them
      rewarded += !x.unscored, judged += !x.unscored && !(x.response.empty() && x.mask_sample);
    std::vector<double> v{r.reward_mean * rewarded, static_cast<double>(rewarded), r.accuracy * judged,
                          static_cast<double>(judged), static_cast<double>(r.generated_tokens),
                          static_cast<double>(r.overlong_prompts), static_cast<double>(r.unscored_rows),
                          static_cast<double>(r.prefill_tokens), static_cast<double>(r.shared_prefill_tokens),
                          static_cast<double>(r.engine_idle_steps)};
    groups_->data->all_reduce_host(v);
    r.reward_mean = v[1] > 0 ? v[0] / v[1] : 0.0;
    r.accuracy = v[3] > 0 ? v[2] / v[3] : 0.0;
    r.generated_tokens = static_cast<int64_t>(v[4]);
    r.overlong_prompts = static_cast<int64_t>(v[5]);
    r.unscored_rows = static_cast<int64_t>(v[6]);
    r.prefill_tokens = static_cast<int64_t>(v[7]);
    r.shared_prefill_tokens = static_cast<int64_t>(v[8]);
    r.engine_idle_steps = static_cast<int64_t>(v[9]);
  }

  if (g.grpo.use_dynamic_sampling) {  // the step's reward over every generated row, as NeMo RL logs it
    r.filtered_reward = r.reward_mean;  // the trained rows'
    r.reward_mean = r.generated_reward_mean;
    r.accuracy = r.generated_accuracy;
  }

  // The rewards (optionally scaled/shaped) and the prompt groups.
  const std::vector<double> rewards = trained_rewards(g.grpo, rb.rows);
  std::vector<std::vector<int32_t>> prompt_tokens;
  std::vector<bool> scored;
  for (const Rollout& x : rb.rows) {
    prompt_tokens.push_back(x.prompt);
    scored.push_back(!x.unscored);
  }
  const std::vector<int64_t> group = group_by_prompt(prompt_tokens);
  // Per-row advantages: GRPO's, or reinforce++'s row part (its token part needs the log-probs).
  // Unscored rows are in no group's baseline (and get sample mask 0 in the micro-batches).
  const AdvEstimator& est = g.grpo.adv_estimator;
  const bool reinforce_pp = est.name == "reinforce_plus_plus";
  const std::vector<double> adv =
      !reinforce_pp ? grpo_advantages(rewards, group, est.use_leave_one_out_baseline, est.normalize_rewards, scored)
      : est.minus_baseline ? grpo_advantages(rewards, group, false, false, scored)
                           : rewards;

  // Every update's micro-batches with the policy's log-probs before the step's first update (NeMo
  // RL's prev_logprobs: one pass over the rollout batch before training; with several updates per
  // step the later ones see a ratio != 1) and the reference policy's.
  const auto t_lp = std::chrono::steady_clock::now();
  GrpoBatchOptions bo;
  bo.micro_batch_size = g.policy.train_micro_batch_size;
  bo.max_total_sequence_length = g.policy.max_total_sequence_length;
  bo.overlong_filtering = g.grpo.overlong_filtering;
  bo.pad_id = tok_.eos_token_id().value_or(0);
  bo.mask_dtype = net_.params().dtype();
  if (const int64_t C = groups_->context->size(); C > 1) {  // the training step cuts each row into 2C chunks
    bo.length_multiple = 2 * C;
    bo.min_length = 2 * C * std::max<int64_t>({1, cfg_.model.conv_kernel - 1, net_.mtp_depths()});
  }
  // Each optimizer update trains train_global_batch_size rows: this rank's 1/D of them.
  const int64_t per_update = g.policy.train_global_batch_size / D;
  const int64_t updates = g.rollout_rows() / g.policy.train_global_batch_size;
  Context& ctx = step_runner_.context();
  std::vector<std::vector<GrpoMicroBatch>> micro(static_cast<size_t>(updates));
  std::vector<int64_t> update_tokens;
  auto slice = [&](const auto& v, int64_t u) {
    return std::vector<typename std::decay_t<decltype(v)>::value_type>(v.begin() + u * per_update,
                                                                       v.begin() + (u + 1) * per_update);
  };
  for (int64_t u = 0; u < updates; ++u) {
    GrpoBatchCounts counts;
    micro[u] = build_grpo_micro_batches(slice(rb.rows, u), slice(adv, u), bo, &counts, slice(rewards, u));
    r.masked_rows += counts.overlong + counts.filtered;
    r.loss_tokens += counts.loss_tokens;
    update_tokens.push_back(counts.loss_tokens);
    r.logprob_tokens += fill_policy_logprobs(ctx, net_, micro[u], false);
    if (reference_) fill_policy_logprobs(ctx, *reference_, micro[u], true);
    for (const GrpoMicroBatch& mb : micro[u]) {
      const std::vector<double> m = grpo_token_mask(mb.batch);
      const size_t T = static_cast<size_t>(mb.batch.labels.dim(1));
      for (size_t n = 0; n < m.size(); ++n)
        if (m[n] > 0 && mb.data.sample_mask[n / T] > 0)
          r.max_logprob_error =
              std::max(r.max_logprob_error, std::fabs(mb.data.generation_logprobs[n] - mb.data.prev_logprobs[n]));
    }
  }
  if (reinforce_pp) {
    std::vector<TokenAdvantages> parts;
    for (std::vector<GrpoMicroBatch>& update : micro)
      for (GrpoMicroBatch& mb : update) {
        std::vector<double> m = grpo_token_mask(mb.batch);
        const size_t T = static_cast<size_t>(mb.batch.labels.dim(1));
        for (size_t n = 0; n < m.size(); ++n) m[n] *= mb.data.sample_mask[n / T];
        parts.push_back({&mb.data.advantages, std::move(m), &mb.data.prev_logprobs, &mb.data.reference_logprobs});
      }
    const LossFnSection& l = g.loss_fn;
    reinforce_plus_plus_token_advantages(parts, l.use_kl_in_reward ? l.reference_policy_kl_penalty : 0.0,
                                         l.reference_policy_kl_type, D > 1 ? &*groups_->data : nullptr);
  }
  if (g.grpo.advantage_clip_low || g.grpo.advantage_clip_high)
    for (std::vector<GrpoMicroBatch>& update : micro)
      for (GrpoMicroBatch& mb : update)
        for (double& a : mb.data.advantages)
          a = std::clamp(a, g.grpo.advantage_clip_low.value_or(-kHuge), g.grpo.advantage_clip_high.value_or(kHuge));
  r.logprob_seconds += seconds_since(t_lp);

  r.lr = cfg_.optimizer.lr_at(opt_.steps_taken() + 1);
  double loss_sum = 0, grad = 0;
  for (int64_t u = 0; u < updates; ++u) {
    // Every rank prints the same line: the update is empty only when no rank has a token.
    int64_t tokens = update_tokens[u];
    if (D > 1) tokens = static_cast<int64_t>(groups_->data->all_reduce_host(static_cast<double>(tokens)));
    if (tokens == 0)  // NeMo RL's 0 / (0 + 1e-8): the step runs with a zero gradient
      print("  step {}: update {} of {} has no token to train on (every row masked): loss 0, zero gradient (the "
            "optimizer still steps, as NeMo RL's)\n",
            r.step, u + 1, updates);
    const auto t_train = std::chrono::steady_clock::now();
    loss_.set_data(loss_data_of(micro[u]));
    const train::StepResult s = step_runner_.run(batches_of(micro[u]), loss_, cfg_.optimizer.lr_at(opt_.steps_taken() + 1), r.step);
    r.train_seconds += seconds_since(t_train);
    loss_sum += s.loss, grad = std::max(grad, s.grad_norm);
    // Over the updates: extrema by their own op, the rest averaged (NeMo RL's metrics / num_global_batches).
    for (const auto& [name, v] : s.metrics) {
      const parallel::ReduceOp op = loss_.metric_op(name);
      const double x = op == parallel::ReduceOp::sum ? v / static_cast<double>(updates) : v;
      auto [it, added] = r.loss_metrics.try_emplace(name, x);
      if (!added)
        it->second = op == parallel::ReduceOp::min   ? std::min(it->second, x)
                     : op == parallel::ReduceOp::max ? std::max(it->second, x)
                                                     : it->second + x;
    }
  }
  for (auto& [name, v] : r.loss_metrics)
    if (std::isinf(v)) v = -1.0;  // an extremum over no token: NeMo RL logs -1
  auto metric = [&](const char* name) { return r.loss_metrics.count(name) ? r.loss_metrics.at(name) : 0.0; };
  r.loss = loss_sum / static_cast<double>(updates), r.kl = metric("kl_penalty");
  r.clip_fraction = metric("clip_fraction_lower") + metric("clip_fraction_upper");
  r.token_mult_prob_error = metric("token_mult_prob_error");
  r.grad_norm = grad;
  if (D > 1) {
    std::vector<double> v{static_cast<double>(r.masked_rows), static_cast<double>(r.loss_tokens)};
    groups_->data->all_reduce_host(v);
    r.masked_rows = static_cast<int64_t>(v[0]);
    r.loss_tokens = static_cast<int64_t>(v[1]);
    r.max_logprob_error = groups_->data->all_reduce_host(r.max_logprob_error, parallel::ReduceOp::max);
  }
  r.weight_bytes = weight_bytes_;
  const Backend& backend = net_.params().backend();
  if (!backend.device().is_cpu()) {
    r.device_bytes_in_use = static_cast<int64_t>(backend.bytes_in_use());
    r.device_peak_bytes = static_cast<int64_t>(backend.peak_bytes());
  }
  r.total_seconds = seconds_since(t0);
  return r;
}

GrpoValRecord GrpoTrainer::validate() {
  const auto t0 = std::chrono::steady_clock::now();
  const GrpoConfig& g = cfg_.grpo;
  GrpoValRecord v;
  v.step = step();
  std::vector<const RlPrompt*> prompts;
  for (size_t i = 0; i < val_.size() && static_cast<int64_t>(i) < g.grpo.max_val_samples; ++i)
    prompts.push_back(&val_[i]);
  if (prompts.empty()) return v;
  RolloutOptions ro;
  ro.generations = 1;
  ro.sampling.temperature = 0;  // greedy
  ro.sampling.max_new_tokens = g.policy.generation.max_new_tokens;
  ro.sampling.stop = g.policy.generation.stop_strings;
  ro.sampling.seed = g.grpo.seed;
  ro.max_total_sequence_length = g.policy.max_total_sequence_length;
  ro.max_slots = std::min<int64_t>(g.grpo.val_batch_size, 64);
  ro.first_request_id = kValidationBit | (static_cast<uint64_t>(step()) * kIdsPerStep);
  ro.progress_label = opts_.progress ? "validation" : nullptr;
  ro.groups = step_runner_.context().groups;
  std::unique_ptr<model::HybridModel> whole;  // full parameter sharding: the engine's gathered copy
  if (step_runner_.param_gather()) whole = gathered_policy(nullptr, nullptr);
  const RolloutBatch rb = collect_rollouts(whole ? *whole : net_, tok_, *cfg_.environment, prompts, ro);
  whole.reset();
  v.samples = static_cast<int64_t>(prompts.size());
  v.unscored_rows = rb.unscored;
  note_unscored(fmt::format("validation at step {}", step()), step(), rb, false);  // throws past the bound
  v.accuracy = rb.accuracy();
  v.reward_mean = rb.mean_reward();
  v.seconds = seconds_since(t0);
  return v;
}

std::string GrpoTrainer::banner() {
  const GrpoConfig& g = cfg_.grpo;
  const model::ModelConfig& m = net_.config();
  std::string out = fmt::format("rl {}: {} layers \"{}\", hidden {}, vocab {}, {} parameters ({})\n", cfg_.source,
                                m.num_layers(), m.hybrid_override_pattern, m.hidden_size, m.vocab_size,
                                model::human_count(static_cast<double>(net_.params().numel())),
                                dtype_name(net_.params().dtype()));
  if (!resumed_from_.empty())
    out += fmt::format("resumed from {} at step {} (epoch {}, prompt {} of {})\n", resumed_from_, step(), epoch_,
                       index_, train_.size());
  else
    out += fmt::format("policy: {}\n", cfg_.model_name.empty()
                                           ? std::string("randomly initialised (policy.model_name unset)")
                                           : "weights of " + cfg_.model_name);
  out += fmt::format("data: {} prompts ({}), {} validation prompts; environment \"{}\"\n", train_.size(),
                     cfg_.data.train_jsonl_fpath, val_.size(), cfg_.environment->name());
  out += fmt::format(
      "grpo: {} prompts x {} generations per step, {} steps, up to {} new tokens, sequences up to {} tokens; "
      "AdamW lr {:.3g} (warmup {} from {:.3g}{}), clip {}, ratio clip [{}, {}], KL beta {}\n",
      g.grpo.num_prompts_per_step, g.grpo.num_generations_per_prompt, g.grpo.max_num_steps,
      g.policy.generation.max_new_tokens, g.policy.max_total_sequence_length, cfg_.optimizer.lr,
      cfg_.optimizer.lr_warmup_iters, cfg_.optimizer.lr_warmup_init,
      cfg_.optimizer.lr_decay_style == train::LrDecayStyle::constant
          ? std::string()
          : fmt::format("; {} decay to {:.3g} at step {}", train::lr_decay_style_name(cfg_.optimizer.lr_decay_style),
                        cfg_.optimizer.min_lr, cfg_.optimizer.lr_decay_iters),
      g.policy.max_grad_norm,
      1 - g.loss_fn.ratio_clip_min, 1 + g.loss_fn.ratio_clip_max, g.loss_fn.reference_policy_kl_penalty);
  if (g.grpo.use_dynamic_sampling)
    out += fmt::format("dynamic sampling: generation rounds of {} prompts x {}; groups whose rewards are all equal are "
                       "dropped until {} groups are kept, at most {} rounds a step\n",
                       g.round_prompts(), g.grpo.num_generations_per_prompt, g.grpo.num_prompts_per_step,
                       g.grpo.dynamic_sampling_max_gen_batches);
  out += train::sharded_state_line(opt_, "policy.megatron_cfg.optimizer.use_distributed_optimizer");
  out += train::fsdp_state_lines(step_runner_,
                                 "policy.megatron_cfg.distributed_data_parallel_config.data_parallel_sharding_strategy");
  if (step_runner_.param_gather())
    out += fmt::format(
        "refit: FSDP gather ({}): the engine decodes from a whole copy of the weights, {:.2f} MiB per rank, gathered "
        "layer by layer from the {} data ranks' slices before every step's rollouts (and every validation) and freed "
        "after them\n",
        cfg_.optimizer.fsdp_key, static_cast<double>(whole_weight_bytes(net_.params())) / (1 << 20),
        groups_->data->size());
  else if (opts_.generator_groups)
    out += fmt::format(
        "refit: the generator at tensor-parallel size {} (the trainer's {}){}; {}: its copy of the weights resharded "
        "on the devices before every step's rollouts and freed after them\n",
        cfg_.generator_tensor_parallel, cfg_.model.parallel.tensor,
        cfg_.generator_expert_parallel > 1 || cfg_.model.parallel.expert > 1
            ? fmt::format(", expert-parallel size {} (the trainer's {}{})", cfg_.generator_expert_parallel,
                          cfg_.model.parallel.expert,
                          experts_stay_                       ? "; each rank keeps its experts"
                          : cfg_.model.parallel.expert > 1 ? "; the experts all-gathered over the trainer's expert group"
                                                           : "; each rank keeps its generator's experts")
            : std::string(),
        opts_.generator_groups->layout.describe());
  else
    out += "refit: none (the engine reads the parameters the optimizer step writes, in place)\n";
  return out;
}

// grpo.max_num_epochs: the run ends once the next batch would begin past the last epoch.
std::string GrpoTrainer::exhausted() {
  const int64_t rows = static_cast<int64_t>(train_.size());
  if (epoch_ + (index_ >= rows ? 1 : 0) < cfg_.grpo.grpo.max_num_epochs) return {};
  return fmt::format("stopping at step {}: grpo.max_num_epochs {} done\n", step(), cfg_.grpo.grpo.max_num_epochs);
}

train::LoopReport GrpoTrainer::run_step(int64_t step, const train::LoopClock& clock) {
  const GrpoConfig& g = cfg_.grpo;
  const GrpoStepRecord r = last_step_ = rollout_and_train();
  NM_CHECK(r.step == step, "GRPO step {} run as step {}", r.step, step);
  run_.steps.push_back(r);
  const bool first = step == clock.first_iteration + 1;
  if (first) run_.first_step_seconds = seconds_since(opts_.start);
  const bool on_gpu = !net_.params().backend().device().is_cpu();
  json rec = {{"type", "train"},
              {"step", r.step},
              {"reward", r.reward_mean},
              {"accuracy", r.accuracy},
              {"loss", r.loss},
              {"grad_norm", r.grad_norm},
              {"lr", r.lr},
              {"kl_penalty", r.kl},
              {"clip_fraction", r.clip_fraction},
              {"token_mult_prob_error", r.token_mult_prob_error},
              {"max_logprob_error", r.max_logprob_error},
              {"generation_seconds", r.generation_seconds},
              {"logprob_seconds", r.logprob_seconds},
              {"logprob_tokens_per_rank", r.logprob_tokens},
              {"train_seconds", r.train_seconds},
              {"step_seconds", r.total_seconds},
              {"refit_seconds", r.refit_seconds},
              {"engine_setup_seconds", r.engine_setup_seconds},
              {"generated_tokens", r.generated_tokens},
              {"generation_tokens_per_second", r.tokens_per_second()},
              {"prefill_tokens", r.prefill_tokens},
              {"prefill_tokens_shared", r.shared_prefill_tokens},
              {"engine_idle_steps", r.engine_idle_steps},
              {"prefill_seconds", r.prefill_seconds},
              {"overlong_prompts", r.overlong_prompts},
              {"masked_rows", r.masked_rows},
              {"unscored_rows", r.unscored_rows}};
  const bool fsdp_refit = step_runner_.param_gather() != nullptr;
  if (opts_.generator_groups || fsdp_refit) rec["refit_bytes"] = r.refit_bytes;
  if (!r.unscored_reasons.empty()) rec["unscored_reasons"] = r.unscored_reasons;
  if (g.grpo.use_dynamic_sampling) {  // NeMo RL's names
    rec["dynamic_sampling_num_gen_batches"] = r.dynamic_sampling_num_gen_batches;
    rec["dynamic_sampling_num_discarded_valid_samples"] = r.dynamic_sampling_num_discarded_valid_samples;
    rec["filtered_reward"] = r.filtered_reward;
  }
  for (const auto& [name, v] : r.loss_metrics)  // NeMo RL's loss metrics under its names
    if (!rec.contains(name)) rec[name] = v;
  if (on_gpu) {  // the CPU's records stay as they were
    rec["gpu_memory_in_use_gib"] = static_cast<double>(r.device_bytes_in_use) / kGiB;
    rec["gpu_memory_peak_gib"] = static_cast<double>(r.device_peak_bytes) / kGiB;
    rec["weights_gib"] = static_cast<double>(r.weight_bytes) / kGiB;
  }
  auto metric = [&](const char* name) { return r.loss_metrics.count(name) ? r.loss_metrics.at(name) : 0.0; };
  std::string optional_metrics;  // the options' own figures, only where they are on
  if (r.loss_metrics.count("is_oob_ratio"))
    optional_metrics += fmt::format(" | is_oob_ratio {:.4f}", r.loss_metrics.at("is_oob_ratio"));
  if (g.grpo.use_dynamic_sampling)
    optional_metrics += fmt::format(" | dynamic sampling: {} round(s), filtered_reward {:.4f}, {} kept row(s) discarded",
                                    r.dynamic_sampling_num_gen_batches, r.filtered_reward,
                                    r.dynamic_sampling_num_discarded_valid_samples);
  if (g.loss_fn.positive_example_nll_weight > 0)
    optional_metrics += fmt::format(" | positive_nll_loss {:.4f}", metric("positive_nll_loss"));
  std::string line = fmt::format(
      "step {}/{} | reward {:.4f} | accuracy {:.4f} | loss {:.4e} | kl {:.4e} | clip fraction {:.4f} | ratio {:.4f} "
      "[{:.4f}, {:.4f}]{} | "
      "token_mult_prob_error {:.6f} (max |dlogp| {:.2e}) | grad norm {:.3f} | lr {:.3e} | gen {:.2f} s (prefill "
      "{:.2f} s, {} prompt tokens, {} shared) | "
      "logprobs {:.2f} s ({} tokens per rank) | train {:.2f} s | total {:.2f} s | {:.0f} gen tokens/s | refit {:.3f} s ({}engine "
      "setup {:.3f} s){}\n",
      r.step, g.grpo.max_num_steps, r.reward_mean, r.accuracy, r.loss, r.kl, r.clip_fraction, metric("probs_ratio"),
      metric("probs_ratio_min"), metric("probs_ratio_max"), optional_metrics, r.token_mult_prob_error,
      r.max_logprob_error, r.grad_norm, r.lr, r.generation_seconds, r.prefill_seconds, r.prefill_tokens,
      r.shared_prefill_tokens, r.logprob_seconds, r.logprob_tokens, r.train_seconds,
      r.total_seconds, r.tokens_per_second(), r.refit_seconds,
      opts_.generator_groups
          ? fmt::format("{} reshard, {:.3g} MiB gathered per rank; ", refit_sizes(), static_cast<double>(r.refit_bytes) / (1 << 20))
      : fsdp_refit
          ? fmt::format("FSDP gather, {:.3g} MiB gathered per rank; ", static_cast<double>(r.refit_bytes) / (1 << 20))
          : std::string(),
      r.engine_setup_seconds,
      r.overlong_prompts + r.masked_rows + r.unscored_rows > 0
          ? fmt::format(" | {} over-long prompt(s), {} masked row(s), {} unscored (not trained)", r.overlong_prompts,
                        r.masked_rows, r.unscored_rows)
          : std::string());
  if (first) {
    line += fmt::format("time to first step: {:.2f} s from start (model, data, engine and one GRPO step)\n",
                        run_.first_step_seconds);
    if (on_gpu) {
      const HeldBytes h = held_bytes(net_.params(), opt_, step_runner_.grad_slots(), reference_.get());
      line += fmt::format(
          "gpu memory: {:.4g} GiB in use, weights {:.4g} GiB ({}), peak "
          "{:.4g} GiB; besides the {} weights: fp32 masters {:.4g} GiB, gradients {:.4g} GiB, Adam moments "
          "{:.4g} GiB{}\n",
          static_cast<double>(r.device_bytes_in_use) / kGiB, static_cast<double>(r.weight_bytes) / kGiB,
          opts_.generator_groups ? "the trainer's; the generator's copy is freed after the rollouts"
          : fsdp_refit
              ? "the trainer's slices and gather buffers; the engine's whole copy is freed after the rollouts"
              : "one copy: the engine reads the trainer's",
          static_cast<double>(r.device_peak_bytes) / kGiB, dtype_name(net_.params().dtype()),
          static_cast<double>(h.masters) / kGiB, static_cast<double>(h.grads) / kGiB,
          static_cast<double>(h.moments) / kGiB,
          h.reference > 0 ? fmt::format(", reference policy {:.4g} GiB", static_cast<double>(h.reference) / kGiB)
                          : std::string());
    }
  }
  return {std::move(rec), std::move(line)};
}

train::LoopReport GrpoTrainer::run_validation(int64_t) {
  if (val_.empty()) return {};
  const GrpoValRecord v = validate();
  run_.validations.push_back(v);
  return {json{{"type", "validation"},
               {"step", v.step},
               {"accuracy", v.accuracy},
               {"reward", v.reward_mean},
               {"samples", v.samples},
               {"unscored_rows", v.unscored_rows},
               {"seconds", v.seconds}},
          fmt::format("validation at step {}: accuracy {:.4f} (greedy, {} prompts), mean reward {:.4f}, {:.1f} s{}\n",
                      v.step, v.accuracy, v.samples, v.reward_mean, v.seconds,
                      v.unscored_rows > 0
                          ? fmt::format(" | {} unscored (left out of accuracy and reward)", v.unscored_rows)
                          : std::string())};
}

std::string GrpoTrainer::summary(const train::LoopResult& r, json&) {
  std::string out;
  const std::vector<GrpoStepRecord>& steps = run_.steps;
  if (!steps.empty()) {
    const GrpoStepRecord &a = steps.front(), &b = steps.back();
    double gen = 0, total = 0;
    int64_t tokens = 0;
    for (const GrpoStepRecord& s : steps) gen += s.generation_seconds, total += s.total_seconds, tokens += s.generated_tokens;
    out += fmt::format(
        "rl done: {} step(s) ({} -> {}) in {:.1f} s, {:.2f} s per step, {:.0f} generated tokens/s; reward {:.4f} "
        "(step {}) -> {:.4f} (step {})\n",
        steps.size(), r.first_iteration, r.final_iteration, total, total / static_cast<double>(steps.size()),
        gen > 0 ? static_cast<double>(tokens) / gen : 0.0, a.reward_mean, a.step, b.reward_mean, b.step);
  }
  const std::vector<GrpoValRecord>& vals = run_.validations;
  if (vals.size() >= 2)
    out += fmt::format("validation accuracy {:.4f} (step {}) -> {:.4f} (step {})\n", vals.front().accuracy,
                       vals.front().step, vals.back().accuracy, vals.back().step);
  if (!r.last_checkpoint.empty()) out += fmt::format("checkpoint: {}\n", r.last_checkpoint);
  return out;
}

GrpoRunResult GrpoTrainer::run() {
  run_ = {};
  const train::LoopResult r = loop_.run(*this);
  GrpoRunResult res = std::move(run_);
  res.last_checkpoint = r.last_checkpoint;
  res.final_step = r.final_iteration;
  res.stop_reason = r.stop_reason;
  return res;
}

}  // namespace nemotron::rl
