// The pretraining stage's configuration: a recipe YAML (recipes/<family>/pretrain/*.yaml) with
// Megatron-Bridge section and key names (reference/pipeline-and-rl.md §6.1) read into typed
// structs: the training loop's shared sections (train_loop_config.h) plus model: and dataset:.
// Every key is read through ConfigReader, so a key nobody reads is an error suggesting the
// nearest valid one, a wrong type names the key, the expected type and the value, and
// validate() names the dotted key (and both sides of a conflict).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "train/train_loop_config.h"

namespace nemotron::train {

struct DatasetSection {  // dataset: (alias data:)
  int64_t seq_length = 0;
  bool mock = false;     // true: synthetic tokens, whatever blend / per_split_data_args_path say
  nlohmann::json blend;  // Megatron's [w1, prefix1, w2, prefix2, ...] or prefixes, as given
  bool has_blend() const { return !blend.is_null(); }
  std::string per_split_data_args_path;  // blend.json with train/valid/test blends (not wired yet)
  std::string split;                     // "969,30,1" style, for dataset.blend (unset: 969,30,1)
  uint64_t random_seed = 1234;           // seed of the data streams (mock tokens, sample order)
};

struct PretrainConfig : TrainLoopConfig {
  model::ModelConfig model;
  DatasetSection dataset;
};

// Reads and validates a resolved tree. Unknown keys anywhere are errors; `run:` and `recipe:`
// (launcher sections of the Python stack) are accepted and ignored.
PretrainConfig read_pretrain_config(const nlohmann::json& tree, const std::string& source);
// Loads the YAML file, applies the dotted key=value overrides, reads and validates.
// `resolve`, when given, rewrites the tree after the overrides and before it is read (cli resolves
// ${art:NAME,FIELD} references there: artifacts/art_resolver.h).
PretrainConfig load_pretrain_config(const std::string& path, const std::vector<std::string>& overrides,
                                    const ConfigTreeHook& resolve = {});

}  // namespace nemotron::train
