// What `nemotron <family> pretrain --dry-run` prints, and the memory check before a real run:
// the model's size (model::model_info), the run's plan (batches, tokens, schedule milestones,
// validation, checkpoints) and a rough memory estimate: parameters + gradients + Adam moments
// (float32 each, as the CPU trains) + saved activations of one micro-batch (the per-layer tensors
// the backward keeps, from the shapes; transient buffers and allocator slack not counted). The
// per-GPU plan of a parallel layout (and the check before a GPU run) is train/gpu_plan.h.
#pragma once
#include <cstdint>
#include <string>

#include "train/train_config.h"

namespace nemotron::train {

struct MemoryEstimate {
  int64_t params = 0;
  int64_t trainable = -1;  // parameters that train (-1: all; LoRA: the adapters, the base frozen)
  int64_t routed_expert_params = 0;  // of params: the MoE layers' routed experts (split by expert parallelism)
  double param_bytes = 0, grad_bytes = 0, moment_bytes = 0, activation_bytes = 0;
  // Host memory of the data's sample indices (Megatron's sample, shuffle and blend indices, built
  // in memory at the start): they grow with train_iters x global_batch_size, not with the model.
  int64_t indexed_samples = 0;
  double index_bytes = 0;
  double total() const { return param_bytes + grad_bytes + moment_bytes + activation_bytes + index_bytes; }
  // The same model on a GPU in bf16 with fp32 master weights, grads and moments (Megatron's
  // 18 bytes per parameter, no sharding), activations in bf16.
  // A frozen parameter costs its bf16 value only (2 bytes).
  double gpu_mixed_precision_total() const {
    const double t = static_cast<double>(trainable < 0 ? params : trainable);
    return 18.0 * t + 2.0 * (static_cast<double>(params) - t) + activation_bytes / 2;
  }
};

MemoryEstimate estimate_memory(const PretrainConfig& cfg);
// The same for a model trained on micro-batches of B x T tokens without data indices (model demo).
// `trainable` >= 0: only that many parameters train (LoRA adapters on a frozen base), so only
// they have gradients and moments; `params` then counts base + adapters.
MemoryEstimate estimate_memory(const model::ModelConfig& model, int64_t micro_batch_size, int64_t seq_length,
                               int64_t trainable = -1);

// Why the run would not fit in `host_bytes` of host memory ("" if it fits, or if host_bytes is 0 =
// unknown): on the CPU everything above, on a GPU the data indices. Says which part is too large
// and which keys to lower; the caller prefixes the recipe's path.
std::string host_memory_shortfall(const PretrainConfig& cfg, double host_bytes);

// The dry-run report. `recipe` names the file, `overrides` the command line's key=value list.
std::string dry_run_text(const PretrainConfig& cfg, const std::string& recipe, size_t overrides);
// The same for any stage: its loop config, model, one line on its data and its memory estimate.
std::string dry_run_text(const TrainLoopConfig& cfg, const model::ModelConfig& model, const std::string& data_line,
                         const MemoryEstimate& mem, const std::string& recipe, size_t overrides);

// 1536 -> "1.50 KiB", 3.2e9 -> "2.98 GiB".
std::string human_bytes(double bytes);

}  // namespace nemotron::train
