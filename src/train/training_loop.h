// The one outer training loop of every stage (torchtitan's Trainer.train(): the loop owns the
// step counter and the cadence; the stage is a part it is handed). A stage implements
// TrainingJob: run one step (pretraining/SFT: micro-batches of a BatchSource through the shared
// TrainStep with its LossFn; GRPO: rollouts -> GRPO micro-batches -> ClippedPGLoss), validate,
// and say what a checkpoint holds. TrainingLoop does the rest, once for all stages: the
// iteration counter, when to validate, save and stop (exit_interval, a stop request such as
// SIGTERM, the test hooks), the metrics.jsonl + TensorBoard records and the summary.
// Every line goes through print(), every metrics record through record(), every checkpoint
// write through save(): the places a rank decides whether it logs and what it writes
// (LoopHooks::writes_logs / writes_checkpoints).
#pragma once
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "io/tensorboard_writer.h"
#include "parallel/process_groups.h"
#include "train/checkpoint.h"
#include "train/metrics.h"

namespace nemotron::train {

// What the caller hooks into a run, and the part this process plays in it (Trainer's options).
struct LoopHooks {
  std::FILE* log = stdout;  // progress lines; null = silent
  SaveStageHook save_hook;  // crash injection for tests
  // Asked after every step (after its checkpoint, if any): true stops the run there, like a kill
  // between steps (tests; no extra save).
  std::function<bool(int64_t iteration)> stop_after;
  // Asked at every step boundary before the last: a non-empty answer (the reason, e.g. "received
  // SIGTERM") saves a checkpoint there and ends the run with a line saying where to resume
  // (Megatron's exit-signal-handler). cli answers it from its signal handlers.
  std::function<std::string()> stop_requested;
  // Called after every checkpoint save with the iteration directory, the iteration and the run's
  // resolved config (cli publishes a model artifact there, reference §5.4).
  std::function<void(const std::string& iteration_dir, int64_t iteration, const std::string& config_yaml)> on_saved;
  // The rank seam. writes_logs: this process prints the run's lines (TrainingLoop::print) and
  // writes metrics.jsonl and the TensorBoard events (TrainingLoop::record); false: none of them,
  // not even the files' creation. writes_checkpoints: this process saves checkpoints and calls
  // on_saved (TrainingLoop::save); false: it writes nothing under the save directory, while the
  // run's lines still name the iteration directory. Both true in a single-process run; the
  // parallel layer sets them per rank. With several processes (groups distributed) every rank
  // writes its own pieces of a sharded checkpoint (train/sharded_checkpoint.h) and the first
  // commits it; writes_checkpoints then says who calls on_saved.
  bool writes_logs = true;
  bool writes_checkpoints = true;
  // The run's tokenizer files (a directory), copied into every checkpoint's tokenizer/ (when the
  // stage's CheckpointContent names none); empty: none.
  std::string tokenizer_dir;
  // Called on every process after its part of each save and before the save is reported (the
  // parallel layer waits there until every rank's files are durable); unset: nothing to wait for.
  std::function<void()> save_barrier;
  // The run's process groups (null: one process). The stage's job gives each data-parallel rank
  // its share of every global batch; rank_hooks (train/data_parallel.h) sets the seam above from
  // them: the first rank logs and saves, every rank waits for the save, a stop seen by any rank
  // stops all at the same step.
  std::shared_ptr<const parallel::ProcessGroups> groups;
};

// The loop's own options; each stage maps its keys into them when it builds its loop
// (pretraining/SFT: train.*, checkpoint.*, logger.*; GRPO: grpo.*, checkpointing.*).
struct LoopOptions {
  int64_t total = 0;              // train.train_iters | grpo.max_num_steps
  int64_t validate_every = 0;     // train.eval_interval | grpo.val_period; 0 = not during the run
  bool validate_at_start = false; // grpo.val_at_start: before the first step of a run from 0
  bool validate_at_end = false;   // once more at the end when the last step had none (not after a stop)
  int64_t log_every = 1;          // logger.log_interval: a step's line every N (and at the last)
  int64_t exit_every = 0;         // train.exit_interval: save and stop when iteration % it == 0
  std::string save_dir;           // checkpoint.save | checkpointing.checkpoint_dir; empty = never save
  int64_t save_every = 0;         // checkpoint.save_interval | checkpointing.save_period; 0 = at the end only
  int64_t keep_recent = -1;       // checkpoint.most_recent_k | checkpointing.keep_top_k; -1 = all
  std::string metrics_path;       // metrics.jsonl; empty = none
  std::string tensorboard_dir;    // event files; empty = none

