#include "train/training_loop.h"

#include <filesystem>

#include "io/checkpoint_layout.h"
#include "train/sharded_checkpoint.h"

namespace nemotron::train {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

double LoopClock::elapsed_s() const { return seconds_since(start); }

void TrainingLoop::print(const std::string& text) {
  if (!opts_.hooks.writes_logs || !opts_.hooks.log || text.empty()) return;
  std::fputs(text.c_str(), opts_.hooks.log);
  std::fflush(opts_.hooks.log);
}

void TrainingLoop::record(const json& rec) {
  if (!opts_.hooks.writes_logs) return;
  if (metrics_.is_open()) metrics_.write(rec);
  if (!tensorboard_.is_open()) return;
  json scalars = rec;  // the counter is the event's step, not a scalar of its own
  scalars.erase(opts_.unit);
  tensorboard_.add_scalars(rec.value(opts_.unit, int64_t{0}), tensorboard_scalars(scalars));
}

std::string TrainingLoop::save(TrainingJob& job) {
  const auto t0 = std::chrono::steady_clock::now();
  CheckpointContent c = job.checkpoint(iteration_);
  const LoopHooks& h = opts_.hooks;
  if (c.tokenizer_dir.empty()) c.tokenizer_dir = h.tokenizer_dir;
  std::string dir = (fs::path(opts_.save_dir) / io::iteration_dir_name(iteration_)).string();
  if (h.groups && h.groups->distributed())  // every rank writes its pieces, the first commits
    dir = save_sharded_checkpoint(opts_.save_dir, c, *h.groups, opts_.keep_recent, h.save_hook);
  else if (h.writes_checkpoints)
    dir = save_checkpoint(opts_.save_dir, c, opts_.keep_recent, h.save_hook);
  if (h.save_barrier) h.save_barrier();
  printf("  saved checkpoint at {} {:{}d} to {} ({:.0f} ms)\n", opts_.unit, iteration_, opts_.saved_width, dir,
         1e3 * seconds_since(t0));
  if (h.writes_checkpoints && h.on_saved) h.on_saved(dir, iteration_, c.config_yaml);
  return dir;
}

TrainState TrainingLoop::resume(const std::string& dir, AdamW& opt, const model::ParamStore& params) {
  TrainState st = read_train_state(dir);
  load_checkpoint_optimizer(dir, opt, params, st.optimizer_steps);
  iteration_ = st.iteration;
  return st;
}

LoopReport TrainingLoop::step(TrainingJob& job, const LoopClock& clock) {
  LoopReport r = job.run_step(iteration_ + 1, clock);
  ++iteration_;
  return r;
}

LoopResult TrainingLoop::run(TrainingJob& job) {
  const LoopOptions& o = opts_;
  const LoopHooks& h = o.hooks;
  LoopResult res;
  res.first_iteration = res.final_iteration = iteration_;
  int64_t dropped = 0;
  if (h.writes_logs && !o.metrics_path.empty()) {
    if (iteration_ > 0) dropped = drop_records_after(o.metrics_path, o.unit, iteration_);
    metrics_ = MetricsFile(o.metrics_path, iteration_ > 0);
  }
  print(job.banner());
  if (metrics_.is_open()) printf("metrics: {}\n", metrics_.path());
  if (dropped > 0)
    printf("metrics: dropped {} record(s) past {} {}, logged after the checkpoint this run resumes from\n", dropped,
           o.unit, iteration_);
  if (iteration_ >= o.total) {
    printf("nothing to do: {} {} already reaches {} {}\n", o.unit, iteration_, o.total_key, o.total);
    res.nothing_to_do = true;
    return res;
  }
  // A new event file per run that trains (a finished run rerun adds none).
  if (h.writes_logs && !o.tensorboard_dir.empty()) tensorboard_ = io::TensorBoardWriter(o.tensorboard_dir);
  if (tensorboard_.is_open() && o.announce_tensorboard) printf("tensorboard: {}\n", tensorboard_.path());

  int64_t last_saved = -1, last_validated = -1;
  std::string stop_line;  // what a stop request did and how to resume
  auto validate = [&] {
    const LoopReport v = job.run_validation(iteration_);
    last_validated = iteration_;
    if (v.record.is_null()) return;
    record(v.record);
    print(v.line);
  };
  auto checkpoint = [&] {
    res.last_checkpoint = save(job);
    last_saved = iteration_;
  };
  if (o.validate_at_start && iteration_ == 0) validate();

  const LoopClock clock{std::chrono::steady_clock::now(), iteration_, o.total};
  const bool saving = !o.save_dir.empty();
  while (iteration_ < o.total) {
    if (const std::string why = job.exhausted(); !why.empty()) {
      print(why);
      break;
    }
    const LoopReport r = step(job, clock);
    record(r.record);
    if (iteration_ % o.log_every == 0 || iteration_ == o.total) print(r.line);
    if (o.validate_every > 0 && iteration_ % o.validate_every == 0) validate();
    if (saving && o.save_every > 0 && iteration_ % o.save_every == 0) checkpoint();
    if (o.exit_every > 0 && iteration_ % o.exit_every == 0 && iteration_ < o.total) {
      if (saving && last_saved != iteration_) checkpoint();
      printf("exiting at {} {} (train.exit_interval {})\n", o.unit, iteration_, o.exit_every);
      res.exited_early = true;
      break;
    }
    const std::string why = h.stop_requested && iteration_ < o.total ? h.stop_requested() : std::string();
    if (!why.empty()) {
      if (saving && last_saved != iteration_) checkpoint();
      stop_line = fmt::format(
          "{}: {}\n", why,
          saving ? fmt::format("saved {} {} to {}; {}", o.unit, iteration_, res.last_checkpoint, o.resume_hint)
                 : fmt::format("stopped at {} {}; nothing saved ({})", o.unit, iteration_, o.nothing_saved));
      res.exited_early = true;
      res.stop_reason = why;
      if (!o.stop_line_last) print(stop_line), stop_line.clear();
      break;
    }
    if (h.stop_after && h.stop_after(iteration_)) {
      res.exited_early = true;
      break;
    }
  }
  if (!res.exited_early) {
    if (o.validate_at_end && last_validated != iteration_) validate();
    if (saving && last_saved != iteration_ && iteration_ > res.first_iteration) checkpoint();
  }
  res.final_iteration = iteration_;
  res.seconds = clock.elapsed_s();
  json summary = {{"type", "summary"},
                  {o.unit, iteration_},
                  {"steps", iteration_ - res.first_iteration},
                  {"checkpoint", res.last_checkpoint}};
  print(job.summary(res, summary));
  record(summary);
  print(stop_line);
  return res;
}

}  // namespace nemotron::train
