// The training loop of every stage (Megatron's train(): one iteration = one optimizer step on a
// global batch): draw GBS / MBS micro-batches, run the shared step (train_step.h: forward/backward
// with the loss handed in, by default the masked cross-entropy normalised over the global batch;
// clip; AdamW at lr(samples consumed before the step); MoE bias update), then log, validate every
// eval_interval, save every save_interval, stop at exit_interval. It reads only the shared loop
// config (train_loop_config.h), so SFT and RL reuse it with their own data and loss.
// Everything a step depends on (weights, moments, step count, data cursor, consumed samples,
// MoE biases) is in the checkpoint, and the CPU kernels reduce in a fixed order, so a run resumed
// from a checkpoint repeats an uninterrupted run's losses bit for bit.
#pragma once
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "model/hybrid_model.h"
#include "train/adamw.h"
#include "train/batch_source.h"
#include "train/checkpoint.h"
#include "train/data_parallel.h"
#include "train/loss.h"
#include "train/metrics.h"
#include "train/train_loop_config.h"
#include "train/train_step.h"

namespace nemotron::train {

struct StepRecord {
  int64_t iteration = 0;
  double lm_loss = 0;    // the loss over the global batch (mean cross-entropy over its loss tokens)
  double aux_loss = 0;   // seq_aux_loss summed over MoE layers (0 when off)
  double lr = 0;         // the rate this step's update used
  double grad_norm = 0;  // before clipping
  double moe_max_load = 0;
  double seconds = 0;
  std::vector<double> mtp_losses;  // per MTP depth k: its mean cross-entropy L_k (A.8.3); empty without MTP
};

struct EvalRecord {
  int64_t iteration = 0;
  double lm_loss = 0;
};

struct TrainResult {
  std::vector<StepRecord> steps;  // the steps this run took
  std::vector<EvalRecord> evals;
  std::string last_checkpoint;  // iteration directory of the last save, if any
  int64_t final_iteration = 0;
  bool exited_early = false;  // stopped by train.exit_interval, the stop hook or a stop request
  std::string stop_reason;    // what stop_requested answered, when it stopped the run
};

struct TrainerOptions {
  std::FILE* log = stdout;  // progress lines; null = silent
  SaveStageHook save_hook;  // crash injection for tests
  // Asked after every step (after its checkpoint, if any): true stops the run there, like a
  // kill between steps (tests).
  std::function<bool(int64_t iteration)> stop_after;
  // Asked at every step boundary: a non-empty answer (the reason, e.g. "received SIGTERM") saves
  // a checkpoint there and ends the run with a line saying where to resume (Megatron's
  // exit-signal-handler). cli answers it from its signal handlers.
  std::function<std::string()> stop_requested;
  // Called after every successful checkpoint save with the iteration directory, the iteration
  // and the run's resolved config (cli publishes a model artifact there, reference §5.4).
  std::function<void(const std::string& iteration_dir, int64_t iteration, const std::string& config_yaml)> on_saved;
  // The run's process groups (null: one process). With several data-parallel ranks each takes
  // its share of every global batch (DataParallelSource); the first rank alone logs, writes
  // metrics and saves (the weights and optimizer state are the same on every rank), the others
  // wait for its save; a stop request on any rank stops all at the same step.
  std::shared_ptr<const parallel::ProcessGroups> groups;
};

class Trainer {
 public:
  // `valid` may be null (no validation). The model must be initialised (or loaded) by the caller;
  // parameters it froze (requires_grad false) get no optimizer state.
  Trainer(const TrainLoopConfig& cfg, model::HybridModel& net, BatchSource& train, BatchSource* valid,
          TrainerOptions opts = {});
  // The loss of training and validation steps (default: MaskedCrossEntropy); must outlive run().
  void set_loss(LossFn& loss) { loss_ = &loss; }

  // Applies checkpoint.load / checkpoint.finetune: weights (always), and unless finetuning the
  // optimizer moments and step count, the iteration, consumed samples and data cursor. A load
  // directory that does not exist yet while it equals checkpoint.save starts fresh (Megatron's
  // auto-resume); anything else missing is an InputError. Without a checkpoint to load,
  // checkpoint.pretrained_checkpoint (when set) gives the weights only. Writes nothing.
  void restore_from_config();
  // Same, from an explicit path.
  void restore(const std::string& path, bool finetune);

  TrainResult run();

  int64_t iteration() const { return iteration_; }
  int64_t consumed_samples() const { return consumed_samples_; }
  AdamW& optimizer() { return opt_; }
  TrainStep& step() { return step_; }

 private:
  StepRecord train_step();
  double evaluate();
  std::string save();
  TrainState state() const;
  void log_step(const StepRecord& r, double elapsed, double mean_step);
  void log_eval(const EvalRecord& e);
  // One metrics record: a metrics.jsonl line and its TensorBoard scalars.
  void record(const nlohmann::json& rec);
  template <class... Args>
  void print(fmt::format_string<Args...> f, Args&&... args);

  const TrainLoopConfig& cfg_;
  model::HybridModel& net_;
  std::shared_ptr<const parallel::ProcessGroups> groups_;
  std::unique_ptr<DataParallelSource> dp_train_, dp_valid_;  // this rank's share of each stream
  BatchSource& train_;
  BatchSource* valid_;
  nlohmann::json valid_start_;  // every evaluation reads the same validation batches
  TrainerOptions opts_;
  AdamW opt_;
  TrainStep step_;
  MaskedCrossEntropy default_loss_;
  LossFn* loss_ = &default_loss_;
  LrSchedule schedule_;
  MetricsFile metrics_;
  io::TensorBoardWriter tensorboard_;
  int64_t iteration_ = 0, consumed_samples_ = 0;
  std::string resumed_from_;
  bool finetuned_ = false;
};

}  // namespace nemotron::train