  // The words the stages' lines differ in, so that no line changed when the loops became one.
  std::string unit = "iteration";             // "step" (GRPO): lines and the records' counter key
  std::string total_key = "train.train_iters";  // named by "nothing to do"
  int saved_width = 7;                        // of the counter in "  saved checkpoint at ..." (0: none)
  std::string resume_hint;                    // after a stop that saved: how to resume
  std::string nothing_saved = "checkpoint.save is empty";  // after a stop without a save directory
  bool stop_line_last = true;                 // the stop line after the summary (false: where it stops)
  bool announce_tensorboard = true;           // a "tensorboard: <file>" line

  LoopHooks hooks;
};

// A record for metrics.jsonl (null: nothing happened) and the line(s) that show it.
struct LoopReport {
  nlohmann::json record;
  std::string line;  // each line ends in '\n'; empty = none
};

// Where a run stands when a step ends (for ETA and rate columns).
struct LoopClock {
  std::chrono::steady_clock::time_point start;  // when this run began stepping
  int64_t first_iteration = 0;                  // the counter when it began
  int64_t total = 0;
  double elapsed_s() const;
};

struct LoopResult {
  int64_t first_iteration = 0, final_iteration = 0;
  double seconds = 0;          // from the first step to the end
  bool exited_early = false;   // stopped by exit_every, stop_after or a stop request
  std::string stop_reason;     // what stop_requested answered, when it stopped the run
  std::string last_checkpoint; // iteration directory of this run's last save, if any
  bool nothing_to_do = false;  // the counter already reached `total`
};

// A stage's part of the loop.
class TrainingJob {
 public:
  virtual ~TrainingJob() = default;
  // The startup lines (model, data, schedule, where it resumed): printed before "metrics: ...".
  virtual std::string banner() = 0;
  // A non-empty line ends the run before the next step as if it were done (GRPO's epochs).
  virtual std::string exhausted() { return {}; }
  // Runs step `iteration` (the counter + 1; the loop counts it when this returns): its record
  // (with the counter under the unit's key) and its progress line.
  virtual LoopReport run_step(int64_t iteration, const LoopClock& clock) = 0;
  // Validates the weights at `iteration`; a null record when there is nothing to validate.
  virtual LoopReport run_validation(int64_t iteration) = 0;
  // What a checkpoint of `iteration` holds: weights, optimizer, train_state.json (the data
  // cursor, seeds), the resolved config.
  virtual CheckpointContent checkpoint(int64_t iteration) = 0;
  // The summary lines; may add fields to the summary record (which has type, the counter,
  // steps and checkpoint).
  virtual std::string summary(const LoopResult& r, nlohmann::json& record) = 0;
};

class TrainingLoop {
 public:
  explicit TrainingLoop(LoopOptions opts) : opts_(std::move(opts)) {}

  // The whole run: banner, steps with their validations, saves and stops, the summary.
  LoopResult run(TrainingJob& job);
  // One step of `job`, counted; no line, record or save (tests drive steps one by one).
  LoopReport step(TrainingJob& job, const LoopClock& clock);

  // The counter: steps (optimizer iterations) done. set_iteration: where a restore resumes.
  int64_t iteration() const { return iteration_; }
  void set_iteration(int64_t iteration) { iteration_ = iteration; }
  // The checkpoint read that every stage shares, after the job loaded the weights of `dir`:
  // train_state.json, the optimizer moments and step count, and the counter. Returns the state
  // for the job's data cursor.
  TrainState resume(const std::string& dir, AdamW& opt, const model::ParamStore& params);

  // The one place a line is printed (`text` ends in '\n').
  void print(const std::string& text);
  template <class... Args>
  void printf(fmt::format_string<Args...> f, Args&&... args) {
    print(fmt::format(f, std::forward<Args>(args)...));
  }
  // The one place a metrics record is written: a metrics.jsonl line and its TensorBoard scalars
  // (at the record's counter).
  void record(const nlohmann::json& rec);
  // The one place a checkpoint is written: the job's content at the current iteration; prints
  // the saved line and calls on_saved. Returns the iteration directory.
  std::string save(TrainingJob& job);

  const LoopOptions& options() const { return opts_; }

 private:
  LoopOptions opts_;
  int64_t iteration_ = 0;
  MetricsFile metrics_;
  io::TensorBoardWriter tensorboard_;
};

}  // namespace nemotron::train
