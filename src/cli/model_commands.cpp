// `nemotron model ...`: inspect model configurations. `model info` reads a recipe (its `model:`
// section) or a Hugging Face config.json and prints the layer table, parameter totals and FLOPs
// per token from the config alone, without allocating the model.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "core/config_tree.h"
#include "model/model_config.h"
#include "model/model_info.h"

namespace nemotron::cli {

namespace {

struct InfoOptions {
  std::string config;
  int64_t seq_len = 0;  // 0 = min(4096, max_position_embeddings)
  bool json = false;
  std::vector<std::string> overrides;
};

void run_model_info(const InfoOptions& o) {
  model::ModelConfig cfg = model::load_model_config(o.config, o.overrides);
  int64_t seq_len = o.seq_len > 0 ? o.seq_len : std::min<int64_t>(4096, cfg.max_position_embeddings);
  model::ModelInfo info = model::model_info(cfg, seq_len);
  if (o.json) {
    std::printf("%s\n", model::model_info_json(cfg, info, o.config).dump(2).c_str());
  } else {
    std::fputs(model::model_info_text(cfg, info, o.config).c_str(), stdout);
  }
}

}  // namespace

void add_model_commands(CLI::App& app) {
  CLI::App* model = app.add_subcommand("model", "Inspect model configurations (recipes and Hugging Face config.json)");
  model->require_subcommand(1);
  add_model_demo_command(*model);

  auto opts = std::make_shared<InfoOptions>();
  CLI::App* info = model->add_subcommand(
      "info", "Layer table, parameter counts and FLOPs per token of a model config (nothing is allocated)");
  info->add_option("-c,--config", opts->config,
                   "Recipe YAML (its model: section) or Hugging Face config.json")
      ->required();
  info->add_option("--seq-len", opts->seq_len,
                   "Sequence length T for the FLOPs estimate (default: min(4096, max_position_embeddings))")
      ->check(CLI::Validator(
          [](std::string& arg) {
            char* end = nullptr;
            long long v = std::strtoll(arg.c_str(), &end, 10);
            bool ok = end != arg.c_str() && *end == '\0' && v > 0;
            return ok ? std::string() : "expected a positive integer, got " + arg;
          },
          "POSITIVE"));
  info->add_flag("--json", opts->json, "Print JSON (exact integers) instead of text");
  info->add_option("overrides", opts->overrides,
                   "key=value overrides of the file's values (model.hidden_size=128 for a recipe, "
                   "hidden_size=128 for a config.json)")
      ->check(CLI::Validator(
          [](std::string& arg) { return is_override(arg) ? std::string() : "expected key=value, got " + arg; },
          "KEY=VALUE"));
  info->callback([opts] { run_model_info(*opts); });
}

}  // namespace nemotron::cli
