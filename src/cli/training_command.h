// What every training command (`pretrain`, `sft`, and the stages after them) shares around its own
// setup: the options (-c NAME|PATH, --dry-run, key=value overrides), their registration under each
// recipe family, and the run itself once the model, data and Trainer exist: restore (reads only),
// claim checkpoint.save for this run (refused unless it resumes it, then locked: train/run_dir.h),
// warn when nothing will be saved, and train with SIGTERM/SIGINT saving at the next step.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "parallel/rank_layout.h"
#include "train/train_loop_config.h"
#include "train/trainer.h"

namespace CLI {
class App;
}

namespace nemotron::cli {

struct TrainingCommandOptions {
  std::string family;  // super3, nano3
  std::string stage;   // pretrain, sft: also the recipe folder (recipes/<family>/<stage>/)
  std::string config = "default";
  bool dry_run = false;
  std::vector<std::string> overrides;
  // Launch (cli/launch.h): an env.toml profile to run under (--run) or submit (--batch), and the
  // env file (default: the first env.toml walking up from the current directory).
  std::string run_profile, batch_profile, env_file;
  // The world a --dry-run of a launch plans for (0: this process's launcher, as when running).
  int planned_world_size = 0;
  // Of that launch's profile: ranks per node and each GPU's memory in bytes (0: unknown), for the
  // dry run's per-GPU plan.
  int64_t planned_ranks_per_node = 0;
  double planned_gpu_bytes = 0;
  // With dry_run: print nothing, only load and validate (a launch checks the command this way
  // before it starts ranks or submits a job, so a bad config is one line here, not in a job log).
  bool quiet = false;
};

// The command as the run-directory lock records it (who holds checkpoint.save).
std::string command_line(const TrainingCommandOptions& o);

// Adds `nemotron <family> <stage>` for every recipe family. `run` returns the signal that stopped
// the training (0 when it ran to its end); it is re-raised after every destructor has run (files
// closed, lock released), so the shell sees 128 + the signal.
void add_training_command(CLI::App& app, const std::string& stage, const std::string& about,
                          std::function<int(const TrainingCommandOptions&)> run);

// The rank layout `pretrain` or `sft` runs (or its dry run plans) `recipe`'s config at: the
// launch's world (o.planned_world_size for a launch's dry run), checked against the sequences
// it splits (sequence and context parallelism: InputErrors naming the key), with cfg's
// data-parallel size and device (this rank's GPU) set from it.
parallel::RankLayout training_layout(const TrainingCommandOptions& o, const std::string& recipe,
                                     train::TrainLoopConfig& cfg, const model::ModelConfig& model, int64_t seq_length);

// Trainer options of a command: the stop query answered by the SIGTERM/SIGINT handlers, and a
// model artifact published after every save (cli/artifact_publish.h) with `artifact_inputs`
// (the data directory, the checkpoint a fine-tune starts from) as its inputs.
// The dry run's tail: the rank layout (compact for big worlds, with each rank's node and GPU when
// a launch profile says how many a node runs) and the per-GPU plan (train/gpu_plan.h).
// `lora_params` >= 0: only that many LoRA parameters train.
std::string layout_plan_text(const TrainingCommandOptions& o, const parallel::RankLayout& layout,
                             const train::TrainLoopConfig& cfg, const model::ModelConfig& model,
                             int64_t lora_params = -1);

train::TrainerOptions trainer_options(const std::string& save_dir = "",
                                      std::vector<std::string> artifact_inputs = {});

// The directory of a tokenizer.json (what a stage's checkpoints carry in tokenizer/), or "" when
// `tokenizer_json` is empty or does not exist.
std::string tokenizer_dir_of(const std::string& tokenizer_json);

// Tests: NEMOTRON_TEST_CRASH_AT=STAGE:RANK:N kills world rank RANK with SIGKILL (a node failure)
// the N-th time it reaches checkpoint save stage STAGE (train/checkpoint.h, "rank_file" in a
// sharded save); unset: no hook.
train::SaveStageHook test_crash_hook();

// Restores, claims checkpoint.save, then runs the trainer; `before_run` is called once the
// restored state is known and the directory is ours (e.g. to print a metric at the starting
// iteration). Returns the stopping signal as above, and the run's result in `result`.
int run_training(train::Trainer& trainer, const train::CheckpointSection& checkpoint, const std::string& command,
                 train::TrainResult& result, const std::function<void()>& before_run = {});

}  // namespace nemotron::cli
