// The layer stack of a model, derived once from a validated ModelConfig: every pre-norm residual
// layer x = x + mixer(rmsnorm(x)) with its kind, its parameter names and its own sizes. Both
// families are built from it (hybrid_model.cpp):
//   Nemotron-H: one layer per pattern symbol, `backbone.layers.{i}.norm.weight` + `.mixer.*`.
//   DeciLM (B.1): per block i an attention sub-layer (`model.layers.{i}.input_layernorm.weight`,
//     `self_attn.*`, its own KV-head count, or the [H, H] `self_attn.linear_attn`) and an FFN
//     sub-layer (`post_attention_layernorm.weight`, SwiGLU `mlp.*` of its own width, or
//     `mlp.linear_mlp`); a no-op sub-block adds no layer (no norm, no residual add).
//   MTP block b (Nemotron-H, A.8.2): one layer per symbol i of the inner pattern (length P),
//     `mtp.layers.{b*P+i}.norm.weight` + `.mixer.*`.
#pragma once
#include <string>
#include <vector>

#include "model/model_config.h"

namespace nemotron::model {

struct LayerSpec {
  LayerKind kind = LayerKind::mlp;
  std::string norm;    // the pre-norm weight's name
  std::string prefix;  // the mixer's parameter prefix ("...mixer.", "...self_attn.", "...mlp.")
  std::string linear;  // kind linear: the weight's prefix under `prefix` ("linear_attn.", "linear_mlp.")
  int64_t num_key_value_heads = 0;  // attention
  int64_t intermediate_size = 0;    // mlp
  int64_t block = 0;  // the checkpoint's layer index (a DeciLM block has up to two sub-layers)
};

// Names outside the layers.
struct StackNames {
  std::string embedding;   // backbone.embeddings.weight | model.embed_tokens.weight
  std::string final_norm;  // backbone.norm_f.weight | model.norm.weight
};

std::vector<LayerSpec> layer_specs(const ModelConfig& cfg);
// The inner layers of multi-token-prediction block `b` (model/mtp.h); `block` is b*P+i.
std::vector<LayerSpec> mtp_layer_specs(const ModelConfig& cfg, int64_t b);
StackNames stack_names(const ModelConfig& cfg);

// `cfg` with this layer's own sizes in the global fields (num_key_value_heads,
// intermediate_size), for code that sizes a layer from (config, kind): model info, memory plans.
ModelConfig sized_for(const ModelConfig& cfg, const LayerSpec& spec);

// DeciLM FFN width (B.2): round_up_256(int(2 * ffn_mult * H / 3)), int truncating, evaluated in
// the order Python does so float rounding matches the reference implementations.
int64_t decilm_ffn_width(double ffn_mult, int64_t hidden_size);

}  // namespace nemotron::model
