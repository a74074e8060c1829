// What a LoRA SFT run leaves, turned into what others load (Megatron-Bridge's merge_lora and
// PEFT's save_pretrained):
//   merge_lora_checkpoint: base + adapters -> a native checkpoint of the merged weights
//     W' = W + (alpha / r) B A (model.safetensors + config.yaml, like `convert import` writes),
//     which `convert export` turns into a Hugging Face model and training loads as
//     checkpoint.pretrained_checkpoint;
//   export_peft_adapter: the adapters alone in PEFT's layout: adapter_config.json (peft_type LORA,
//     r, lora_alpha, lora_dropout, target_modules by Hub module name, base_model_name_or_path)
//     and adapter_model.safetensors (base_model.model.<module>.lora_{A,B}.weight).
// A LoRA checkpoint holds the adapters; its config.yaml (the run's resolved config) gives the
// model, the peft: section and checkpoint.pretrained_checkpoint, the base it trained on.
// Both write through a staged directory: a failure leaves no half output and the old one intact.
#pragma once
#include <functional>
#include <string>

#include "model/lora.h"
#include "model/model_config.h"

namespace nemotron::train {

struct AdapterCheckpoint {
  std::string iter_dir;  // the iteration directory holding the adapters
  model::ModelConfig model;
  model::LoraConfig lora;
  std::string base;  // checkpoint.pretrained_checkpoint of the run (or the caller's override)
};

// `path`: an iteration directory or its parent with the tracker. InputError when it is not a
// LoRA checkpoint (no peft: in its config.yaml, or no adapter tensors). `base_override`, when
// not empty, replaces the recorded base.
AdapterCheckpoint open_adapter_checkpoint(const std::string& path, const std::string& base_override = "");

using LoraProgress = std::function<void(const std::string& line)>;

// InputError when `out` exists and is not empty unless `force`.
void merge_lora_checkpoint(const AdapterCheckpoint& a, const std::string& out, bool force,
                           const LoraProgress& progress);
void export_peft_adapter(const AdapterCheckpoint& a, const std::string& out, bool force,
                         const LoraProgress& progress);

}  // namespace nemotron::train
