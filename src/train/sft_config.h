// The SFT stage's configuration (stage 1; reference/pipeline-and-rl.md §4.5, §6): a recipe YAML
// (recipes/<family>/sft/*.yaml) with the training loop's shared sections (train_loop_config.h),
// model: (the pretrained model's shape) and a dataset: section naming the packed Parquet splits
// that `data prep sft` writes:
//   dataset.dataset_root   the data prep's output_dir (Bridge's FinetuningDatasetConfig key):
//                          splits/train, splits/valid, metadata.json (pad id = its eos_token_id,
//                          its pack_size), heldout/*.jsonl
//   dataset.seq_length     tokens per packed row = the data's pack_size
//   dataset.packed_sequence_specs.packed_sequence_size   optional; must equal seq_length
//   dataset.seed           sample order (Bridge's default 1234)
// The weights come from checkpoint.pretrained_checkpoint (stage 0's checkpoint.save) unless
// checkpoint.load holds this run's own checkpoint (resume).
// peft: (Megatron-Bridge's key) turns on LoRA (model/lora.h): `peft: lora` with Bridge's defaults,
// or a mapping {target_modules: [linear_qkv, linear_proj, linear_fc1, linear_fc2, in_proj,
// out_proj], dim, alpha, dropout}; absent, null or `none`: full fine-tuning. Under LoRA the whole
// base is frozen: moe.moe_router_enable_expert_bias is then off (the bias routes as loaded).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "model/lora.h"
#include "model/model_config.h"
#include "train/train_loop_config.h"

namespace nemotron::train {

struct SftDatasetSection {  // dataset:
  std::string dataset_root;
  int64_t seq_length = 0;
  uint64_t seed = 1234;
  std::string train_dir() const { return dataset_root + "/splits/train"; }
  std::string valid_dir() const { return dataset_root + "/splits/valid"; }
  std::string metadata_path() const { return dataset_root + "/metadata.json"; }
};

struct SftConfig : TrainLoopConfig {
  model::ModelConfig model;
  SftDatasetSection dataset;
  std::optional<model::LoraConfig> peft;  // LoRA on, or full fine-tuning
};

// Reads and validates a resolved tree (unknown keys are errors; run: and recipe: are ignored).
SftConfig read_sft_config(const nlohmann::json& tree, const std::string& source);
// Loads the YAML file, applies the dotted key=value overrides, reads and validates.
// `resolve`, when given, rewrites the tree after the overrides and before it is read (cli resolves
// ${art:NAME,FIELD} references there: artifacts/art_resolver.h).
SftConfig load_sft_config(const std::string& path, const std::vector<std::string>& overrides,
                          const ConfigTreeHook& resolve = {});

// What `sft --dry-run` prints: the resolved config, the model's size, the plan, rough memory.
std::string sft_dry_run_text(const SftConfig& cfg, const std::string& recipe, size_t overrides);

}  // namespace nemotron::train
