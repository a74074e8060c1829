// LoRA adapters (Hu et al. 2021; Megatron-Bridge's peft: lora, PEFT's LoraConfig) on the model's
// Linear layers: y = x W^T (+ b) + scale * (x A^T) B^T with A [r, in], B [out, r] and
// scale = alpha / r. A starts kaiming-uniform (PEFT: U(-1/sqrt(in), 1/sqrt(in))) and B at zero,
// so an attached adapter leaves the model's output unchanged until it trains. The adapter hangs
// on the base weight's Param (Param::lora), so Linear picks it up in every forward/backward
// (forward_rows/backward_rows too: B's rows [begin, end)) and no mixer knows about it.
// Names follow PEFT: the weight `<module>.weight` gets `<module>.lora_A.weight` and
// `<module>.lora_B.weight` (PEFT's adapter_model.safetensors prefixes `base_model.model.`).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/context.h"
#include "model/model_config.h"
#include "model/param.h"

namespace nemotron::model {

struct LoraAdapter {
  Param* a = nullptr;  // lora_A [r, in]
  Param* b = nullptr;  // lora_B [out, r]
  int64_t rank = 0;
  double scale = 1.0;  // alpha / rank
};

// y[..., end - begin] += scale * (x A^T) B[begin:end]^T.
void lora_forward(Context& ctx, const LoraAdapter& lora, const Tensor& x, int64_t begin, int64_t end, Tensor& y);
// With h = scale * x A^T and dh = dy B[begin:end]: dB[begin:end] += dy^T h, dA += scale * dh^T x,
// and when dx is given dx += scale * dh A (the base Linear wrote or accumulated its part first).
void lora_backward(Context& ctx, const LoraAdapter& lora, const Tensor& x, int64_t begin, int64_t end,
                   const Tensor& dy, Tensor* dx);

// The peft: section (Megatron-Bridge's LoRA config; its defaults).
struct LoraConfig {
  std::vector<std::string> target_modules = {"linear_qkv", "linear_proj", "linear_fc1", "linear_fc2"};
  int64_t dim = 32;
  double alpha = 32;
  double dropout = 0.0;
  double scale() const { return alpha / static_cast<double>(dim); }
};

// Megatron's module names that an adapter may target, in the order they are listed in errors.
const std::vector<std::string>& lora_target_names();
// The Hub-name module suffixes (PEFT's target_modules) that a Megatron target covers:
// linear_qkv -> q_proj, k_proj, v_proj; linear_proj -> o_proj; linear_fc1 -> up_proj (gate_proj
// when gated; the dense MLP and the MoE's shared expert); linear_fc2 -> down_proj; in_proj and
// out_proj -> Mamba's. Routed experts run as one grouped GEMM that takes no adapter: `experts`
// is refused (InputError), and linear_fc1/fc2 leave the routed experts alone.
std::vector<std::string> lora_hf_modules(const std::string& target);
// True for an adapter's parameter name (`*.lora_A.weight`, `*.lora_B.weight`).
bool is_lora_param(const std::string& name);
inline bool is_lora(const Param& p) { return is_lora_param(p.name); }
inline bool is_base(const Param& p) { return !is_lora_param(p.name); }
// True when `store` holds adapters (a LoRA run: checkpoints keep the adapters only).
bool has_lora(const ParamStore& store);

// Attaches an adapter to every weight of `store` that a target covers, initialises it from
// (seed, name), and freezes every other parameter (only the adapters train). `source` (the
// config file) and the key `peft.target_modules` name the culprit of an InputError: an unknown
// target, `experts`, or a target that covers no module of this model. Returns the attached
// weights' names in store order.
std::vector<std::string> attach_lora(ParamStore& store, const LoraConfig& cfg, uint64_t seed,
                                     const std::string& source);

// The adapters' parameter count on a model of `model`'s shape (what attach_lora would add),
// from the shapes alone (for --dry-run on models too large to build here).
int64_t lora_param_count(const ModelConfig& model, const LoraConfig& cfg);

// Folds every adapter of `store` into its weight, W' = W + scale * B A (in float64 on the host),
// and detaches it (Param::lora reset; the lora_* parameters stay in the store, unused): the base
// weights alone then give the outputs that base + adapter gave.
void merge_lora(ParamStore& store);

}  // namespace nemotron::model
