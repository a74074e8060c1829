#include "train/trainer.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>

#include "backend/cpu/parallel.h"
#include "core/config_tree.h"
#include "model/lora.h"
#include "model/model_info.h"
#include "train/compute_device.h"
#include "train/shard_weight_sink.h"

namespace nemotron::train {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool same_path(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return false;
  std::error_code ec1, ec2;
  fs::path pa = fs::weakly_canonical(a, ec1), pb = fs::weakly_canonical(b, ec2);
  return !ec1 && !ec2 && pa == pb;
}

std::string metrics_path(const TrainLoopConfig& cfg) {
  if (!cfg.logger.metrics_path.empty()) return cfg.logger.metrics_path;
  if (!cfg.checkpoint.save.empty()) return (fs::path(cfg.checkpoint.save) / "metrics.jsonl").string();
  return "";
}

std::string tensorboard_dir(const TrainLoopConfig& cfg) {
  if (!cfg.logger.tensorboard) return "";
  if (!cfg.logger.tensorboard_dir.empty()) return cfg.logger.tensorboard_dir;
  if (!cfg.checkpoint.save.empty()) return (fs::path(cfg.checkpoint.save) / "tb_logs").string();
  return "";
}

// Megatron FSDP's gradient sharding (ddp.data_parallel_sharding_strategy=optim_grads) and full
// parameter sharding (optim_grads_params) on the layouts they support: data (and pipeline-free)
// parallelism only; tensor, expert and context parallelism are refused, naming their key. Off with
// a data group of one.
Fsdp checked_fsdp(const TrainLoopConfig& cfg, const parallel::ProcessGroups& g) {
  const bool params = cfg.ddp.shards_params();
  if (!params && !cfg.ddp.shards_grads()) return Fsdp::off;
  for (auto [key, n] : {std::pair{"model.tensor_model_parallel_size", g.tensor->size()},
                        std::pair{"model.expert_model_parallel_size", g.expert->size()},
                        std::pair{"model.context_parallel_size", g.context->size()}})
    if (n > 1)
      throw_config_error(cfg.source, "ddp.data_parallel_sharding_strategy",
                         fmt::format("{} with {} {} is not supported yet ({} runs with data parallelism only; use "
                                     "optim, the distributed optimizer)",
                                     params ? "optim_grads_params" : "optim_grads", key, n,
                                     params ? "full parameter sharding" : "gradient sharding"));
  if (g.data->size() == 1) return Fsdp::off;
  return params ? Fsdp::grads_params : Fsdp::grads;
}

LoopOptions loop_options(const TrainLoopConfig& cfg, LoopHooks hooks) {
  LoopOptions o;
  o.total = cfg.train.train_iters;
  o.validate_every = cfg.train.eval_interval;
  o.validate_at_end = cfg.train.eval_iters > 0;
  o.log_every = cfg.logger.log_interval;
  o.exit_every = cfg.train.exit_interval;
  o.save_dir = cfg.checkpoint.save;
  o.save_every = cfg.checkpoint.save_interval;
  o.keep_recent = cfg.checkpoint.most_recent_k;
  o.metrics_path = metrics_path(cfg);
  o.tensorboard_dir = tensorboard_dir(cfg);
  o.resume_hint = "resume with checkpoint.load=" + cfg.checkpoint.save;
  o.hooks = std::move(hooks);
  return o;
}

}  // namespace

Trainer::Trainer(const TrainLoopConfig& cfg, model::HybridModel& net, BatchSource& train, BatchSource* valid,
                 TrainerOptions opts)
    : cfg_(cfg),
      net_(net),
      groups_(opts.groups ? opts.groups : parallel::ProcessGroups::single()),
      dp_train_(std::make_unique<DataParallelSource>(train, groups_->data->rank(), groups_->data->size())),
      dp_valid_(valid ? std::make_unique<DataParallelSource>(*valid, groups_->data->rank(), groups_->data->size())
                      : nullptr),
      train_(*dp_train_),
      valid_(dp_valid_.get()),
      opt_(net.params(),
           AdamWConfig{cfg.optimizer.adam_beta1, cfg.optimizer.adam_beta2, cfg.optimizer.adam_eps,
                       cfg.optimizer.weight_decay},
           cfg.ddp.shards_optimizer() ? groups_->data.get() : nullptr, groups_->expert.get(),
           groups_->tensor.get(), cfg.ddp.bucket_size, checked_fsdp(cfg, *groups_)),
      step_(net, opt_, StepConfig{cfg.optimizer.clip_grad, cfg.moe, cfg.seed, groups_, cfg.ddp.bucket_size}),
      schedule_(cfg.lr_schedule()),
      loop_(loop_options(cfg, rank_hooks(std::move(opts)))) {
  NM_CHECK(cfg.train.data_parallel_size == groups_->data->size(),
           "train.data_parallel_size {} for a data group of {} (set_data_parallel_size)", cfg.train.data_parallel_size,
           groups_->data->size());
  if (valid_) valid_start_ = valid_->state();
}

