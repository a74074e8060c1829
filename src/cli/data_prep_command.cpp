// `nemotron <family> data prep pretrain [-c tiny|default|PATH] [--sample N] [--force] [key=value]`:
// the data-prep stage of pretraining (data/pretrain_prep.h): raw text to Megatron .bin/.idx
// shards, a blend.json for the pretrain stage, the tokenizer, and metadata.json.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/recipe_paths.h"
#include "core/config_tree.h"
#include "data/pretrain_prep.h"

namespace nemotron::cli {

namespace {

struct PrepOptions {
  std::string family, config = "default";
  int64_t sample = 0;
  bool force = false;
  std::vector<std::string> overrides;
};

void run_data_prep_pretrain(const PrepOptions& o) {
  const std::string path = resolve_recipe(o.family, "data_prep/pretrain", o.config);
  nlohmann::json tree = load_config_file(path);
  apply_overrides(tree, o.overrides, path);
  ConfigReader r(tree, path);
  data::PretrainPrepConfig cfg = data::PretrainPrepConfig::read(r);
  r.check_unknown_keys();
  std::string sample = o.sample > 0 ? fmt::format(" (sample of {} documents per source)", o.sample) : "";
  std::printf("data prep pretrain: %s -> %s%s\n", path.c_str(), cfg.output_dir.c_str(), sample.c_str());
  std::fflush(stdout);
  auto t0 = std::chrono::steady_clock::now();
  data::PretrainPrepResult res = data::prepare_pretrain_data(cfg, tree.dump(), o.sample, o.force, stderr);
  double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (res.up_to_date) {
    std::printf("up to date: %s (%lld documents, %lld tokens); nothing to do (--force rebuilds)\n",
                res.output_dir.c_str(), static_cast<long long>(res.documents), static_cast<long long>(res.tokens));
    return;
  }
  std::printf("wrote %s: %lld documents (%lld skipped), %lld tokens in %.1f s (%.0f tokens/s)\n", res.output_dir.c_str(),
              static_cast<long long>(res.documents), static_cast<long long>(res.skipped_documents),
              static_cast<long long>(res.tokens), sec, static_cast<double>(res.tokens) / std::max(sec, 1e-9));
  std::printf("  blend:     %s\n  tokenizer: %s\n", res.blend_path.c_str(), res.tokenizer_path.c_str());
  if (res.unigram_entropy_nats > 0)
    std::printf("  unigram entropy of the training tokens: %.3f nats (the loss of a model that ignores context)\n",
                res.unigram_entropy_nats);
}

}  // namespace

void add_data_prep_commands(CLI::App& app) {
  for (const RecipeFamily& f : kRecipeFamilies) {
    CLI::App* family = family_group(app, f.name);
    CLI::App* data = family->add_subcommand("data", "Data preparation for the stages");
    data->require_subcommand(1);
    CLI::App* prep = data->add_subcommand("prep", "Prepare a stage's data");
    prep->require_subcommand(1);
    auto o = std::make_shared<PrepOptions>();
    o->family = f.name;
    CLI::App* cmd = prep->add_subcommand(
        "pretrain", "Tokenize raw text (JSONL, text files or the bundled corpus) into .bin/.idx shards and a blend.json");
    cmd->add_option("-c,--config", o->config,
                    fmt::format("Recipe: a name in recipes/{}/data_prep/pretrain/ (tiny, default) or a YAML path", f.name))
        ->capture_default_str();
    cmd->add_option("--sample", o->sample, "Only the first N documents of each source (output in <output_dir>/sample-N)")
        ->check(CLI::PositiveNumber);
    cmd->add_flag("--force", o->force, "Rebuild even when the output is up to date, and overwrite another output");
    cmd->add_option("overrides", o->overrides, "key=value overrides with dotted keys (num_shards=8)")
        ->check(CLI::Validator(
            [](std::string& arg) { return is_override(arg) ? std::string() : "expected key=value, got " + arg; },
            "KEY=VALUE"));
    cmd->callback([o] { run_data_prep_pretrain(*o); });
  }
}

}  // namespace nemotron::cli
