// The model's shape, with Hugging Face `nemotron_h` field names (reference/architectures.md
// A.1.3), plus the fields the Llama/DeciLM family needs (RoPE, SwiGLU, `block_configs`: B.2).
// Loaded from a recipe YAML or a config.json (model_config.cpp) and validated with errors naming
// the field. A DeciLM (`model_type: nemotron-nas`) config's layer stack is derived from its
// block_configs (model/layer_spec.h): each block adds an attention and an FFN sub-layer unless
// that sub-block is a no-op.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ops/rope_freq.h"
#include "parallel/parallel_sizes.h"

namespace nemotron {
class ConfigReader;
}

namespace nemotron::model {

// `linear` ('L') is DeciLM's replace_with_linear sub-block (one [H, H] projection); it never
// appears in a Nemotron-H pattern.
enum class LayerKind : char { mamba = 'M', attention = '*', mlp = '-', moe = 'E', linear = 'L' };

// One DeciLM block_configs entry (reference/architectures.md B.2).
enum class SubBlock { normal, no_op, linear };
struct DeciBlock {
  SubBlock attention = SubBlock::normal;
  int64_t n_heads_in_group = 0;  // query heads per KV head (normal attention)
  SubBlock ffn = SubBlock::normal;
  double ffn_mult = 0.0;  // SwiGLU width rule (normal FFN): layer_spec.h decilm_ffn_width
};

struct ModelConfig {
  std::string model_type = "nemotron_h";
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  std::string hybrid_override_pattern;  // one of M * - E per layer
  float layer_norm_epsilon = 1e-5f;
  bool tie_word_embeddings = false;
  double initializer_range = 0.02;
  bool rescale_prenorm_residual = true;
  // Training memory (Megatron's model.recompute_granularity): "full" keeps only each layer's input
  // and recomputes its forward just before its backward; "" keeps every activation.
  std::string recompute_granularity;
  // How the run splits the model over ranks (Megatron-Bridge's model.tensor_model_parallel_size,
  // context_parallel_size, expert_model_parallel_size, sequence_parallel). Recipes only: a Hugging
  // Face config.json has none, and nothing in the weights depends on it.
  parallel::ParallelSizes parallel;
  int64_t max_position_embeddings = 4096;

  // Attention (*)
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;  // 0 = hidden_size / num_attention_heads
  bool attention_bias = false;
  std::string position_embedding_type = "none";  // "none" (Nemotron-H) or "rope" (Llama/DeciLM)
  double rope_theta = 10000.0;
  // rope_scaling {rope_type: "llama3", ...} (B.3); factor 0 = none.
  double rope_scaling_factor = 0.0;
  double rope_low_freq_factor = 1.0, rope_high_freq_factor = 4.0;
  int64_t rope_original_max_position_embeddings = 8192;

  // Dense MLP (-)
  int64_t intermediate_size = 0;
  std::string mlp_hidden_act = "relu2";  // "relu2": up->relu^2->down; "silu": SwiGLU gate/up/down
  bool mlp_bias = false;

  // Mamba-2 (M)
  int64_t mamba_num_heads = 0;  // nH
  int64_t mamba_head_dim = 0;   // P
  int64_t n_groups = 1;         // G
  int64_t ssm_state_size = 0;   // N
  int64_t conv_kernel = 4;      // K
  int64_t chunk_size = 128;     // Q
  bool use_conv_bias = true;
  bool use_bias = false;        // in_proj / out_proj bias
  double time_step_min = 0.001, time_step_max = 0.1, time_step_floor = 1e-4;
  double time_step_limit_min = 0.0, time_step_limit_max = std::numeric_limits<double>::infinity();

  // MoE (E)
  int64_t n_routed_experts = 0;          // E
  int64_t num_experts_per_tok = 0;       // K
  int64_t moe_intermediate_size = 0;
  int64_t moe_shared_expert_intermediate_size = 0;
  int64_t n_shared_experts = 0;
  int64_t moe_latent_size = 0;           // 0 = no latent projection
  double routed_scaling_factor = 1.0;
  bool norm_topk_prob = true;
  int64_t n_group = 1, topk_group = 1;

  // DeciLM (model_type "nemotron-nas"): one entry per HF layer; the stack pattern above is derived
  // from it ('*' / 'L' / nothing for the attention sub-block, '-' / 'L' / nothing for the FFN).
  std::vector<DeciBlock> block_configs;
  int64_t num_hidden_layers = 0;  // as given in the file (0 = absent); checked against block_configs

