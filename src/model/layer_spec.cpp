#include "model/layer_spec.h"

#include <fmt/format.h>

namespace nemotron::model {

int64_t decilm_ffn_width(double ffn_mult, int64_t hidden_size) {
  const auto f = static_cast<int64_t>(2.0 * ffn_mult * static_cast<double>(hidden_size) / 3.0);
  return (f + 255) / 256 * 256;
}

ModelConfig sized_for(const ModelConfig& cfg, const LayerSpec& spec) {
  ModelConfig c = cfg;
  if (spec.kind == LayerKind::attention) c.num_key_value_heads = spec.num_key_value_heads;
  if (spec.kind == LayerKind::mlp) c.intermediate_size = spec.intermediate_size;
  return c;
}

StackNames stack_names(const ModelConfig& cfg) {
  if (cfg.is_decilm()) return {"model.embed_tokens.weight", "model.norm.weight"};
  return {"backbone.embeddings.weight", "backbone.norm_f.weight"};
}

std::vector<LayerSpec> layer_specs(const ModelConfig& cfg) {
  std::vector<LayerSpec> out;
  if (!cfg.is_decilm()) {
    for (int64_t i = 0; i < cfg.num_layers(); ++i) {
      const std::string p = fmt::format("backbone.layers.{}.", i);
      out.push_back({cfg.layer_kind(i), p + "norm.weight", p + "mixer.", "", cfg.num_key_value_heads,
                     cfg.intermediate_size, i});
    }
    return out;
  }
  for (size_t i = 0; i < cfg.block_configs.size(); ++i) {
    const DeciBlock& b = cfg.block_configs[i];
    const std::string p = fmt::format("model.layers.{}.", i);
    const auto block = static_cast<int64_t>(i);
    if (b.attention == SubBlock::normal)
      out.push_back({LayerKind::attention, p + "input_layernorm.weight", p + "self_attn.", "",
                     cfg.num_attention_heads / b.n_heads_in_group, 0, block});
    else if (b.attention == SubBlock::linear)
      out.push_back({LayerKind::linear, p + "input_layernorm.weight", p + "self_attn.", "linear_attn.", 0, 0, block});
    if (b.ffn == SubBlock::normal)
      out.push_back({LayerKind::mlp, p + "post_attention_layernorm.weight", p + "mlp.", "", 0,
                     decilm_ffn_width(b.ffn_mult, cfg.hidden_size), block});
    else if (b.ffn == SubBlock::linear)
      out.push_back({LayerKind::linear, p + "post_attention_layernorm.weight", p + "mlp.", "linear_mlp.", 0, 0, block});
  }
  return out;
}

std::vector<LayerSpec> mtp_layer_specs(const ModelConfig& cfg, int64_t b) {
  const std::string& pattern = cfg.mtp_hybrid_override_pattern;
  const auto P = static_cast<int64_t>(pattern.size());
  std::vector<LayerSpec> out;
  for (int64_t i = 0; i < P; ++i) {
    const int64_t j = b * P + i;
    const std::string p = fmt::format("mtp.layers.{}.", j);
    out.push_back({static_cast<LayerKind>(pattern[static_cast<size_t>(i)]), p + "norm.weight", p + "mixer.", "",
                   cfg.num_key_value_heads, cfg.intermediate_size, j});
  }
  return out;
}

}  // namespace nemotron::model
