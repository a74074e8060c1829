#include "train/lora_export.h"

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/config_tree.h"
#include "core/error.h"
#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "io/tensor_pieces.h"
#include "io/staged_dir.h"
#include "model/hf_convert.h"
#include "model/hybrid_model.h"
#include "model/weights_io.h"
#include "train/checkpoint.h"
#include "train/sft_config.h"

namespace nemotron::train {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void require_empty_or_force(const std::string& out, bool force, const std::string& flag) {
  std::error_code ec;
  if (!force && fs::exists(out, ec) && !fs::is_empty(out, ec))
    throw InputError(fmt::format("{}: {} exists and is not empty (add --force to replace it)", flag, out));
}

void write_text_file(const fs::path& path, const std::string& text) {
  io::write_file_atomically(path.string(), text.data(), text.size());
}

}  // namespace

AdapterCheckpoint open_adapter_checkpoint(const std::string& path, const std::string& base_override) {
  AdapterCheckpoint a;
  a.iter_dir = resolve_checkpoint_dir(path);
  const std::string cfg_path = (fs::path(a.iter_dir) / "config.yaml").string();
  std::error_code ec;
  if (!fs::exists(cfg_path, ec))
    throw InputError(fmt::format("{}: missing (a LoRA checkpoint records its run's config there)", cfg_path));
  const SftConfig cfg = read_sft_config(load_config_file(cfg_path), cfg_path);
  if (!cfg.peft)
    throw InputError(fmt::format("{}: not a LoRA checkpoint (its config has no peft: section; a full fine-tuning "
                                 "checkpoint exports directly with `nemotron convert export`)",
                                 a.iter_dir));
  a.model = cfg.model;
  a.lora = *cfg.peft;
  a.base = base_override.empty() ? cfg.checkpoint.pretrained_checkpoint : base_override;
  if (a.base.empty())
    throw InputError(fmt::format("{}: checkpoint.pretrained_checkpoint is not recorded: name the base with --base",
                                 cfg_path));
  return a;
}

void merge_lora_checkpoint(const AdapterCheckpoint& a, const std::string& out, bool force,
                           const LoraProgress& progress) {
  require_empty_or_force(out, force, "--output");
  // Float32 on the host: the merge itself runs in float64 (model::merge_lora).
  model::HybridModel net(a.model, host_backend(), DType::f32);
  const std::vector<std::string> wrapped =
      model::attach_lora(net.params(), a.lora, 0, (fs::path(a.iter_dir) / "config.yaml").string());
  load_checkpoint_weights(a.iter_dir, net.params(), a.base);  // base from a.base, adapters from iter_dir
  progress(fmt::format("loaded base {} and {} adapters (r {}, alpha {}) from {}", a.base, wrapped.size(), a.lora.dim,
                       a.lora.alpha, a.iter_dir));
  model::merge_lora(net.params());
  io::StagedDir staged{fs::path(out)};
  model::save_weights(staged.path().string(), net.params(), size_t{5} * 1000 * 1000 * 1000, model::is_base);
  const json source = {{"merged_lora", {{"adapter", a.iter_dir},
                                        {"base", a.base},
                                        {"r", a.lora.dim},
                                        {"lora_alpha", a.lora.alpha},
                                        {"target_modules", a.lora.target_modules}}}};
  write_text_file(staged.path() / "config.yaml", model::checkpoint_config_yaml(a.model, source));
  staged.commit();
  progress(fmt::format("wrote {}: W' = W + {} B A on {} weights (model.safetensors, config.yaml)", out,
                       a.lora.scale(), wrapped.size()));
}

void export_peft_adapter(const AdapterCheckpoint& a, const std::string& out, bool force,
                         const LoraProgress& progress) {
  require_empty_or_force(out, force, "--output");
  io::SafetensorsSet set = io::open_weight_set(a.iter_dir);  // a sharded (multi-rank) run's too
  std::vector<io::NamedTensor> tensors;
  std::set<std::string> modules;  // PEFT's target_modules: the Hub module names' last component
  for (const std::string& name : set.names()) {
    if (!model::is_lora_param(name)) continue;
    tensors.push_back({"base_model.model." + name, set.load(name, DType::f32)});
    const std::string module = name.substr(0, name.size() - std::string(".lora_A.weight").size());
    modules.insert(module.substr(module.rfind('.') + 1));
  }
  if (tensors.empty())
    throw InputError(fmt::format("{}/model.safetensors: no lora_A/lora_B tensors (not a LoRA checkpoint)", a.iter_dir));
  const json config = {{"peft_type", "LORA"},
                       {"task_type", "CAUSAL_LM"},
                       {"base_model_name_or_path", a.base},
                       {"r", a.lora.dim},
                       {"lora_alpha", a.lora.alpha},
                       {"lora_dropout", a.lora.dropout},
                       {"target_modules", std::vector<std::string>(modules.begin(), modules.end())},
                       {"bias", "none"},
                       {"fan_in_fan_out", false},
                       {"init_lora_weights", true},
                       {"use_rslora", false},
                       {"use_dora", false},
                       {"modules_to_save", nullptr},
                       {"inference_mode", true}};
  io::StagedDir staged{fs::path(out)};
  io::save_safetensors((staged.path() / "adapter_model.safetensors").string(), tensors, {{"format", "pt"}});
  write_text_file(staged.path() / "adapter_config.json", config.dump(2) + "\n");
  staged.commit();
  progress(fmt::format("wrote {}: adapter_config.json (r {}, lora_alpha {}, target_modules {}), "
                       "adapter_model.safetensors ({} tensors)",
                       out, a.lora.dim, a.lora.alpha, config["target_modules"].dump(), tensors.size()));
}

}  // namespace nemotron::train
