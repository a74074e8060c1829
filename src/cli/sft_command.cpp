// `nemotron <family> sft [-c tiny|default|PATH] [--dry-run] [key=value ...]`: stage 1, supervised
// fine-tuning on the packed chat rows of `data prep sft` (recipes/<family>/sft/NAME.yaml, found as
// pretrain finds its recipes). The weights come from checkpoint.pretrained_checkpoint (stage 0's
// output; its model config must equal the recipe's) unless checkpoint.load holds this run's own
// checkpoint (exact resume). The loop, logs, metrics.jsonl, checkpoints, run-directory lock and
// signals are the pretraining trainer's; what differs is the data (packed rows with their
// sequence layout and assistant-only loss mask) and the proof of learning printed before the
// first step and at the end: the share of answer tokens of the held-out chat prompts
// (dataset_root/heldout/*.jsonl) predicted right under teacher forcing. Bad input is one line
// and exit 2, before anything is written.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cli/artifact_refs.h"
#include "cli/commands.h"
#include "cli/distributed.h"
#include "cli/eval_generation.h"
#include "cli/recipe_paths.h"
#include "cli/training_command.h"
#include "core/config_tree.h"
#include "core/error.h"
#include "core/json_limits.h"
#include "data/chat_template.h"
#include "data/jsonl.h"
#include "data/tokenizer.h"
#include "model/hybrid_model.h"
#include "model/lora.h"
#include "train/checkpoint.h"
#include "train/compute_device.h"
#include "train/sft_config.h"
#include "train/sft_data_source.h"
#include "train/teacher_forcing.h"
#include "train/trainer.h"

