// Reading Hugging Face `nemotron_h` checkpoints (reference/architectures.md A.1.2): config.json
// plus safetensors in either weight layout, resolved to Hub names, the names our ParamStore uses.
//   Hub layout (what the Hub and transformers' save_pretrained hold): backbone.*, lm_head.weight,
//     per-expert backbone.layers.{i}.mixer.experts.{e}.{up,down}_proj.weight; the embedding may be
//     spelled backbone.embedding.weight.
//   Fused layout (transformers' in-memory state dict): model.* instead of backbone.*,
//     model.embeddings.weight, and per MoE layer two 3-D tensors mixer.experts.up_proj [E, F, d]
//     and mixer.experts.down_proj [E, d, F] whose slice e is expert e's Hub tensor.
// Every tensor is checked against the shapes the config implies before anything is read; mtp.*
// tensors (multi-token prediction, A.8.2) are part of the model when the config has MTP
// (num_nextn_predict_layers > 0), else set aside and reported. Tensors stay in
// the memory-mapped files: a tensor here is a byte range, converted only when asked.
#pragma once
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/model_config.h"
#include "model/param.h"

namespace nemotron::model {

// One tensor of the model `cfg` describes, by Hub name.
struct TensorSpec {
  std::string name;
  Shape shape;
  bool trainable = true;  // false for buffers (the MoE router's e_score_correction_bias)
};

// Every tensor of the model, in the order HybridModel registers them, taken from the model code
// itself (the blocks register on a backend that allocates nothing), so it cannot drift from it.
std::vector<TensorSpec> tensor_specs(const ModelConfig& cfg);

enum class HfLayout { hub, fused };
const char* hf_layout_name(HfLayout layout);  // "hub", "fused"

// A checkpoint tensor under its Hub name: where its bytes are and what they hold.
struct HfTensor {
  std::string name;       // Hub name (backbone.*, lm_head.weight)
  std::string stored_as;  // name in the file (differs for the fused layout and legacy spellings)
  int64_t expert = -1;    // slice of a fused [E, ...] tensor, or -1
  std::string file;       // the shard holding it
  io::StDtype dtype = io::StDtype::F32;
  Shape shape;  // the Hub shape
  std::span<const uint8_t> bytes;
};

class HfCheckpoint {
 public:
  // DIR/config.json (hybrid_override_pattern or layers_block_type, legacy names) and DIR's
  // safetensors (model.safetensors or model.safetensors.index.json). Throws InputError naming the
  // file and the tensor for: no config.json, no weights, a missing, unexpected, duplicated or
  // misshapen tensor, an integer tensor where weights belong.
  static HfCheckpoint open(const std::string& dir);
  // The weights of `dir` checked against `cfg`, read from `config_name` (a native checkpoint's
  // config.yaml); errors name that file as the source of the expected shapes.
  static HfCheckpoint open_weights(const std::string& dir, const ModelConfig& cfg, const std::string& config_name,
                                   nlohmann::json config_json = nlohmann::json::object());

  const std::string& dir() const { return dir_; }
  const ModelConfig& config() const { return config_; }
  const nlohmann::json& config_json() const { return config_json_; }
  HfLayout layout() const { return layout_; }
  // The model's tensors, in tensor_specs() order.
  const std::vector<HfTensor>& tensors() const { return tensors_; }
  const HfTensor& tensor(const std::string& name) const;
  // Tensors left out, with why (mtp.* tensors of a config without MTP; a tied head stored anyway).
  const std::vector<std::string>& skipped() const { return skipped_; }
  // One line per thing worth telling the user (legacy spellings read, an untied head kept, ...).
  const std::vector<std::string>& notes() const { return notes_; }
  // The dtype config.json declares ("dtype", else "torch_dtype"), or "" when it names none.
  std::string declared_dtype() const;
  // "BF16 (+ F32: 2 tensors)": the weights' dtypes, most common first.
  std::string dtype_summary() const;

  // The tensor on the host in `as` (default: its stored dtype, which must be one of ours).
  Tensor load(const HfTensor& t, std::optional<DType> as = std::nullopt) const;
  // Fills every parameter of `store` (shapes must match; values converted to the store's dtype).
  void load_into(ParamStore& store) const;

 private:
  std::string dir_;
  ModelConfig config_;
  nlohmann::json config_json_;
  HfLayout layout_ = HfLayout::hub;
  std::shared_ptr<io::SafetensorsSet> set_;
  std::vector<HfTensor> tensors_;
  std::vector<std::string> skipped_, notes_;
};

// Our DType for a safetensors dtype, or InputError naming the tensor (F16 and integer tensors
// have no place in a model we hold).
DType weight_dtype(const HfTensor& t);

// Files a tokenizer needs, carried between an HF directory and a checkpoint's tokenizer/.
const std::vector<std::string>& tokenizer_file_names();
// Copies those of them present in `from` into `to` (created when there is any). Returns them.
std::vector<std::string> copy_tokenizer_files(const std::filesystem::path& from, const std::filesystem::path& to);

}  // namespace nemotron::model
