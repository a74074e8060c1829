// Configurations of the blocks under test, shared by their harness cases (tests/model/*_cases.cpp)
// and the plain TEST()s (tests/model/*_test.cpp).
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "core/shape.h"
#include "model/model_config.h"

namespace nemotron::testing {

inline model::ModelConfig attention_config(int64_t H, int64_t nq, int64_t nkv, int64_t hd, bool rope, bool bias) {
  model::ModelConfig c;
  c.hidden_size = H;
  c.hybrid_override_pattern = "M*M*";
  c.num_attention_heads = nq;
  c.num_key_value_heads = nkv;
  c.head_dim = hd;
  c.attention_bias = bias;
  c.position_embedding_type = rope ? "rope" : "none";
  c.rope_theta = 10000.0;
  return c;
}

inline model::ModelConfig mlp_config(int64_t H, int64_t F, const std::string& act, bool bias) {
  model::ModelConfig c;
  c.hidden_size = H;
  c.hybrid_override_pattern = "M-M-M-";
  c.intermediate_size = F;
  c.mlp_hidden_act = act;
  c.mlp_bias = bias;
  return c;
}

// Realistic-size cases draw each weight [out, in] from U(-sqrt(3/in), sqrt(3/in)): unit gain, as
// in an initialised model, where U(-0.5, 0.5) would grow the activations with the width.
// Vectors and the conv kernel [C, 1, K] keep `other`.
inline std::pair<double, double> unit_gain_range(const Shape& shape, std::pair<double, double> other = {-0.5, 0.5}) {
  if (shape.rank() != 2) return other;
  double a = std::sqrt(3.0 / static_cast<double>(shape[1]));
  return {-a, a};
}

// --- Mamba-2 ------------------------------------------------------------------------------------

inline const std::string kMambaPrefix = "backbone.layers.0.mixer.";

inline model::ModelConfig mamba_config(int64_t H, int64_t nH, int64_t P, int64_t G, int64_t N, int64_t K,
                                       int64_t chunk, bool conv_bias, bool use_bias) {
  model::ModelConfig c;
  c.hidden_size = H;
  c.hybrid_override_pattern = "M-M*";
  c.mamba_num_heads = nH;
  c.mamba_head_dim = P;
  c.n_groups = G;
  c.ssm_state_size = N;
  c.conv_kernel = K;
  c.chunk_size = chunk;
  c.use_conv_bias = conv_bias;
  c.use_bias = use_bias;
  return c;
}

// Keeps dt = softplus(dt_raw + dt_bias) in a realistic regime (about 0.05 .. 0.3).
inline std::pair<double, double> mamba_param_range(const std::string& name) {
  if (name.ends_with("A_log")) return {-1.0, 1.0};
  if (name.ends_with("dt_bias")) return {-3.0, -1.0};
  if (name.ends_with("norm.weight") || name.ends_with(".D")) return {0.5, 1.5};
  return {-0.5, 0.5};
}

// --- MoE ----------------------------------------------------------------------------------------

inline const std::string kMoePrefix = "backbone.layers.1.mixer.";

struct MoeShape {
  int64_t H, E, K, n_group, topk_group, F, shared_F, n_shared, latent;
  bool norm;
  double scale;
};

inline model::ModelConfig moe_config(const MoeShape& s) {
  model::ModelConfig c;
  c.hidden_size = s.H;
  c.hybrid_override_pattern = "MEMEM*E";
  c.n_routed_experts = s.E;
  c.num_experts_per_tok = s.K;
  c.n_group = s.n_group;
  c.topk_group = s.topk_group;
  c.moe_intermediate_size = s.F;
  c.moe_shared_expert_intermediate_size = s.shared_F;
  c.n_shared_experts = s.n_shared;
  c.moe_latent_size = s.latent;
  c.norm_topk_prob = s.norm;
  c.routed_scaling_factor = s.scale;
  return c;
}

//                                 H  E  K  G tg  F shF nsh lat norm scale
inline constexpr MoeShape kMoeGrouped{6, 8, 2, 4, 2, 5, 3, 2, 0, true, 2.5};  // shared, no latent, norm
inline constexpr MoeShape kMoeLatent{5, 6, 3, 3, 2, 4, 3, 1, 4, false, 1.5};  // shared, latent, no norm
inline constexpr MoeShape kMoePlain{6, 4, 2, 1, 1, 3, 0, 0, 3, true, 1.0};    // no shared, latent, norm
// Realistic sizes (backend checks only): Nano-like (64 experts, top-6, shared expert, no latent)
// and Super-like (latent projections around the routed experts).
inline constexpr MoeShape kMoeNanoScale{256, 64, 6, 1, 1, 96, 192, 1, 0, true, 2.5};
inline constexpr MoeShape kMoeSuperScale{192, 32, 4, 1, 1, 96, 192, 1, 64, true, 2.0};

// --- the hybrid model -----------------------------------------------------------------------------

// Every layer kind at toy sizes; tests override what they vary.
inline model::ModelConfig hybrid_config(const std::string& pattern) {
  model::ModelConfig c;
  c.vocab_size = 23;
  c.hidden_size = 16;
  c.hybrid_override_pattern = pattern;
  c.num_attention_heads = 4, c.num_key_value_heads = 2, c.head_dim = 6;
  c.intermediate_size = 12;
  c.mamba_num_heads = 4, c.mamba_head_dim = 4, c.n_groups = 2, c.ssm_state_size = 4, c.conv_kernel = 3;
  c.chunk_size = 4;
  c.n_routed_experts = 4, c.num_experts_per_tok = 2, c.moe_intermediate_size = 8;
  c.moe_shared_expert_intermediate_size = 6, c.n_shared_experts = 1;
  c.n_group = 2, c.topk_group = 1, c.routed_scaling_factor = 1.5;
  return c;
}

// --- DeciLM -------------------------------------------------------------------------------------

// A tiny DeciLM config.json with every sub-block kind (B.1, B.2): block 0 GQA with 2 KV heads and
// SwiGLU, block 1 attention no-op and linear FFN, block 2 linear attention and FFN no-op, block 3
// MQA (1 KV head) and a wider SwiGLU. H = 16, 4 heads of 4; F = round_up_256(...) = 256 and 512.
// Llama-3 RoPE with L = 16, so head pair 0 is interpolated and pair 1 divided by the factor.
inline const char* kTinyDeciLmJson = R"({
  "architectures": ["DeciLMForCausalLM"], "model_type": "nemotron-nas",
  "vocab_size": 23, "hidden_size": 16, "num_hidden_layers": 4, "num_attention_heads": 4,
  "num_key_value_heads": null, "intermediate_size": null, "hidden_act": "silu",
  "rms_norm_eps": 1e-5, "tie_word_embeddings": false, "max_position_embeddings": 64,
  "rope_theta": 10000.0,
  "rope_scaling": {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 16},
  "block_configs": [
    {"attention": {"n_heads_in_group": 2, "no_op": false, "replace_with_linear": false, "sparsify": null},
     "ffn": {"ffn_mult": 1.0, "no_op": false, "replace_with_linear": false, "sparsify": null}},
    {"attention": {"n_heads_in_group": null, "no_op": true, "replace_with_linear": false},
     "ffn": {"ffn_mult": null, "no_op": false, "replace_with_linear": true}},
    {"attention": {"n_heads_in_group": null, "no_op": false, "replace_with_linear": true},
     "ffn": {"ffn_mult": null, "no_op": true, "replace_with_linear": false}},
    {"attention": {"n_heads_in_group": 4, "no_op": false, "replace_with_linear": false},
     "ffn": {"ffn_mult": 48.0, "no_op": false, "replace_with_linear": false}}
  ]
})";

inline model::ModelConfig decilm_config() {
  return model::model_config_from_json(nlohmann::json::parse(kTinyDeciLmJson), "tiny_decilm.json", false);
}

}  // namespace nemotron::testing
