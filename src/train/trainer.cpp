#include "train/trainer.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>

#include "backend/cpu/parallel.h"
#include "model/lora.h"
#include "model/model_info.h"
#include "train/compute_device.h"

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
      opts_(std::move(opts)),
      opt_(net.params(), AdamWConfig{cfg.optimizer.adam_beta1, cfg.optimizer.adam_beta2, cfg.optimizer.adam_eps,
                                     cfg.optimizer.weight_decay}),
      step_(net, opt_, StepConfig{cfg.optimizer.clip_grad, cfg.moe, cfg.seed, groups_}),
      schedule_(cfg.lr_schedule()) {
  NM_CHECK(cfg.train.data_parallel_size == groups_->data->size(),
           "train.data_parallel_size {} for a data group of {} (set_data_parallel_size)", cfg.train.data_parallel_size,
           groups_->data->size());
  if (valid_) valid_start_ = valid_->state();
}

template <class... Args>
void Trainer::print(fmt::format_string<Args...> f, Args&&... args) {
  if (!opts_.log || !groups_->is_first_rank()) return;
  const std::string s = fmt::format(f, std::forward<Args>(args)...);
  std::fputs(s.c_str(), opts_.log);
  std::fflush(opts_.log);
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
  load_checkpoint_weights(dir, net_.params(), cfg_.checkpoint.pretrained_checkpoint);
  resumed_from_ = dir;
  if (finetune) {
    iteration_ = 0, consumed_samples_ = 0, finetuned_ = true;
    return;
  }
  const TrainState st = read_train_state(dir);
  load_checkpoint_optimizer(dir, opt_, net_.params(), st.optimizer_steps);
  if (!st.data.contains("train"))
    throw InputError(fmt::format("{}/train_state.json: data.train: missing (the data cursor)", dir));
  train_.restore(st.data.at("train"));
  iteration_ = st.iteration;
  consumed_samples_ = st.consumed_train_samples;
}

TrainState Trainer::state() const {
  TrainState s;
  s.iteration = iteration_;
  s.consumed_train_samples = consumed_samples_;
  s.optimizer_steps = opt_.steps_taken();
  s.data = {{"train", train_.state()}};
  s.rng = {{"seed", cfg_.seed},
           {"data_seed", cfg_.data_seed},
           {"generator", "philox4x32-10, counter-based: the seeds are the whole state"}};
  s.last_lr = iteration_ > 0 ? schedule_.lr(consumed_samples_ - cfg_.train.global_batch_size) : 0.0;
  return s;
}

std::string Trainer::save() {
  auto t0 = std::chrono::steady_clock::now();
  CheckpointContent c{&net_.params(), &opt_, state(), config_to_yaml(cfg_.tree)};
  // Data parallelism keeps the same weights, moments and data cursor on every rank: the first
  // rank writes them; the others wait until the iteration is committed.
  std::string dir;
  if (groups_->is_first_rank())
    dir = save_checkpoint(cfg_.checkpoint.save, c, cfg_.checkpoint.most_recent_k, opts_.save_hook);
  groups_->world->barrier();
  if (!groups_->is_first_rank()) return (fs::path(cfg_.checkpoint.save) / iteration_dir_name(iteration_)).string();
  print("  saved checkpoint at iteration {:7d} to {} ({:.0f} ms)\n", iteration_, dir, 1e3 * seconds_since(t0));
  if (opts_.on_saved) opts_.on_saved(dir, iteration_, c.config_yaml);
  return dir;
}

StepRecord Trainer::train_step() {
  auto t0 = std::chrono::steady_clock::now();
  std::vector<model::Batch> micro(static_cast<size_t>(cfg_.train.accumulation_steps()));
  for (auto& mb : micro) mb = train_.next();
  const StepResult s = step_.run(micro, *loss_, schedule_.lr(consumed_samples_), iteration_ + 1);
  StepRecord r;
  r.iteration = iteration_ + 1;
  r.lm_loss = s.loss;
  r.aux_loss = s.aux_loss;
  r.grad_norm = s.grad_norm;
  r.lr = s.lr;
  r.moe_max_load = s.moe_max_load;
  r.mtp_losses = s.mtp_losses;
  ++iteration_;
  consumed_samples_ += cfg_.train.global_batch_size;
  r.seconds = seconds_since(t0);
  return r;
}

