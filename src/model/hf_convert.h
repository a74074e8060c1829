// Hugging Face checkpoints in and out of our native checkpoint layout, and the round trip that
// proves both directions lossless.
// Native checkpoint (one directory, shared with training): model.safetensors, or
// model-0000i-of-0000n.safetensors + model.safetensors.index.json, with Hub names; config.yaml
// with a `model:` mapping (ModelConfig fields, loadable by load_model_config) and a `source:`
// mapping (where an import came from); optionally tokenizer/. Training adds optimizer.safetensors,
// train_state.json, and in the parent directory latest_checkpointed_iteration.txt naming the
// newest iter_NNNNNNN/.
// Tensors stream shard by shard: only one shard's converted tensors are in memory at a time, and
// tensors kept in their dtype are written straight from the memory-mapped source.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/hf_checkpoint.h"

namespace nemotron::model {

using Progress = std::function<void(const std::string& line)>;

// "5GB" (10^9), "500MB", "20KB", "2GiB" (2^30), "123" (bytes) -> bytes; InputError otherwise.
size_t parse_size(const std::string& text, const std::string& what);

// The iteration directory of a checkpoint path: the path itself when it holds config.yaml, else
// path/iter_NNNNNNN named by path/latest_checkpointed_iteration.txt. InputError when neither.
std::string resolve_checkpoint_dir(const std::string& path);

// config.yaml of a checkpoint: the model: mapping (every ModelConfig field; load_model_config
// reads it back equal) and the source: mapping, written as YAML.
std::string checkpoint_config_yaml(const ModelConfig& cfg, const nlohmann::json& source);

struct ImportOptions {
  std::string hf_dir, out;
  std::string dtype = "keep";  // keep | bf16 | float32
  bool force = false;          // replace the model in a non-empty --out (other files are kept)
  size_t max_shard_bytes = size_t{5} * 1000 * 1000 * 1000;
};
// HF directory -> native checkpoint. With --dtype bf16, e_score_correction_bias stays float32 (as
// transformers keeps it, _keep_in_fp32_modules_strict); with keep, every tensor keeps its dtype.
void import_hf(const ImportOptions& o, const Progress& progress);

struct ExportOptions {
  std::string checkpoint, out;
  bool force = false;
  size_t max_shard_bytes = size_t{5} * 1000 * 1000 * 1000;
};
// Native checkpoint -> a directory transformers' from_pretrained loads: config.json
// (model_config_to_hf_json + dtype + the token ids the import recorded), Hub-layout safetensors
// (sharded with model.safetensors.index.json beyond max_shard_bytes, as transformers writes them),
// tokenizer files from the checkpoint's tokenizer/. A tied model also gets lm_head.weight (a copy
// of the embedding), because transformers' NemotronHForCausalLM does not tie and would otherwise
// start from a random head.
void export_hf(const ExportOptions& o, const Progress& progress);

struct RoundtripRow {
  std::string name, dtype_a, dtype_b, shape_a, shape_b;
  bool same = false;
  std::string problem;  // why not, when !same
};
struct RoundtripReport {
  std::vector<RoundtripRow> rows;  // one per tensor of the original (and any extra in the export)
  std::vector<std::string> notes;  // config, tokenizer files, skipped tensors
  int differences = 0;
  bool lossless() const { return differences == 0; }
};
// Compares two HF directories tensor by tensor (Hub names, dtype, shape, bytes), their model
// configs and their tokenizer files.
RoundtripReport compare_hf_dirs(const std::string& original, const std::string& exported);
// Import into work/checkpoint, export into work/hf, compare with the original.
RoundtripReport roundtrip(const std::string& hf_dir, const std::string& work, const Progress& progress);
// The verdict table: tensors grouped by name with layer/expert numbers as '*'.
std::string roundtrip_table(const RoundtripReport& r);

}  // namespace nemotron::model
