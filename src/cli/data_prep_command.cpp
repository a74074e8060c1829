// `nemotron <family> data prep pretrain|sft|rl [-c tiny|default|PATH] [--sample N] [--force] [key=value]`:
// the data-prep stages of pretraining (data/pretrain_prep.h: raw text to Megatron .bin/.idx
// shards, a blend.json, the tokenizer, metadata.json), of SFT (data/sft_prep.h: chat rows to
// packed Parquet shards with the assistant-only loss mask, split directories, blend.json) and of
// RL (data/rl_prep.h: prompts to NeMo Gym rows in train/val JSONL with a manifest.json).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <utility>

#include <fmt/format.h>

#include "cli/artifact_publish.h"
#include "cli/commands.h"
#include "cli/recipe_paths.h"
#include "core/config_tree.h"
#include "data/pretrain_prep.h"
#include "data/rl_prep.h"
#include "data/sft_prep.h"

namespace nemotron::cli {

namespace {

struct PrepOptions {
  std::string family, config = "default";
  int64_t sample = 0;
  bool force = false;
  std::vector<std::string> overrides;
};

// A stage's recipe as the run reads it: the file, its tree with the overrides applied (what the
// output is made from), and the stage's config read from it (unknown keys refused).
template <class Config>
struct PrepRecipe {
  std::string path;
  nlohmann::json tree;
  Config cfg;
};

template <class Config>
PrepRecipe<Config> read_prep_recipe(const PrepOptions& o, const std::string& stage) {
  PrepRecipe<Config> p;
  p.path = resolve_recipe(o.family, "data_prep/" + stage, o.config);
  p.tree = load_config_file(p.path);
  apply_overrides(p.tree, o.overrides, p.path);
  ConfigReader r(p.tree, p.path);
  p.cfg = Config::read(r);
  r.check_unknown_keys();
  return p;
}

// Of sft and rl: `sample: N` / `force: true` (Nemotron's spelling) do what the flags do; the flag
// wins. Neither is part of what the output is made from (sample picks its own folder), so both
// leave the tree.
template <class Config>
std::pair<int64_t, bool> take_sample_and_force(const PrepOptions& o, PrepRecipe<Config>& p) {
  p.tree.erase("sample"), p.tree.erase("force");
  return {o.sample > 0 ? o.sample : p.cfg.sample, o.force || p.cfg.force};
}

void run_data_prep_pretrain(const PrepOptions& o) {
  auto [path, tree, cfg] = read_prep_recipe<data::PretrainPrepConfig>(o, "pretrain");
  std::string sample = o.sample > 0 ? fmt::format(" (sample of {} documents per source)", o.sample) : "";
  std::printf("data prep pretrain: %s -> %s%s\n", path.c_str(), cfg.output_dir.c_str(), sample.c_str());
  std::fflush(stdout);
  auto t0 = std::chrono::steady_clock::now();
  data::PretrainPrepResult res = data::prepare_pretrain_data(cfg, tree.dump(), o.sample, o.force, stderr);
  double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (res.up_to_date) {
    std::printf("up to date: %s (%lld documents, %lld tokens); nothing to do (--force rebuilds)\n",
                res.output_dir.c_str(), static_cast<long long>(res.documents), static_cast<long long>(res.tokens));
    publish_data_artifact(res.output_dir, {});  // no new version unless the store lacks it
    return;
  }
  std::printf("wrote %s: %lld documents (%lld skipped), %lld tokens in %.1f s (%.0f tokens/s)\n", res.output_dir.c_str(),
              static_cast<long long>(res.documents), static_cast<long long>(res.skipped_documents),
              static_cast<long long>(res.tokens), sec, static_cast<double>(res.tokens) / std::max(sec, 1e-9));
  std::printf("  blend:     %s\n  tokenizer: %s\n", res.blend_path.c_str(), res.tokenizer_path.c_str());
  if (res.unigram_entropy_nats > 0)
    std::printf("  unigram entropy of the training tokens: %.3f nats (the loss of a model that ignores context)\n",
                res.unigram_entropy_nats);
  publish_data_artifact(res.output_dir, {});
}

void run_data_prep_sft(const PrepOptions& o) {
  PrepRecipe<data::SftPrepConfig> recipe = read_prep_recipe<data::SftPrepConfig>(o, "sft");
  const auto [rows, force] = take_sample_and_force(o, recipe);
  const auto& [path, tree, cfg] = recipe;
  std::string sample = rows > 0 ? fmt::format(" (sample of {} rows per source)", rows) : "";
  std::printf("data prep sft: %s -> %s%s\n", path.c_str(), cfg.output_dir.c_str(), sample.c_str());
  std::fflush(stdout);
  auto t0 = std::chrono::steady_clock::now();
  data::SftPrepResult res = data::prepare_sft_data(cfg, tree.dump(), rows, force, stderr);
  double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (res.up_to_date) {
    std::printf("up to date: %s (%lld rows, %lld sequences in %lld bins, packing efficiency %.1f%%); nothing to do "
                "(--force rebuilds)\n",
                res.output_dir.c_str(), static_cast<long long>(res.rows_in), static_cast<long long>(res.sequences),
                static_cast<long long>(res.bins), 100 * res.packing_efficiency);
    publish_data_artifact(res.output_dir, {cfg.tokenizer});
    return;
  }
  std::printf("wrote %s: %lld rows (%lld dropped), %lld sequences, %lld tokens (%lld trained) in %.1f s (%.0f rows/s, "
              "%.0f tokens/s)\n",
              res.output_dir.c_str(), static_cast<long long>(res.rows_in), static_cast<long long>(res.rows_dropped),
              static_cast<long long>(res.sequences), static_cast<long long>(res.tokens),
              static_cast<long long>(res.trained_tokens), sec, static_cast<double>(res.rows_in) / std::max(sec, 1e-9),
              static_cast<double>(res.tokens) / std::max(sec, 1e-9));
  std::printf("  packing:   %s, %lld bins of %lld tokens, %.2f sequences per bin, efficiency %.1f%%\n",
              data::packing_algorithm_name(cfg.algorithm), static_cast<long long>(res.bins),
              static_cast<long long>(cfg.pack_size),
              static_cast<double>(res.sequences) / static_cast<double>(std::max<int64_t>(res.bins, 1)),
              100 * res.packing_efficiency);
  const char* names[3] = {"train", "valid", "test"};
  for (int s = 0; s < 3; ++s)
    std::printf("  %-10s %lld shards, %lld bins, %lld tokens\n", (std::string(names[s]) + ":").c_str(),
                static_cast<long long>(res.splits[s].shards), static_cast<long long>(res.splits[s].bins),
                static_cast<long long>(res.splits[s].tokens));
  std::printf("  splits:    %s\n  blend:     %s\n", res.splits_dir.c_str(), res.blend_path.c_str());
  publish_data_artifact(res.output_dir, {cfg.tokenizer});
}

void run_data_prep_rl(const PrepOptions& o) {
  PrepRecipe<data::RlPrepConfig> recipe = read_prep_recipe<data::RlPrepConfig>(o, "rl");
  const auto [rows, force] = take_sample_and_force(o, recipe);
  const auto& [path, tree, cfg] = recipe;
  std::string sample = rows > 0 ? fmt::format(" (sample of {} rows per source)", rows) : "";
  std::printf("data prep rl: %s -> %s%s\n", path.c_str(), cfg.output_dir.c_str(), sample.c_str());
  std::fflush(stdout);
  auto t0 = std::chrono::steady_clock::now();
  data::RlPrepResult res = data::prepare_rl_data(cfg, tree.dump(), rows, force, stderr);
  double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (res.up_to_date) {
    std::printf("up to date: %s (%lld rows: %lld train, %lld val); nothing to do (--force rebuilds)\n",
                res.output_dir.c_str(), static_cast<long long>(res.train + res.val), static_cast<long long>(res.train),
                static_cast<long long>(res.val));
    publish_data_artifact(res.output_dir, {});
    return;
  }
  std::printf("wrote %s: %lld rows (%lld dropped) -> %lld train, %lld val in %.1f s\n", res.output_dir.c_str(),
              static_cast<long long>(res.rows_in), static_cast<long long>(res.rows_dropped),
              static_cast<long long>(res.train), static_cast<long long>(res.val), sec);
  for (const data::RlSourceStats& s : res.sources)
    std::printf("  %-16s %lld rows, %lld dropped, %lld train, %lld val\n", (s.name + ":").c_str(),
                static_cast<long long>(s.rows_in), static_cast<long long>(s.rows_dropped), static_cast<long long>(s.train),
                static_cast<long long>(s.val));
  std::printf("  manifest:  %s\n", res.manifest_path.c_str());
  publish_data_artifact(res.output_dir, {});
}

// `nemotron <family> data prep <stage>`: the recipe (-c), --sample N (the first N `items` of each
// source), --force and key=value overrides (`example` in the help), then `run`.
void add_prep_command(CLI::App* prep, const std::string& family, const std::string& stage, const std::string& about,
                      const std::string& items, const std::string& example, void (*run)(const PrepOptions&)) {
  auto o = std::make_shared<PrepOptions>();
  o->family = family;
  CLI::App* cmd = prep->add_subcommand(stage, about);
  cmd->add_option("-c,--config", o->config,
                  fmt::format("Recipe: a name in recipes/{}/data_prep/{}/ (tiny, default) or a YAML path", family, stage))
      ->capture_default_str();
  cmd->add_option("--sample", o->sample,
                  fmt::format("Only the first N {} of each source (output in <output_dir>/sample-N)", items))
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--force", o->force, "Rebuild even when the output is up to date, and overwrite another output");
  cmd->add_option("overrides", o->overrides, fmt::format("key=value overrides with dotted keys ({})", example))
      ->check(CLI::Validator(
          [](std::string& arg) { return is_override(arg) ? std::string() : "expected key=value, got " + arg; },
          "KEY=VALUE"));
  cmd->callback([o, run] { run(*o); });
}

}  // namespace

void add_data_prep_commands(CLI::App& app) {
  for (const RecipeFamily& f : kRecipeFamilies) {
    CLI::App* family = family_group(app, f.name);
    CLI::App* data = family->add_subcommand("data", "Data preparation for the stages");
    data->require_subcommand(1);
    CLI::App* prep = data->add_subcommand("prep", "Prepare a stage's data");
    prep->require_subcommand(1);
    add_prep_command(prep, f.name, "pretrain",
                     "Tokenize raw text (JSONL, text files or the bundled corpus) into .bin/.idx shards and a "
                     "blend.json",
                     "documents", "num_shards=8", run_data_prep_pretrain);
    add_prep_command(prep, f.name, "sft",
                     "Template chat rows (JSONL or the bundled chat data), mask all but the assistant turns, pack them "
                     "into Parquet shards with train/valid/test splits and a blend.json",
                     "rows", "pack_size=2048", run_data_prep_sft);
    add_prep_command(prep, f.name, "rl",
                     "Turn RL prompts (NeMo Gym JSONL, plain NeMo RL JSONL or the bundled problems) into NeMo Gym rows "
                     "with train/val splits and a manifest.json",
                     "rows", "val_rows=50", run_data_prep_rl);
  }
}

}  // namespace nemotron::cli
