// `nemotron <family> pretrain [-c tiny|default|PATH] [--dry-run] [key=value ...]`: stage 0 of the
// pipeline for the super3 and nano3 recipe families. `-c NAME` picks
// recipes/<family>/pretrain/NAME.yaml (found under $NEMOTRON_RECIPES, ./recipes, or the recipes
// folder beside the binary's build or install tree); anything with a '/' or a .yaml/.yml suffix
// is a path. Data: .bin/.idx files by dataset.blend or a per-split blend.json (what `data prep
// pretrain` writes), or dataset.mock. --dry-run prints the resolved config, model size, plan and
// memory and runs nothing. Bad input (config, overrides, missing data, a checkpoint of another
// shape, a checkpoint.save that holds another run or is in use) is one line and exit 2, before
// anything is written. SIGTERM/SIGINT save at the next step boundary and exit (cli/stop_signals.h).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "cli/artifact_refs.h"
#include "cli/commands.h"
#include "cli/distributed.h"
#include "cli/host_memory.h"
#include "cli/recipe_paths.h"
#include "cli/training_command.h"
#include "core/config_tree.h"
#include "core/error.h"
#include "core/json_limits.h"
#include "model/hybrid_model.h"
#include "model/model_info.h"
#include "train/compute_device.h"
#include "train/data_sources.h"
#include "train/gpu_plan.h"
#include "train/plan.h"
#include "train/trainer.h"

namespace nemotron::cli {

namespace {


// Data prep records the unigram entropy of the training tokens (metadata.json beside blend.json):
// the loss of a model that ignores context. Learning shows as validation loss far below it.
void print_unigram_baseline(const train::PretrainConfig& cfg, const train::TrainResult& res) {
  if (cfg.dataset.mock || cfg.dataset.per_split_data_args_path.empty() || res.evals.empty()) return;
  const std::filesystem::path meta = std::filesystem::path(cfg.dataset.per_split_data_args_path).parent_path() / "metadata.json";
  std::ifstream in(meta);
  if (!in) return;
  nlohmann::json j = parse_json_or_discarded<nlohmann::json>(in);
  if (j.is_discarded() || !j.contains("unigram_entropy_nats") || !j["unigram_entropy_nats"].is_number()) return;
  const double baseline = j["unigram_entropy_nats"].get<double>(), val = res.evals.back().lm_loss;
  std::printf("validation loss %.4f vs the unigram baseline %.4f nats of the training tokens (%s): %.2f nats %s\n", val,
              baseline, meta.string().c_str(), std::abs(baseline - val), val < baseline ? "below" : "ABOVE");
}

// Returns the signal that stopped the run (0 when it ran to its end).
int run_pretrain(const TrainingCommandOptions& o) {
  const std::string path = resolve_recipe(o.family, "pretrain", o.config);
  train::PretrainConfig cfg = train::load_pretrain_config(path, o.overrides, artifact_ref_resolver());
  const parallel::RankLayout layout = training_layout(o, path, cfg, cfg.model, cfg.dataset.seq_length);
  if (o.dry_run) {
    if (!o.quiet) {
      std::fputs(train::dry_run_text(cfg, path, o.overrides.size()).c_str(), stdout);
      std::fputs(layout_plan_text(o, layout, cfg, cfg.model).c_str(), stdout);
    }
    return 0;
  }
  if (layout.world() > 1) std::fputs(layout_text(layout, cfg.model).c_str(), stdout);
  if (const std::string why = train::host_memory_shortfall(cfg, physical_memory_bytes()); !why.empty())
    throw InputError(path + ": " + why);
  const train::DatasetSection& d = cfg.dataset;
  std::error_code ec;
  if (!d.mock && !d.per_split_data_args_path.empty() && !std::filesystem::exists(d.per_split_data_args_path, ec))
    throw InputError(
        fmt::format("{}: dataset.per_split_data_args_path: {} does not exist; write it with `nemotron {} "
                    "data prep pretrain -c {}`, or train on synthetic tokens with dataset.mock=true",
                    path, d.per_split_data_args_path, o.family, o.config));
  train::DataSources data = train::make_data_sources(cfg);  // opens the files, builds the indices
  if (cfg.train.eval_iters > 0 && !data.valid)
    std::printf("note: the data has no validation split; train.eval_iters is ignored\n");
  train::ComputeDevice dev = train::open_compute_device(cfg);
  // The planner before the weights exist: a model that cannot fit is one line, not an allocation
  // failure minutes in.
  // Per GPU of this layout: tensor- and expert-parallel ranks hold their part of the model.
  if (const std::string why = train::gpu_memory_shortfall(train::gpu_plan_input(cfg, cfg.model, layout.world()),
                                                          static_cast<double>(dev.backend->available_bytes()));
      !why.empty())
    throw InputError(fmt::format("{}: {}: {}", path, dev.backend->name(), why));
  std::shared_ptr<const parallel::ProcessGroups> groups = make_process_groups(layout, dev.backend);
  // Sharded gradients (FSDP optim_grads and above): no whole gradient at construction; the
  // optimizer lays them out from shapes, one layer's at a time existing whole (train/grad_slots.h).
  model::HybridModel net(cfg.model, *dev.backend, dev.dtype, model_shard(*groups), /*trainable=*/true,
                         /*defer_grads=*/cfg.ddp.shards_grads());
  net.init(cfg.seed);
  // bf16 weights: float32 masters, made by the optimizer (only the rank's slices of them under the
  // distributed optimizer and FSDP; a checkpoint load fills them).
  net.params().defer_masters();
  // The model artifact's input: the data prep output holding the blend (none for mock tokens).
  std::vector<std::string> inputs;
  if (!d.mock && !d.per_split_data_args_path.empty()) inputs.push_back(d.per_split_data_args_path);
  train::TrainerOptions topts = trainer_options(cfg.checkpoint.save, inputs);
  // Data prep writes the tokenizer beside the blend (<output_dir>/tokenizer/tokenizer.json).
  if (!d.mock && !d.per_split_data_args_path.empty())
    topts.tokenizer_dir = tokenizer_dir_of(
        (std::filesystem::path(d.per_split_data_args_path).parent_path() / "tokenizer" / "tokenizer.json").string());
  topts.groups = groups;
  train::Trainer trainer(cfg, net, *data.train, data.valid.get(), std::move(topts));
  train::TrainResult res;
  const int sig = run_training(trainer, cfg.checkpoint, command_line(o), res);
  print_unigram_baseline(cfg, res);
  return sig;
}

}  // namespace

void add_pretrain_commands(CLI::App& app) {
  add_training_command(app, "pretrain", "Pretrain the model (stage 0): mock or prepared data, checkpoints, exact resume",
                       run_pretrain);
}

}  // namespace nemotron::cli
