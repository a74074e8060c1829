#include "cli/training_command.h"


#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "cli/artifact_publish.h"
#include "cli/distributed.h"
#include "cli/launch.h"
#include "cli/recipe_paths.h"
#include "cli/stop_signals.h"
#include "core/error.h"
#include "train/gpu_plan.h"
#include "train/run_dir.h"

namespace nemotron::cli {

std::string command_line(const TrainingCommandOptions& o) {
  std::string s = fmt::format("nemotron {} {} -c {}", o.family, o.stage, o.config);
  for (const std::string& kv : o.overrides) s += " " + kv;
  return s;
}

void add_training_command(CLI::App& app, const std::string& stage, const std::string& about,
                          std::function<int(const TrainingCommandOptions&)> run) {
  for (const RecipeFamily& f : kRecipeFamilies) {
    auto o = std::make_shared<TrainingCommandOptions>();
    o->family = f.name;
    o->stage = stage;
    CLI::App* cmd = family_group(app, f.name)->add_subcommand(stage, about);
    cmd->add_option("-c,--config", o->config,
                    fmt::format("Recipe: a name in recipes/{}/{}/ (tiny, default) or a YAML path", f.name, stage))
        ->capture_default_str();
    cmd->add_flag("-d,--dry-run", o->dry_run, "Print the resolved config, model size, plan and memory; run nothing");
    cmd->add_option("overrides", o->overrides, "key=value overrides with dotted keys (train.train_iters=50)")
        ->check(CLI::Validator(
            [](std::string& arg) { return is_override(arg) ? std::string() : "expected key=value, got " + arg; },
            "KEY=VALUE"));
    CLI::Option* run_opt = cmd->add_option("-r,--run", o->run_profile,
                                           "Run attached under env.toml profile PROFILE (local: mpirun; slurm: srun "
                                           "in the allocation), streaming the log");
    CLI::Option* batch_opt = cmd->add_option("-b,--batch", o->batch_profile,
                                             "Submit as an sbatch job under env.toml profile PROFILE (executor slurm); "
                                             "prints the job id");
    run_opt->excludes(batch_opt);
    cmd->add_option("--env-file", o->env_file, "env.toml to read profiles from (default: ./env.toml or the first "
                                               "walking up from the current directory)");
    cmd->callback([o, run] {
      if (!o->run_profile.empty() || !o->batch_profile.empty()) {
        launch_training(*o, run);  // execs the launcher, submits, or prints (--dry-run)
        return;
      }
      if (int sig = run(*o)) reraise(sig);  // after every destructor: files closed, lock released
    });
  }
}

std::string tokenizer_dir_of(const std::string& tokenizer_json) {
  std::error_code ec;
  if (tokenizer_json.empty() || !std::filesystem::is_regular_file(tokenizer_json, ec)) return "";
  return std::filesystem::path(tokenizer_json).parent_path().string();
}

train::SaveStageHook test_crash_hook() {
  const char* spec = std::getenv("NEMOTRON_TEST_CRASH_AT");
  if (!spec || !*spec) return {};
  const std::string s = spec;
  const size_t a = s.find(':'), b = s.rfind(':');
  if (a == std::string::npos || a == b)
    throw InputError(fmt::format("NEMOTRON_TEST_CRASH_AT: expected STAGE:RANK:N, got \"{}\"", s));
  const std::string stage = s.substr(0, a);
  const int rank = std::stoi(s.substr(a + 1, b - a - 1));
  const int nth = std::stoi(s.substr(b + 1));
  if (rank != launch_info().rank) return {};
  auto seen = std::make_shared<int>(0);
  return [stage, nth, seen](const std::string& at) {
    if (at == stage && ++*seen == nth) {
      std::fprintf(stderr, "NEMOTRON_TEST_CRASH_AT: killing this rank at save stage %s\n", at.c_str());
      std::fflush(stderr);
      std::raise(SIGKILL);
    }
  };
}

parallel::RankLayout training_layout(const TrainingCommandOptions& o, const std::string& recipe,
                                     train::TrainLoopConfig& cfg, const model::ModelConfig& model, int64_t seq_length) {
  parallel::RankLayout layout = run_layout(model, recipe, o.planned_world_size);
  check_sequence_split(layout, seq_length, recipe);
  check_context_split(layout, model, seq_length, recipe);
  train::set_data_parallel_size(cfg, layout.data());
  cfg.device = rank_device(cfg.device, recipe);
  return layout;
}

std::string layout_plan_text(const TrainingCommandOptions& o, const parallel::RankLayout& layout,
                             const train::TrainLoopConfig& cfg, const model::ModelConfig& model, int64_t lora_params) {
  std::string s = layout.world() > 1 ? layout_text(layout, model, o.planned_ranks_per_node) : "";
  const bool assumed = o.planned_gpu_bytes <= 0;
  return s + train::gpu_plan_text(
                 train::gpu_plan_input(cfg, model, layout.world(), o.planned_ranks_per_node, lora_params),
                 assumed ? train::kDefaultGpuBytes : o.planned_gpu_bytes,
                 assumed ? "assumed: an 80 GB H100; set gpu_memory_gib in the env.toml profile" : "the profile's gpu_memory_gib");
}

train::TrainerOptions trainer_options(const std::string& save_dir, std::vector<std::string> artifact_inputs) {
  train::TrainerOptions topts;
  topts.stop_requested = &StopSignals::requested;
  topts.save_hook = test_crash_hook();
  if (!save_dir.empty())
    topts.on_saved = [save_dir, artifact_inputs](const std::string& dir, int64_t iteration, const std::string& yaml) {
      publish_model_artifact(save_dir, dir, iteration, yaml, artifact_inputs);
    };
  return topts;
}

int run_training(train::Trainer& trainer, const train::CheckpointSection& checkpoint, const std::string& command,
                 train::TrainResult& result, const std::function<void()>& before_run) {
  trainer.restore_from_config();  // reads only; errors leave every file as it was
  // checkpoint.save belongs to one run at a time (train/run_dir.h): refused before anything is
  // written unless this run resumes it, then locked for the whole run.
  // Several ranks: the first checks and holds the directory for the run (the others write
  // nothing there, and would see the first's lock as another run's).
  train::RunDirLock lock;
  if (launch_info().rank == 0) lock = train::lock_run_dir(checkpoint, train::check_run_dir(checkpoint), command);
  for (const std::string& note : lock.notes()) std::printf("%s\n", note.c_str());
  if (checkpoint.save.empty())
    std::printf("warning: checkpoint.save is empty: this run saves no checkpoint (set checkpoint.save=DIR to keep one)\n");
  if (before_run) before_run();
  const StopSignals signals;
  result = trainer.run();
  return result.stop_reason.empty() ? 0 : StopSignals::signal_number();
}

}  // namespace nemotron::cli