  // Multi-token prediction (reference/architectures.md A.8, model/mtp.h).
  int64_t num_nextn_predict_layers = 0;     // MTP blocks stored: 1 (reused at every depth) or one per depth
  std::string mtp_hybrid_override_pattern;  // inner pattern of one MTP block, e.g. "*E"
  // Not HF fields (Megatron's): prediction depths D (0 = num_nextn_predict_layers) and the weight
  // alpha of L = L_main + alpha / D * sum_k L_k (A.8.3; Megatron-Bridge's Nemotron-H value 0.3).
  int64_t mtp_num_layers = 0;
  double mtp_loss_scaling_factor = 0.3;

  // Derived helpers.
  bool is_decilm() const { return model_type == "nemotron-nas"; }
  int64_t num_layers() const { return static_cast<int64_t>(hybrid_override_pattern.size()); }
  LayerKind layer_kind(int64_t i) const { return static_cast<LayerKind>(hybrid_override_pattern[i]); }
  int64_t attn_head_dim() const { return head_dim > 0 ? head_dim : hidden_size / num_attention_heads; }
  int64_t mamba_d_inner() const { return mamba_num_heads * mamba_head_dim; }
  int64_t mamba_conv_dim() const { return mamba_d_inner() + 2 * n_groups * ssm_state_size; }
  int64_t mamba_in_proj_dim() const { return 2 * mamba_d_inner() + 2 * n_groups * ssm_state_size + mamba_num_heads; }
  int64_t moe_expert_dim() const { return moe_latent_size > 0 ? moe_latent_size : hidden_size; }
  ops::RopeFreq rope_freq() const {
    return {rope_theta, rope_scaling_factor, rope_low_freq_factor, rope_high_freq_factor,
            static_cast<double>(rope_original_max_position_embeddings)};
  }
  // MTP prediction depths D (0 without MTP), and the block depth k (1..D) runs.
  int64_t mtp_depths() const {
    return num_nextn_predict_layers <= 0 ? 0 : (mtp_num_layers > 0 ? mtp_num_layers : num_nextn_predict_layers);
  }
  int64_t mtp_block_of_depth(int64_t k) const { return num_nextn_predict_layers == 1 ? 0 : k - 1; }
  bool gated_mlp() const { return mlp_hidden_act == "silu" || mlp_hidden_act == "swiglu"; }
};

// "mamba", "attention", "mlp", "moe", "linear".
const char* layer_kind_name(LayerKind kind);
// True for the four pattern symbols M * - E.
bool is_layer_symbol(char c);

// Checks every field and their consistency; throws InputError "<source>: <section>.<field>:
// <problem>" (section "model" for a recipe's `model:` mapping, "" for a config.json).
void validate(const ModelConfig& cfg, const std::string& source, const std::string& section = "model");

// Reads the fields from a reader positioned on a `model:` mapping or a config.json root: HF names
// first, then the legacy aliases (A.1.3), the pattern from `hybrid_override_pattern` or else
// `layers_block_type`. Does not validate and does not check unknown keys (the caller decides).
ModelConfig read_model_config(ConfigReader& r);

// From a recipe's `model:` mapping or a Hugging Face config.json object (same field names, plus
// the legacy aliases and `layers_block_type`). Unknown keys are errors for recipes (strict) and
// ignored for config.json, which carries many fields we do not need.
ModelConfig model_config_from_json(const nlohmann::json& j, const std::string& source, bool strict);
// .json = a Hugging Face config.json (not strict); .yaml/.yml = a recipe whose `model:` mapping is
// the config (strict; the recipe's other sections belong to other stages and are ignored here).
// `overrides` are dotted key=value assignments applied to the file's tree before reading
// (`model.hidden_size=128` for a recipe, `hidden_size=128` for a config.json).
ModelConfig load_model_config(const std::string& path, const std::vector<std::string>& overrides = {});
// The stack pattern of DeciLM blocks (see block_configs above).
std::string decilm_pattern(const std::vector<DeciBlock>& blocks);

// A config.json that transformers' NemotronHConfig accepts (model_type nemotron_h, architectures
// [NemotronHForCausalLM], hybrid_override_pattern and every size). time_step_limit is written
// only when it differs from the default (0, inf); an infinite bound as {"__float__": "Infinity"}.
// A DeciLM config gives decilm_config_to_hf_json's instead.
nlohmann::json model_config_to_hf_json(const ModelConfig& cfg);
// The DeciLM config.json (architectures [DeciLMForCausalLM], model_type nemotron-nas,
// block_configs, rope_scaling; intermediate_size and num_key_value_heads null as in B.2).
nlohmann::json decilm_config_to_hf_json(const ModelConfig& cfg);

}  // namespace nemotron::model