void Trainer::restore_from_config() {
  const CheckpointSection& k = cfg_.checkpoint;
  if (!k.load.empty()) {
    if (!same_path(k.load, k.save) || has_checkpoint(k.load)) return restore(k.load, k.finetune);
    if (k.pretrained_checkpoint.empty()) {
      print("checkpoint.load {}: no checkpoint there yet, starting from scratch\n", k.load);
      return;
    }
  }
  if (k.pretrained_checkpoint.empty()) return;
  restore(k.pretrained_checkpoint, true);
  print("checkpoint.pretrained_checkpoint: weights from {} (iteration, optimizer and data start over)\n",
        resumed_from_);
}

void Trainer::restore(const std::string& path, bool finetune) {
  const std::string dir = resolve_checkpoint_dir(path, finetune);
  // Distributed optimizer and FSDP: each rank writes only the part of the truth it keeps (no whole
  // float32 masters; under full parameter sharding only its range of the values is read).
  const ShardWeightSink sink(opt_, net_.params());
  load_checkpoint_weights(dir, net_.params(), cfg_.checkpoint.pretrained_checkpoint, &sink);
  if (ParamGather* gather = step_.param_gather()) gather->refresh();  // collective: the outer unit
  resumed_from_ = dir;
  if (finetune) {
    loop_.set_iteration(0), consumed_samples_ = 0, finetuned_ = true;
    return;
  }
  const TrainState st = loop_.resume(dir, opt_, net_.params());
  if (!st.data.contains("train"))
    throw InputError(fmt::format("{}/train_state.json: data.train: missing (the data cursor)", dir));
  train_.restore(st.data.at("train"));
  consumed_samples_ = st.consumed_train_samples;
}

CheckpointContent Trainer::checkpoint(int64_t iteration) {
  TrainState s;
  s.iteration = iteration;
  s.consumed_train_samples = consumed_samples_;
  s.optimizer_steps = opt_.steps_taken();
  s.data = {{"train", train_.state()}};
  s.rng = {{"seed", cfg_.seed},
           {"data_seed", cfg_.data_seed},
           {"generator", "philox4x32-10, counter-based: the seeds are the whole state"}};
  s.last_lr = iteration > 0 ? schedule_.lr(consumed_samples_ - cfg_.train.global_batch_size) : 0.0;
  // Distributed optimizer: every rank writes its own pieces (train/sharded_checkpoint.h).
  return {&net_.params(), &opt_, s, config_to_yaml(cfg_.tree)};
}

LoopReport Trainer::run_step(int64_t iteration, const LoopClock& clock) {
  auto t0 = std::chrono::steady_clock::now();
  std::vector<model::Batch> micro(static_cast<size_t>(cfg_.train.accumulation_steps()));
  for (auto& mb : micro) mb = train_.next();
  const StepResult s = step_.run(micro, *loss_, schedule_.lr(consumed_samples_), iteration);
  StepRecord r;
  r.iteration = iteration;
  r.lm_loss = s.loss;
  r.aux_loss = s.aux_loss;
  r.grad_norm = s.grad_norm;
  r.lr = s.lr;
  r.moe_max_load = s.moe_max_load;
  r.mtp_losses = s.mtp_losses;
  consumed_samples_ += cfg_.train.global_batch_size;
  r.seconds = seconds_since(t0);
  steps_.push_back(r);

  const double elapsed = clock.elapsed_s();
  const double mean_step = elapsed / static_cast<double>(iteration - clock.first_iteration);
  json rec = {{"type", "train"},
              {"iteration", r.iteration},
              {"consumed_samples", consumed_samples_},
              {"lm_loss", r.lm_loss},
              {"lr", r.lr},
              {"grad_norm", r.grad_norm},
              {"step_seconds", r.seconds},
              {"tokens_per_second", static_cast<double>(cfg_.tokens_per_step()) / r.seconds}};
  if (cfg_.moe.seq_aux_loss()) rec["load_balancing_loss"] = r.aux_loss;
  if (step_.balancer().num_layers() > 0) rec["moe_max_load"] = r.moe_max_load;
  for (size_t k = 0; k < r.mtp_losses.size(); ++k) rec[fmt::format("mtp_{}_loss", k + 1)] = r.mtp_losses[k];
  return {std::move(rec), step_line(r, elapsed, mean_step)};
}

