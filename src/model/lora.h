// LoRA adapters (Hu et al. 2021; Megatron-Bridge's peft: lora, PEFT's LoraConfig) on the model's
// Linear layers: y = x W^T (+ b) + scale * (drop(x) A^T) B^T with A [r, in], B [out, r],
// scale = alpha / r, and drop the adapter dropout (training only; identity with dropout 0). A starts kaiming-uniform (PEFT: U(-1/sqrt(in), 1/sqrt(in))) and B at zero,
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
  double scale = 1.0;    // alpha / rank
  double dropout = 0.0;  // on the adapter's input, in training only (Context::dropout active)
  uint64_t stream = 0;   // name_stream of lora_A's name: this adapter's dropout masks
  // On a row-parallel weight (tensor parallelism) the input x holds the columns [in_offset,
  // in_offset + A's width) of the layer's in_global: the dropout masks are drawn on the whole
  // width, so every layout drops what one process drops. 0, 0: x is whole. (Rows that hold a
  // context rank's chunks are placed in their whole rows likewise: Context::dropout.)
  int64_t in_offset = 0, in_global = 0;
};

// The adapter in pieces, so that a projection computed as row blocks (Mamba's in_proj) and its
// backward compute the r-wide h = scale * drop(x) A^T once per input, not once per block, and a
// forward can keep h for its backward. drop(x) = x * m / (1 - p), Megatron-Bridge's pre-adapter
// dropout (dropout_position "pre"); m is ops/dropout.h's mask keyed by ctx.dropout and the
// adapter, so the backward regenerates the forward's mask. The base path never sees it.
// x2 [rows, in] -> h [rows, r].
Tensor lora_down(Context& ctx, const LoraAdapter& lora, const Tensor& x2);
// y2 [rows, end - begin] += h B[begin:end]^T.
void lora_up(Context& ctx, const LoraAdapter& lora, const Tensor& h, int64_t begin, int64_t end, Tensor& y2);
// dB[begin:end] += dy2^T h; dh = dy2 B[begin:end] (dh += when accumulate: the row blocks' sum).
void lora_up_backward(Context& ctx, const LoraAdapter& lora, const Tensor& h, int64_t begin, int64_t end,
                      const Tensor& dy2, Tensor& dh, bool accumulate);
// dA += scale * dh^T drop(x2) and, when dx2 is given, dx2 += scale * drop'(dh A) (the same mask).
void lora_down_backward(Context& ctx, const LoraAdapter& lora, const Tensor& x2, const Tensor& dh, Tensor* dx2);

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
// (seed, name), and freezes every other parameter (only the adapters train). Under tensor
// parallelism the adapter follows its weight's split (Megatron-Bridge's LoRA on parallel linears):
// on a column-parallel weight A [r, in] is whole and B split by rows like W; on a row-parallel
// weight A is split by columns like W and B whole. The low-rank h of a row split is then a partial
// sum, and its B term joins the layer's partial output, which the layer's own all-reduce (or
// reduce-scatter under sequence parallelism) sums: no collective of its own. The whole factor's
// gradient is partial over the tensor group there (from the split dh, or the partial h) and is
// marked so (ParamShard::grad_partial_over_tensor); a whole weight's adapter inherits the weight's
// mark. Each split factor registers its global shape and offset, so checkpoints reshard. `source` (the
// config file) and the key `peft.target_modules` name the culprit of an InputError: an unknown
// target, `experts`, or a target that covers no module of this model. Returns the attached
// weights' names in store order.
std::vector<std::string> attach_lora(ParamStore& store, const LoraConfig& cfg, uint64_t seed,
                                     const std::string& source);

// The adapters' parameter count on a model of `model`'s shape (what attach_lora would add), from
// the shapes alone (for --dry-run on models too large to build here); with tensor_size T, what one
// tensor rank holds (the split factors' 1/T: a per-GPU plan).
int64_t lora_param_count(const ModelConfig& model, const LoraConfig& cfg, int64_t tensor_size = 1);

// Folds every adapter of `store` into its weight, W' = W + scale * B A (in float64 on the host),
// and detaches it (Param::lora reset; the lora_* parameters stay in the store, unused): the base
// weights alone then give the outputs that base + adapter gave.
void merge_lora(ParamStore& store);

}  // namespace nemotron::model
