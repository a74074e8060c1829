// `nemotron <family> rl [-c tiny|default|PATH] [--dry-run] [key=value ...]`: stage 2, GRPO
// (rl/grpo_trainer.h) on the rows of `data prep rl`, from the SFT stage's checkpoint
// (policy.model_name; found by default for the tiny recipe), in one process: the generation
// engine reads the weights the optimizer writes, so there is no refit. A rerun with the same
// checkpointing.checkpoint_dir resumes its newest checkpoint exactly (weights, moments, step,
// data cursor). device=cuda runs it on the GPU: bf16 weights (mixed_precision=bf16_mixed, the
// default there; fp32 also works) that the engine reads and the optimizer writes from fp32 masters.
// Bad input is one line naming the file and key, exit 2, before anything is written;
// SIGTERM/SIGINT save at the next step boundary. Each save publishes a model artifact whose
// inputs are the RL data and the starting checkpoint (lineage rl <- sft <- pretrain <- data).
// Environment faults are errors, exit 1: a NeMo Gym server that does not answer before the first
// step, or a step (or validation) with more unscored rows than env.max_unscored_fraction, which
// stops the run with its last checkpoint kept and nothing of that step saved or published.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "cli/artifact_publish.h"
#include "cli/artifact_refs.h"
#include "cli/commands.h"
#include "cli/distributed.h"
#include "cli/recipe_paths.h"
#include "cli/stop_signals.h"
#include "cli/training_command.h"
#include "core/config_tree.h"
#include "core/error.h"
#include "data/chat_template.h"
#include "data/tokenizer.h"
#include "model/hybrid_model.h"
#include "model/shard_sizes.h"
#include "rl/grpo_trainer.h"
#include "rl/rl_config.h"
#include "train/checkpoint.h"
#include "train/compute_device.h"
#include "train/run_dir.h"