double Trainer::evaluate() {
  valid_->restore(valid_start_);
  LossSum sum;
  for (int64_t i = 0; i < cfg_.train.eval_iters * cfg_.train.accumulation_steps(); ++i) {
    LossSum l = step_.evaluate(valid_->next(), *loss_);
    sum.loss_sum += l.loss_sum;
    sum.token_count += l.token_count;
  }
  return step_.reduce(sum).mean();  // every data-parallel rank's share
}

std::string Trainer::step_line(const StepRecord& r, double elapsed, double mean_step) const {
  const int64_t total = cfg_.train.train_iters;
  std::string line = fmt::format(
      " iteration {:>8d}/{:>8d} | consumed samples: {:>12d} | elapsed time per iteration (ms): {:.1f} | "
      "learning rate: {:.6E} | global batch size: {:>5d} | lm loss: {:.6E} |",
      r.iteration, total, consumed_samples_, 1e3 * r.seconds, r.lr, cfg_.train.global_batch_size, r.lm_loss);
  // Megatron's MTP tracker names: "mtp_1 loss", ... (the objective adds alpha / D times their sum).
  for (size_t k = 0; k < r.mtp_losses.size(); ++k)
    line += fmt::format(" mtp_{} loss: {:.6E} |", k + 1, r.mtp_losses[k]);
  if (cfg_.moe.seq_aux_loss()) line += fmt::format(" load balancing loss: {:.6E} |", r.aux_loss);
  if (step_.balancer().num_layers() > 0) line += fmt::format(" moe max load: {:.2f} |", r.moe_max_load);
  line += fmt::format(" grad norm: {:.3f} | tokens/s: {:.0f} | elapsed: {} | ETA: {}\n", r.grad_norm,
                      static_cast<double>(cfg_.tokens_per_step()) / r.seconds, format_hms(elapsed),
                      format_hms(mean_step * static_cast<double>(total - r.iteration)));
  return line;
}

LoopReport Trainer::run_validation(int64_t iteration) {
  if (!valid_) return {};
  const EvalRecord e{iteration, evaluate()};
  evals_.push_back(e);
  const std::string body =
      fmt::format(" validation loss at iteration {} | lm loss value: {:.6E} | lm loss PPL: {:.6E} |", e.iteration,
                  e.lm_loss, std::exp(std::min(e.lm_loss, 700.0)));
  const std::string rule(body.size() + 1, '-');
  return {json{{"type", "validation"}, {"iteration", e.iteration}, {"lm_loss", e.lm_loss}},
          fmt::format("{}\n{}\n{}\n", rule, body, rule)};
}

