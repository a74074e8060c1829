#include "train/sft_config.h"

#include <fmt/format.h>

#include "core/config_tree.h"
#include "core/error.h"
#include "train/plan.h"

namespace nemotron::train {

using nlohmann::json;

namespace {

void read_dataset(ConfigReader& root, SftConfig& c) {
  ConfigReader& d = root.section("dataset");
  SftDatasetSection& s = c.dataset;
  if (!d.has("dataset_root"))
    d.fail("dataset_root", "missing (the output_dir of `data prep sft`: splits/train, splits/valid, metadata.json)");
  s.dataset_root = d.get_string("dataset_root", "");
  if (!d.has("seq_length")) d.fail("seq_length", "missing (tokens per packed row: the data's pack_size)");
  s.seq_length = d.get_positive_int("seq_length", 0);
  if (s.seq_length < 2) d.fail("seq_length", fmt::format("expected an integer >= 2, got {}", s.seq_length));
  if (d.has("packed_sequence_specs")) {
    ConfigReader& p = d.section("packed_sequence_specs");
    const int64_t size = p.get_positive_int("packed_sequence_size", s.seq_length);
    if (size != s.seq_length)
      p.fail("packed_sequence_size", fmt::format("{} differs from dataset.seq_length {} (a packed row is one "
                                                 "sequence of the model: give them the same value)",
                                                 size, s.seq_length));
  }
  s.seed = static_cast<uint64_t>(d.get_nonnegative_int("seed", 1234));
  if (s.seq_length > c.model.max_position_embeddings)
    d.fail("seq_length", fmt::format("{} exceeds model.max_position_embeddings {}", s.seq_length,
                                     c.model.max_position_embeddings));
}

}  // namespace

SftConfig read_sft_config(const json& tree, const std::string& source) {
  SftConfig c;
  c.source = source;
  c.tree = tree;
  c.stage_name = "sft";
  ConfigReader root(c.tree, source);
  root.ignore("run");
  root.ignore("recipe");
  if (!root.has("model")) root.fail("model", "missing (a recipe holds the model's shape in its model: section)");
  c.model = model::read_model_config(root.section("model"));
  read_train_loop_config(root, c);
  read_dataset(root, c);
  c.seq_length = c.dataset.seq_length;
  c.data_seed = c.dataset.seed;
  root.check_unknown_keys();
  model::validate(c.model, source, "model");
  return c;
}

SftConfig load_sft_config(const std::string& path, const std::vector<std::string>& overrides,
                          const ConfigTreeHook& resolve) {
  json tree = load_config_file(path);
  if (!tree.is_object() && !tree.is_null()) throw_config_error(path, "", "expected a mapping of sections");
  apply_overrides(tree, overrides, path);
  if (resolve) resolve(tree, path);
  return read_sft_config(tree, path);
}

std::string sft_dry_run_text(const SftConfig& cfg, const std::string& recipe, size_t overrides) {
  const std::string data =
      fmt::format("data: packed SFT rows of {} (splits/train, splits/valid), {} tokens per row, seed {}",
                  cfg.dataset.dataset_root, cfg.dataset.seq_length, cfg.dataset.seed);
  return dry_run_text(cfg, cfg.model, data,
                      estimate_memory(cfg.model, cfg.train.micro_batch_size, cfg.dataset.seq_length), recipe,
                      overrides);
}

}  // namespace nemotron::train