double Trainer::evaluate() {
  valid_->restore(valid_start_);
  LossSum sum;
  for (int64_t i = 0; i < cfg_.train.eval_iters * cfg_.train.accumulation_steps(); ++i) {
    LossSum l = step_.evaluate(valid_->next(), *loss_);
    sum.loss_sum += l.loss_sum;
    sum.token_count += l.token_count;
  }
  return step_.reduce(sum).mean();
}

void Trainer::log_step(const StepRecord& r, double elapsed, double mean_step) {
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
  print("{}", line);
}

void Trainer::record(const json& rec) {
  if (!groups_->is_first_rank()) return;
  metrics_.write(rec);
  if (tensorboard_.is_open()) tensorboard_.add_scalars(rec.value("iteration", int64_t{0}), tensorboard_scalars(rec));
}

void Trainer::log_eval(const EvalRecord& e) {
  const std::string body =
      fmt::format(" validation loss at iteration {} | lm loss value: {:.6E} | lm loss PPL: {:.6E} |", e.iteration,
                  e.lm_loss, std::exp(std::min(e.lm_loss, 700.0)));
  const std::string rule(body.size() + 1, '-');
  print("{}\n{}\n{}\n", rule, body, rule);
}

TrainResult Trainer::run() {
  TrainResult res;
  const TrainSection& t = cfg_.train;
  const int64_t acc = t.accumulation_steps();
  const std::string mpath = metrics_path(cfg_);
  const bool first_rank = groups_->is_first_rank();
  if (!mpath.empty() && first_rank) metrics_ = MetricsFile(mpath, iteration_ > 0);

  const model::ModelConfig& m = net_.config();
  Backend& backend = net_.params().backend();
  print("{} {}: {} layers \"{}\", hidden {}, vocab {}, {} parameters ({})\n", cfg_.stage_name, cfg_.source, m.num_layers(),
        m.hybrid_override_pattern, m.hidden_size, m.vocab_size,
        model::human_count(static_cast<double>(net_.params().numel())),
        backend.device().is_cpu()
            ? fmt::format("{} on {} CPU threads", dtype_name(net_.params().dtype()), cpu::num_threads())
            : fmt::format("{} on {}", net_.params().has_masters() ? "bf16 compute, fp32 masters"
                                                                   : dtype_name(net_.params().dtype()),
                          backend.name()));
  const int64_t trainable = net_.params().trainable_numel(), total = net_.params().numel();
  if (trainable < total)
    print("trainable params: {} of {} ({:.1f}%){}\n", model::human_count(static_cast<double>(trainable)),
          model::human_count(static_cast<double>(total)), 100.0 * static_cast<double>(trainable) / static_cast<double>(total),
          model::has_lora(net_.params()) ? ": LoRA adapters, base frozen" : "");
  print("data: {}\n", train_.describe());
  print("batch: global {} = micro {} x {} accumulation step(s) of {} tokens per sequence: {} tokens per iteration\n",
        t.global_batch_size, t.micro_batch_size, acc, cfg_.seq_length, cfg_.tokens_per_step());
  print(
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
  if (!resumed_from_.empty())
    print("{} {} at iteration {} ({} samples consumed)\n",
          finetuned_ ? "fine-tuning from the weights of" : "resumed from", resumed_from_, iteration_,
          consumed_samples_);
  if (!mpath.empty()) print("metrics: {}\n", mpath);
  if (iteration_ >= t.train_iters) {
    print("nothing to do: iteration {} already reaches train.train_iters {}\n", iteration_, t.train_iters);
    res.final_iteration = iteration_;
    return res;
  }
  // A new event file per run that trains (a finished run rerun adds none).
  const std::string tbdir = tensorboard_dir(cfg_);
  if (!tbdir.empty() && first_rank) tensorboard_ = io::TensorBoardWriter(tbdir);
  if (tensorboard_.is_open()) print("tensorboard: {}\n", tensorboard_.path());

  const auto t_start = std::chrono::steady_clock::now();
  const int64_t first_iteration = iteration_;
  int64_t last_saved = -1;
  std::string stop_line;  // printed last: what a stop request did and how to resume
  auto do_eval = [&] {
    EvalRecord e{iteration_, evaluate()};
    res.evals.push_back(e);
    record({{"type", "validation"}, {"iteration", e.iteration}, {"lm_loss", e.lm_loss}});
    log_eval(e);
  };
  auto do_save = [&] {
    res.last_checkpoint = save();
    last_saved = iteration_;
  };
  while (iteration_ < t.train_iters) {
    StepRecord r = train_step();
    res.steps.push_back(r);
    const double elapsed = seconds_since(t_start);
    const double mean_step = elapsed / static_cast<double>(iteration_ - first_iteration);
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
    record(rec);
    if (iteration_ % cfg_.logger.log_interval == 0 || iteration_ == t.train_iters) log_step(r, elapsed, mean_step);
    if (valid_ && t.eval_interval > 0 && iteration_ % t.eval_interval == 0) do_eval();
    if (!cfg_.checkpoint.save.empty() && cfg_.checkpoint.save_interval > 0 &&
        iteration_ % cfg_.checkpoint.save_interval == 0)
      do_save();
    if (t.exit_interval > 0 && iteration_ % t.exit_interval == 0 && iteration_ < t.train_iters) {
      if (!cfg_.checkpoint.save.empty() && last_saved != iteration_) do_save();
      print("exiting at iteration {} (train.exit_interval {})\n", iteration_, t.exit_interval);
      res.exited_early = true;
      break;
    }
    std::string why = opts_.stop_requested && iteration_ < t.train_iters ? opts_.stop_requested() : std::string();
    // Every rank stops at the same step: a signal seen by one rank (or only some) stops them all.
    if (groups_->distributed() && opts_.stop_requested &&
        groups_->world->all_reduce_host(why.empty() ? 0.0 : 1.0, parallel::ReduceOp::max) > 0 && why.empty())
      why = "stop requested on another rank";
    if (!why.empty()) {
      const bool saving = !cfg_.checkpoint.save.empty();
      if (saving && last_saved != iteration_) do_save();
      stop_line = fmt::format(
          "{}: {}\n", why,
          saving ? fmt::format("saved iteration {} to {}; resume with checkpoint.load={}", iteration_,
                               res.last_checkpoint, cfg_.checkpoint.save)
                 : fmt::format("stopped at iteration {}; nothing saved (checkpoint.save is empty)", iteration_));
      res.exited_early = true;
      res.stop_reason = why;
      break;
    }
    if (opts_.stop_after && opts_.stop_after(iteration_)) {
      res.exited_early = true;
      break;
    }
  }
  if (!res.exited_early) {
    if (valid_ && t.eval_iters > 0 && (t.eval_interval == 0 || iteration_ % t.eval_interval != 0)) do_eval();
    if (!cfg_.checkpoint.save.empty() && last_saved != iteration_) do_save();
  }
  res.final_iteration = iteration_;

  const double total_s = seconds_since(t_start);
  const int64_t steps = iteration_ - first_iteration;
  print("{} {} iteration(s) ({} -> {}) in {}, {} tokens, {:.0f} tokens/s\n",
        res.exited_early ? "stopped after" : "training done:", steps, first_iteration, iteration_, format_hms(total_s),
        steps * cfg_.tokens_per_step(), static_cast<double>(steps * cfg_.tokens_per_step()) / total_s);
  if (!res.steps.empty())
    print("lm loss {:.4f} (iteration {}) -> {:.4f} (iteration {}){}\n", res.steps.front().lm_loss,
          res.steps.front().iteration, res.steps.back().lm_loss, res.steps.back().iteration,
          res.evals.empty() ? std::string()
                            : fmt::format("; validation {:.4f} at iteration {}", res.evals.back().lm_loss,
                                          res.evals.back().iteration));
  if (!res.last_checkpoint.empty()) print("checkpoint: {}\n", res.last_checkpoint);
  if (!backend.device().is_cpu())
    print("peak device memory: {:.2f} GiB on {}\n", static_cast<double>(backend.peak_bytes()) / (1ull << 30),
          backend.name());
  record({{"type", "summary"},
                  {"iteration", iteration_},
                  {"steps", steps},
                  {"seconds", total_s},
                  {"exited_early", res.exited_early},
                  {"checkpoint", res.last_checkpoint}});
  if (!stop_line.empty()) print("{}", stop_line);
  return res;
}

}  // namespace nemotron::train