std::string Trainer::banner() {
  const TrainSection& t = cfg_.train;
  const model::ModelConfig& m = net_.config();
  Backend& backend = net_.params().backend();
  std::string out = fmt::format(
      "{} {}: {} layers \"{}\", hidden {}, vocab {}, {} parameters ({})\n", cfg_.stage_name, cfg_.source,
      m.num_layers(), m.hybrid_override_pattern, m.hidden_size, m.vocab_size,
      model::human_count(static_cast<double>(net_.params().numel())),
      backend.device().is_cpu()
          ? fmt::format("{} on {} CPU threads", dtype_name(net_.params().dtype()), cpu::num_threads())
          : fmt::format("{} on {}", net_.params().has_masters() ? "bf16 compute, fp32 masters"
                                                                 : dtype_name(net_.params().dtype()),
                        backend.name()));
  const int64_t trainable = net_.params().trainable_numel(), total = net_.params().numel();
  if (trainable < total)
    out += fmt::format("trainable params: {} of {} ({:.1f}%){}\n", model::human_count(static_cast<double>(trainable)),
                       model::human_count(static_cast<double>(total)),
                       100.0 * static_cast<double>(trainable) / static_cast<double>(total),
                       model::has_lora(net_.params()) ? ": LoRA adapters, base frozen" : "");
  out += fmt::format("data: {}\n", train_.describe());
  out += fmt::format(
      "batch: global {} = micro {} x {} accumulation step(s) of {} tokens per sequence: {} tokens per iteration\n",
      t.global_batch_size, t.micro_batch_size, t.accumulation_steps(), cfg_.seq_length, cfg_.tokens_per_step());
  out += fmt::format(
      "schedule: {} lr {:.3g} -> {:.3g}, warmup {} samples, decay to sample {}{}; AdamW betas ({}, {}), eps {:.1e}, "
      "weight decay {}, clip {}\n",
      lr_decay_style_name(schedule_.style), schedule_.max_lr, schedule_.min_lr, schedule_.warmup_steps,
      schedule_.decay_steps,
      schedule_.style == LrDecayStyle::wsd
          ? fmt::format(" ({} anneal from sample {})", wsd_decay_style_name(schedule_.wsd_style),
                        schedule_.anneal_start())
          : std::string(),
      cfg_.optimizer.adam_beta1, cfg_.optimizer.adam_beta2, cfg_.optimizer.adam_eps, cfg_.optimizer.weight_decay,
      cfg_.optimizer.clip_grad);
  out += sharded_state_line(opt_, "ddp.use_distributed_optimizer");
  out += fsdp_state_lines(step_, "ddp.data_parallel_sharding_strategy");
  if (!resumed_from_.empty())
    out += fmt::format("{} {} at iteration {} ({} samples consumed)\n",
                       finetuned_ ? "fine-tuning from the weights of" : "resumed from", resumed_from_,
                       loop_.iteration(), consumed_samples_);
  return out;
}

std::string Trainer::summary(const LoopResult& r, json& record) {
  const int64_t steps = r.final_iteration - r.first_iteration;
  std::string out = fmt::format(
      "{} {} iteration(s) ({} -> {}) in {}, {} tokens, {:.0f} tokens/s\n",
      r.exited_early ? "stopped after" : "training done:", steps, r.first_iteration, r.final_iteration,
      format_hms(r.seconds), steps * cfg_.tokens_per_step(),
      static_cast<double>(steps * cfg_.tokens_per_step()) / r.seconds);
  if (!steps_.empty())
    out += fmt::format("lm loss {:.4f} (iteration {}) -> {:.4f} (iteration {}){}\n", steps_.front().lm_loss,
                       steps_.front().iteration, steps_.back().lm_loss, steps_.back().iteration,
                       evals_.empty() ? std::string()
                                      : fmt::format("; validation {:.4f} at iteration {}", evals_.back().lm_loss,
                                                    evals_.back().iteration));
  if (!r.last_checkpoint.empty()) out += fmt::format("checkpoint: {}\n", r.last_checkpoint);
  if (steps > 0 && groups_->data_context->size() > 1) {
    if (const GradSlots* gs = step_.grad_slots()) {
      out += fmt::format("gradients reduce-scattered per layer and micro-batch from 2 layer slots: {} layer "
                         "reduce-scatter(s) in the last step\n",
                         gs->reduce_scatters());
    } else {
      const GradReducer& g = step_.grad_reducer();
      out += fmt::format("gradients {} in {} bucket(s) (ddp.bucket_size {} elements); in the last step {} "
                         "started during the last backward\n",
                         opt_.sharded() ? "reduce-scattered" : "all-reduced", g.bucket_count(), cfg_.ddp.bucket_size,
                         g.overlapped_buckets());
    }
    if (const ParamGather* pg = step_.param_gather())
      out += fmt::format("layer weights gathered {} time(s), {} of them prefetched during another layer\n",
                         pg->gathers(), pg->prefetched());
  }
  const Backend& backend = net_.params().backend();
  if (!backend.device().is_cpu())
    out += fmt::format("peak device memory: {:.2f} GiB on {}\n",
                       static_cast<double>(backend.peak_bytes()) / (1ull << 30), backend.name());
  record["seconds"] = r.seconds;
  record["exited_early"] = r.exited_early;
  return out;
}

TrainResult Trainer::run() {
  steps_.clear(), evals_.clear();
  const LoopResult r = loop_.run(*this);
  TrainResult res;
  res.steps = std::move(steps_);
  res.evals = std::move(evals_);
  res.last_checkpoint = r.last_checkpoint;
  res.final_iteration = r.final_iteration;
  res.exited_early = r.exited_early;
  res.stop_reason = r.stop_reason;
  return res;
}

}  // namespace nemotron::train
