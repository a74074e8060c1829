// What `nemotron <family> pretrain --dry-run` prints, and the memory check before a real run:
// the model's size (model::model_info), the run's plan (batches, tokens, schedule milestones,
// validation, checkpoints) and a rough memory estimate: parameters + gradients + Adam moments
// (float32 each, as the CPU trains) + saved activations of one micro-batch (the per-layer tensors
// the backward keeps, from the shapes; transient buffers and allocator slack not counted).
#pragma once
#include <cstdint>
#include <string>

#include "train/train_config.h"

namespace nemotron::train {

struct MemoryEstimate {
  int64_t params = 0;
  double param_bytes = 0, grad_bytes = 0, moment_bytes = 0, activation_bytes = 0;
  double total() const { return param_bytes + grad_bytes + moment_bytes + activation_bytes; }
  // The same model on a GPU in bf16 with fp32 master weights, grads and moments (Megatron's
  // 18 bytes per parameter, no sharding), activations in bf16.
  double gpu_mixed_precision_total() const { return 18.0 * static_cast<double>(params) + activation_bytes / 2; }
};

MemoryEstimate estimate_memory(const PretrainConfig& cfg);

// The dry-run report. `recipe` names the file, `overrides` the command line's key=value list.
std::string dry_run_text(const PretrainConfig& cfg, const std::string& recipe, size_t overrides);

// 1536 -> "1.50 KiB", 3.2e9 -> "2.98 GiB".
std::string human_bytes(double bytes);

}  // namespace nemotron::train