namespace nemotron::cli {

namespace {

// The tokenizer data prep recorded (metadata.json: tokenizer_uri), or "".
std::string prep_tokenizer(const train::SftConfig& cfg) {
  std::ifstream in(cfg.dataset.metadata_path());
  const nlohmann::json meta = parse_json_or_discarded<nlohmann::json>(in);
  return meta.is_object() ? meta.value("tokenizer_uri", "") : "";
}

namespace fs = std::filesystem;


// The held-out prompts data prep wrote (metadata.json: "heldout", tokenizer_uri, chat_template),
// or none (a dataset without them: the accuracies are not printed). Each row: the user turn
// ("messages"), its reference solution ("reference") and final answer ("answer").
struct Heldout {
  std::vector<train::TeacherForcedExample> teacher_forced;
  std::vector<eval::EvalItem> prompts;  // context: the rendered prompt; answer: the final answer
  std::optional<data::Tokenizer> tok;
};

Heldout heldout_examples(const train::SftConfig& cfg) {
  Heldout h;
  const std::string meta_path = cfg.dataset.metadata_path();
  std::ifstream in(meta_path);
  const nlohmann::json meta = parse_json_or_discarded<nlohmann::json>(in);
  if (meta.is_discarded() || !meta.contains("heldout") || !meta["heldout"].is_object() || meta["heldout"].empty())
    return h;
  const std::string tok_path = meta.value("tokenizer_uri", "");
  const std::string spec = meta.value("chat_template", "");
  if (tok_path.empty() || spec.empty()) return h;
  // The template the data was rendered with: a built-in, or a Jinja file that may have moved since.
  data::ChatTemplate chat;
  try {
    chat = data::ChatTemplate::load(spec, tok_path);
  } catch (const std::exception& e) {
    std::printf("note: held-out accuracy skipped: the data's chat template does not load: %s\n", e.what());
    return h;
  }
  h.tok = data::Tokenizer::load(tok_path);
  for (const auto& [name, rel] : meta["heldout"].items()) {
    if (!rel.is_string()) continue;
    const std::string file = (fs::path(cfg.dataset.dataset_root) / rel.get<std::string>()).string();
    int64_t skipped = 0;
    auto ex = train::load_teacher_forced_examples(file, *h.tok, chat, cfg.dataset.seq_length, &skipped);
    h.teacher_forced.insert(h.teacher_forced.end(), ex.begin(), ex.end());
    data::JsonlReader reader(file);
    data::OrderedJson row;
    while (reader.next_row(row)) {  // rows load_teacher_forced_examples accepted: messages are valid
      const auto answer = row.find("answer");
      if (answer == row.end() || !answer->is_string()) continue;
      eval::EvalItem it;
      it.context = data::render_prompt(chat, row["messages"], nullptr);
      it.answer = answer->get<std::string>();
      h.prompts.push_back(std::move(it));
    }
  }
  return h;
}

void print_accuracy(const char* when, const train::TeacherForcedAccuracy& a) {
  std::printf("held-out answers, teacher-forced, %s: %.1f%% of %lld answer tokens right (%lld prompts)\n", when,
              100.0 * a.share(), static_cast<long long>(a.answer_tokens), static_cast<long long>(a.examples));
  std::fflush(stdout);
}

// Returns the signal that stopped the run (0 when it ran to its end).
int run_sft(const TrainingCommandOptions& o) {
  const std::string path = resolve_recipe(o.family, "sft", o.config);
  train::SftConfig cfg = train::load_sft_config(path, o.overrides, artifact_ref_resolver());
  const parallel::RankLayout layout = training_layout(o, path, cfg, cfg.model, cfg.dataset.seq_length);
  if (o.dry_run) {
    if (!o.quiet) {
      std::fputs(train::sft_dry_run_text(cfg, path, o.overrides.size()).c_str(), stdout);
      std::fputs(layout_plan_text(o, layout, cfg, cfg.model,
                                  cfg.peft ? model::lora_param_count(cfg.model, *cfg.peft, layout.tensor()) : -1)
                     .c_str(),
                 stdout);
    }
    return 0;
  }
  if (layout.world() > 1) std::fputs(layout_text(layout, cfg.model).c_str(), stdout);
  const train::CheckpointSection& k = cfg.checkpoint;
  train::SftDataSources data = train::make_sft_data_sources(cfg);  // opens and checks the shards
  // The pretrained weights are used when checkpoint.load has nothing of this run to resume.
  const bool resumes = !k.load.empty() && train::has_checkpoint(k.load);
  if (!resumes && !k.pretrained_checkpoint.empty()) {
    std::error_code ec;
    if (!fs::exists(k.pretrained_checkpoint, ec))
      throw InputError(fmt::format("{}: checkpoint.pretrained_checkpoint: {} does not exist; pretrain first (`nemotron "
                                   "{} pretrain -c {}`) or point it at a checkpoint",
                                   path, k.pretrained_checkpoint, o.family, o.config));
    train::check_checkpoint_model(train::resolve_checkpoint_dir(k.pretrained_checkpoint, true), cfg.model, path);
  } else if (!resumes && k.load.empty()) {
    std::printf("warning: neither checkpoint.pretrained_checkpoint nor checkpoint.load is set: fine-tuning randomly "
                "initialised weights\n");
  }
  const Heldout heldout = heldout_examples(cfg);
  train::ComputeDevice dev = train::open_compute_device(cfg);
  std::shared_ptr<const parallel::ProcessGroups> groups = make_process_groups(layout, dev.backend);
  // Sharded gradients (FSDP optim_grads and above): no whole gradient at construction; the
  // optimizer lays them out from shapes, one layer's at a time existing whole (train/grad_slots.h).
  model::HybridModel net(cfg.model, *dev.backend, dev.dtype, model_shard(*groups), /*trainable=*/true,
                         /*defer_grads=*/cfg.ddp.shards_grads());
  net.init(cfg.seed);
  // LoRA: adapters on the targeted projections, every base weight frozen (before the masters
  // and the optimizer exist, so neither holds anything for the base).
  if (cfg.peft) model::attach_lora(net.params(), *cfg.peft, cfg.seed, path);  // split like their weights
  net.params().defer_masters();  // float32 masters: the optimizer makes them (sharded: only its slices)
  train::TrainerOptions topts =
      trainer_options(k.save, {cfg.dataset.dataset_root, resumes ? "" : k.pretrained_checkpoint});
  topts.groups = groups;
  topts.tokenizer_dir = tokenizer_dir_of(prep_tokenizer(cfg));
  train::Trainer trainer(cfg, net, *data.train, data.valid.get(), std::move(topts));
  // Exact match: greedy completions through the generation engine, right when their last
  // "The answer is N." has the reference N (eval's final_answer verifier).
  eval::TaskSpec gen_task;
  gen_task.name = "heldout";
  gen_task.chat = true;
  gen_task.max_new_tokens = 256;
  auto accuracy = [&] {
    if (heldout.teacher_forced.empty()) return;
    // Full parameter sharding: the layers' weights exist whole only inside the training step's
    // collectives (train/param_gather.h), which these per-rank forwards do not take part in.
    if (cfg.ddp.shards_params() && layout.data() > 1) {
      std::printf("held-out accuracy: skipped under full parameter sharding (score the checkpoint with `nemotron eval`)\n");
      return;
    }
    const std::string when = fmt::format("at iteration {}", trainer.iteration());
    print_accuracy(when.c_str(),
                   train::teacher_forced_accuracy(net, heldout.teacher_forced, cfg.dataset.seq_length, data.pad_id,
                                                  groups.get()));
    if (heldout.prompts.empty()) return;
    // Each rank's engine decodes on its own schedule, while an expert-parallel forward needs every
    // rank of the expert group at once.
    if (layout.expert() > 1 || layout.tensor() > 1) {
      std::printf("held-out answers, generated: skipped under %s parallelism (the engine runs on one rank's "
                  "part of the model; score the checkpoint with `nemotron eval`)\n",
                  layout.expert() > 1 ? "expert" : "tensor");
      return;
    }
    const eval::TaskResult r =
        eval::score_generation(make_generate_fn(net, *heldout.tok, gen_task, cfg.dataset.seq_length),
                               answer_verifier("final_answer"), "heldout", heldout.prompts, nullptr, eval::FewShot{}, 1);
    std::printf("held-out answers, generated (greedy), %s: %.1f%% exactly right (%lld prompts, %.1f s)\n", when.c_str(),
                100.0 * r.metrics[0].value, static_cast<long long>(r.items), r.seconds);
    std::fflush(stdout);
  };
  train::TrainResult res;
  const int sig = run_training(trainer, cfg.checkpoint, command_line(o), res, accuracy);
  accuracy();
  return sig;
}

}  // namespace

void add_sft_commands(CLI::App& app) {
  add_training_command(
      app, "sft", "Supervised fine-tuning (stage 1) on packed chat rows from `data prep sft`: checkpoints, exact resume",
      run_sft);
}

}  // namespace nemotron::cli
