#include "model/shard_sizes.h"

#include <fmt/format.h>

#include "model/layer_spec.h"

namespace nemotron::model {

namespace {

// The trunk's layers, then every MTP block's.
std::vector<LayerSpec> all_layer_specs(const ModelConfig& m) {
  std::vector<LayerSpec> specs = layer_specs(m);
  for (int64_t b = 0; b < m.num_nextn_predict_layers; ++b)
    for (LayerSpec& s : mtp_layer_specs(m, b)) specs.push_back(s);
  return specs;
}

// One layer's elements: `split` cut over the tensor group, `whole` on every rank, `experts` the
// routed experts of the layer (split by expert and tensor parallelism, inside `split`'s share).
struct LayerParams {
  int64_t split = 0, whole = 0, frozen = 0, experts = 0;
};

LayerParams layer_params(const ModelConfig& c, LayerKind kind, const ModelShard& s) {
  const int64_t H = c.hidden_size, T = s.tensor_size;
  LayerParams p;
  p.whole = H;  // the pre-norm
  switch (kind) {
    case LayerKind::mamba: {  // in_proj, conv1d, dt_bias, A_log, D, norm split; out_proj by columns
      const int64_t in = c.mamba_in_proj_dim(), conv = c.mamba_conv_dim(), d = c.mamba_d_inner();
      p.split = in * H + conv * c.conv_kernel + (c.use_conv_bias ? conv : 0) + 3 * c.mamba_num_heads + d + H * d;
      if (c.use_bias) p.split += in, p.whole += H;  // out_proj's bias is a row split's: whole
      break;
    }
    case LayerKind::attention: {  // q, k, v by rows, o by columns; k, v whole when KV groups < TP
      const int64_t hd = c.attn_head_dim(), q = c.num_attention_heads * hd, kv = c.num_key_value_heads * hd;
      const bool shared_kv = c.num_key_value_heads % T != 0;
      p.split = 2 * q * H + (shared_kv ? 0 : 2 * kv * H);
      if (shared_kv) p.whole += 2 * kv * H;
      if (c.attention_bias) p.split += q + (shared_kv ? 0 : 2 * kv), p.whole += H + (shared_kv ? 2 * kv : 0);
      break;
    }
    case LayerKind::mlp: {  // gate, up by rows, down by columns
      const int64_t F = c.intermediate_size, in = c.gated_mlp() ? 2 : 1;
      p.split = (in + 1) * F * H;
      if (c.mlp_bias) p.split += in * F, p.whole += H;
      break;
    }
    case LayerKind::moe: {
      const int64_t E = c.n_routed_experts, de = c.moe_expert_dim(), F = c.moe_intermediate_size;
      const int64_t F_sh = c.moe_shared_expert_intermediate_size * c.n_shared_experts;
      p.whole += E * H + E;  // router, correction bias (a frozen buffer)
      p.frozen = E;
      if (c.moe_latent_size > 0) p.whole += 2 * c.moe_latent_size * H;
      // E / EP experts: up [F, de] by rows (bias too), down [de, F] by columns (its bias whole).
      const int64_t held = E / s.expert_size;
      p.experts = held * (2 * F * de / T + (c.mlp_bias ? F / T + de : 0));
      if (c.moe_shared_expert_intermediate_size > 0 && c.n_shared_experts > 0) {  // an ungated MLP
        p.split += 2 * F_sh * H + (c.mlp_bias ? F_sh : 0);
        if (c.mlp_bias) p.whole += H;
      }
      break;
    }
    case LayerKind::linear: p.whole += H * H; break;  // DeciLM's replacement, whole on every rank
  }
  return p;
}

// What tensor parallelism splits, for the layers this model has (trunk and MTP blocks): the
// facts' tensor_split and (the KV groups) tensor_split_or_shared.
parallel::LayoutModelFacts tensor_split_sizes(const ModelConfig& m) {
  parallel::LayoutModelFacts facts;
  auto put = [](std::vector<std::pair<std::string, int64_t>>& out, std::string key, int64_t v) {
    for (const auto& [k, x] : out)
      if (k == key && x == v) return;
    out.emplace_back(std::move(key), v);
  };
  auto add = [&](std::string key, int64_t v) { put(facts.tensor_split, std::move(key), v); };
  auto add_kv = [&](std::string key, int64_t v) { put(facts.tensor_split_or_shared, std::move(key), v); };
  add("model.vocab_size", m.vocab_size);  // the embedding and the head split by vocabulary rows
  for (const LayerSpec& s : all_layer_specs(m)) {
    switch (s.kind) {
      case LayerKind::attention:
        add("model.num_attention_heads", m.num_attention_heads);
        if (s.num_key_value_heads > 0 && s.num_key_value_heads != m.num_key_value_heads)
          add_kv(fmt::format("the KV heads of layer {} (block_configs)", s.block), s.num_key_value_heads);
        else
          add_kv("model.num_key_value_heads", m.num_key_value_heads);
        break;
      case LayerKind::mamba:
        add("model.mamba_num_heads", m.mamba_num_heads);
        add("model.n_groups", m.n_groups);
        break;
      case LayerKind::mlp:
        if (s.intermediate_size != m.intermediate_size)
          add(fmt::format("the FFN width of layer {} (block_configs)", s.block), s.intermediate_size);
        else
          add("model.intermediate_size", m.intermediate_size);
        break;
      case LayerKind::moe:
        add("model.moe_intermediate_size", m.moe_intermediate_size);
        if (m.n_shared_experts > 0 && m.moe_shared_expert_intermediate_size > 0)
          add("model.moe_shared_expert_intermediate_size x model.n_shared_experts",
              m.moe_shared_expert_intermediate_size * m.n_shared_experts);
        break;
      case LayerKind::linear: break;  // whole on every rank
    }
  }
  return facts;
}

}  // namespace

int64_t routed_experts(const ModelConfig& m) {
  // The MTP blocks' pattern counts only where there are MTP blocks (a Hugging Face config lists
  // their layer types even with num_nextn_predict_layers 0: a dense model is no MoE for that).
  const bool moe = m.hybrid_override_pattern.find('E') != std::string::npos ||
                   (m.mtp_depths() > 0 && m.mtp_hybrid_override_pattern.find('E') != std::string::npos);
  return moe ? m.n_routed_experts : 0;
}

parallel::LayoutModelFacts layout_facts(const ModelConfig& m) {
  parallel::LayoutModelFacts facts = tensor_split_sizes(m);
  facts.routed_experts = routed_experts(m);
  return facts;
}

ShardParams shard_params(const ModelConfig& c, const ModelShard& s) {
  const int64_t H = c.hidden_size, V = c.vocab_size, T = s.tensor_size;
  ShardParams out;
  auto add_layer = [&](const LayerSpec& spec) {
    const LayerParams p = layer_params(sized_for(c, spec), spec.kind, s);
    out.total += p.split / T + p.experts + p.whole;
    out.whole += p.whole;
    out.frozen += p.frozen;
    out.routed_experts += p.experts;
  };
  out.total = (c.tie_word_embeddings ? 1 : 2) * V * H / T;  // embedding and head by vocabulary rows
  out.total += H, out.whole += H;                          // the final norm
  for (const LayerSpec& spec : layer_specs(c)) add_layer(spec);
  for (int64_t b = 0; b < c.num_nextn_predict_layers; ++b) {
    const int64_t own = 2 * H + 2 * H * H + H;  // enorm, hnorm, eh_proj [H, 2H], final_layernorm
    out.total += own, out.whole += own;
    for (const LayerSpec& spec : mtp_layer_specs(c, b)) add_layer(spec);
  }
  return out;
}

}  // namespace nemotron::model