namespace nemotron::cli {

namespace {

namespace fs = std::filesystem;

void require_path(const std::string& recipe, const std::string& key, const std::string& path, const std::string& hint) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw InputError(fmt::format("{}: {}: {} does not exist; {}", recipe, key, path, hint));
}

// The generator's layout (policy.generation.vllm_cfg.tensor_parallel_size and
// expert_parallel_size, checked against the model when the config was read): the trainer's world
// with those sizes, the experts split over its data ranks as the trainer's are (context ranks hold
// whole copies of their tensor parts, so the generator never splits context).
parallel::RankLayout generator_layout(const rl::RlConfig& cfg, const parallel::RankLayout& trainer,
                                      const std::string& path) {
  const int64_t tp = cfg.generator_tensor_parallel, ep = cfg.generator_expert_parallel;
  if (trainer.world() % tp != 0)
    throw_config_error(path, "policy.generation.vllm_cfg.tensor_parallel_size",
                       fmt::format("{} does not divide the {} ranks of the run (the generator's data-parallel size "
                                   "is the world over it)",
                                   tp, trainer.world()));
  if ((trainer.world() / tp) % ep != 0)
    throw_config_error(path, "policy.generation.vllm_cfg.expert_parallel_size",
                       fmt::format("{} does not divide the generator's {} data-parallel ranks (the {} ranks of the run "
                                   "over its tensor-parallel size {}); the experts are split within them",
                                   ep, trainer.world() / tp, trainer.world(), tp));
  parallel::ParallelSizes sizes;
  sizes.tensor = tp;
  sizes.expert = ep;
  return parallel::RankLayout(sizes, trainer.world(), model::layout_facts(cfg.model), path);
}

int run_rl(const TrainingCommandOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  const std::string path = resolve_recipe(o.family, "rl", o.config);
  const rl::RlConfig cfg = rl::load_rl_config(path, o.overrides, artifact_ref_resolver());
  const parallel::RankLayout layout = run_layout(cfg.model, path, o.planned_world_size);
  // Context parallelism splits the trainer's rows only: the generator decodes whole rows at its own
  // layout (its tensor size, the rest data-parallel); the log-prob pass and the training step cut
  // each row into its context ranks' chunks (rl/grpo_batch.h, rl/grpo_loss.h).
  const bool own_generator = cfg.generator_tensor_parallel != layout.tensor() ||
                             cfg.generator_expert_parallel != layout.expert() || layout.context() > 1;
  const parallel::RankLayout gen_layout = own_generator ? generator_layout(cfg, layout, path) : layout;
  const std::string gen_line =
      own_generator ? fmt::format("generator layout: {} (the trainer's: {})\n", gen_layout.describe(), layout.describe())
                    : std::string();
  if (o.dry_run) {
    if (!o.quiet) {
      std::fputs(rl::rl_dry_run_text(cfg, path, o.overrides.size()).c_str(), stdout);
      if (layout.world() > 1) std::fputs(layout_text(layout, cfg.model).c_str(), stdout);
      std::fputs(gen_line.c_str(), stdout);
    }
    return 0;
  }
  // The device first: device=cuda in a build without CUDA, or on a machine without a GPU, is one
  // line naming the key before anything is read or written.
  train::ComputeDevice dev = train::open_compute_device(path, rank_device(cfg.device, path), cfg.mixed_precision);
  // Then the environment's server(s): one that is down is one line naming its key and URL, exit 1,
  // before anything is loaded or written, not a run whose every row comes back unscored.
  cfg.environment->check_health();
  const rl::CheckpointingSection& k = cfg.grpo.checkpointing;
  const bool resumes = k.enabled && train::has_checkpoint(k.checkpoint_dir);
  if (!resumes && !cfg.model_name.empty()) {
    require_path(path, "policy.model_name", cfg.model_name,
                 fmt::format("run the SFT stage first (`nemotron {} sft -c {}`) or point it at a checkpoint", o.family,
                             o.config));
    train::check_checkpoint_model(train::resolve_checkpoint_dir(cfg.model_name, true), cfg.model, path);
  } else if (!resumes) {
    std::printf("warning: policy.model_name is empty: GRPO on randomly initialised weights\n");
  }
  const std::string prep_hint = fmt::format("run `nemotron {} data prep rl -c {}` first", o.family, o.config);
  require_path(path, "data.train_jsonl_fpath", cfg.data.train_jsonl_fpath, prep_hint);
  if (!cfg.data.validation_jsonl_fpath.empty())
    require_path(path, "data.validation_jsonl_fpath", cfg.data.validation_jsonl_fpath, prep_hint);
  require_path(path, "policy.tokenizer.name", cfg.tokenizer_path,
               fmt::format("run `nemotron {} data prep pretrain -c {}` first (it trains the tokenizer)", o.family,
                           o.config));
  const data::Tokenizer tok = data::Tokenizer::load(cfg.tokenizer_path);
  const data::ChatTemplate chat = rl::resolve_rl_chat_template(cfg, path);
  std::printf("chat template: %s\n", chat.name().c_str());
  std::vector<rl::RlPrompt> train_rows = rl::load_rl_prompts(cfg.data.train_jsonl_fpath, tok, chat);
  std::vector<rl::RlPrompt> val_rows;
  if (!cfg.data.validation_jsonl_fpath.empty())
    val_rows = rl::load_rl_prompts(cfg.data.validation_jsonl_fpath, tok, chat);

  // The policy on the compute device; in bf16 its bf16 values are what the engine reads and what
  // the optimizer writes back from the fp32 masters: one copy of the weights, no refit.
  rl::GrpoTrainerOptions opts;
  opts.groups = make_process_groups(layout, dev.backend);
  if (own_generator) {
    std::fputs(gen_line.c_str(), stdout);
    opts.generator_groups = make_process_groups(gen_layout, dev.backend);
  }
  // Sharded gradients (FSDP optim_grads and above): no whole gradient at construction (the
  // optimizer lays them out from shapes; train/grad_slots.h).
  model::HybridModel net(cfg.model, *dev.backend, dev.dtype, model_shard(*opts.groups), /*trainable=*/true,
                         /*defer_grads=*/cfg.optimizer.fsdp != train::Fsdp::off);
  net.init(cfg.grpo.grpo.seed);
  // bf16 weights: fp32 masters, made by the optimizer (only the rank's slices of them under the
  // distributed optimizer and FSDP; the checkpoint load fills them).
  net.params().defer_masters();
  std::printf("device: %s\n", dev.describe().c_str());
  opts.start = start;
  opts.stop_requested = &StopSignals::requested;
  opts.save_hook = test_crash_hook();
  opts.tokenizer_dir = tokenizer_dir_of(cfg.tokenizer_path);
  if (k.enabled) {
    std::vector<std::string> inputs{fs::path(cfg.data.train_jsonl_fpath).parent_path().string()};
    if (!cfg.model_name.empty()) inputs.push_back(cfg.model_name);
    const std::string save_dir = k.checkpoint_dir;
    opts.on_saved = [save_dir, inputs](const std::string& dir, int64_t step, const std::string& yaml) {
      publish_model_artifact(save_dir, dir, step, yaml, inputs);
    };
  }
  rl::GrpoTrainer trainer(cfg, net, tok, std::move(train_rows), std::move(val_rows), opts);
  trainer.restore();  // reads only
  // checkpointing.checkpoint_dir belongs to one run at a time (train/run_dir.h), as for the other
  // stages: a rerun resumes it (load = save), a live run holding it is refused.
  train::CheckpointSection run_dir;
  if (k.enabled) run_dir.save = run_dir.load = k.checkpoint_dir;
  // Several ranks: the first checks and holds the directory (the others write nothing there).
  train::RunDirLock lock;
  if (launch_info().rank == 0) {
    const char* key = "checkpointing.checkpoint_dir";
    lock = train::lock_run_dir(run_dir, train::check_run_dir(run_dir, key), command_line(o), key);
  }
  for (const std::string& note : lock.notes()) std::printf("%s\n", note.c_str());
  if (!k.enabled) std::printf("warning: checkpointing.enabled is false: this run saves no checkpoint\n");
  const StopSignals signals;
  const rl::GrpoRunResult res = trainer.run();
  return res.stop_reason.empty() ? 0 : StopSignals::signal_number();
}

}  // namespace

void add_rl_commands(CLI::App& app) {
  add_training_command(app, "rl",
                       "GRPO (stage 2) on `data prep rl` rows from the SFT checkpoint: generation and training on "
                       "the same weights in one process (no refit), checkpoints, exact resume",
                       run_rl);
}

}  // namespace nemotron::cli
