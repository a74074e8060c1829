#include "model/model_info.h"

#include <array>
#include <cmath>
#include <functional>

#include <fmt/format.h>

#include "core/error.h"
#include "model/layer_spec.h"

namespace nemotron::model {

using nlohmann::json;

namespace {

// Routed-expert tensors of one expert: up [F_moe, d_e] + down [d_e, F_moe].
int64_t expert_params(const ModelConfig& c) { return 2 * c.moe_intermediate_size * c.moe_expert_dim(); }
int64_t shared_width(const ModelConfig& c) { return c.moe_shared_expert_intermediate_size * c.n_shared_experts; }

// Matrices only (the matmul weights); mixer_params adds vectors, biases and the conv.
int64_t mixer_matrix_params(const ModelConfig& c, LayerKind kind, bool active) {
  const int64_t H = c.hidden_size;
  switch (kind) {
    case LayerKind::mamba:  // in_proj [2d + 2GN + nH, H], out_proj [H, d]
      return c.mamba_in_proj_dim() * H + H * c.mamba_d_inner();
    case LayerKind::attention: {  // q, o [nq*hd, H]; k, v [nkv*hd, H]
      const int64_t hd = c.attn_head_dim();
      return 2 * c.num_attention_heads * hd * H + 2 * c.num_key_value_heads * hd * H;
    }
    case LayerKind::mlp:  // up (+ gate) [F, H], down [H, F]
      return (c.gated_mlp() ? 3 : 2) * c.intermediate_size * H;
    case LayerKind::moe: {  // router [E, H], experts, shared expert, latent projections
      int64_t experts = active ? c.num_experts_per_tok : c.n_routed_experts;
      int64_t p = c.n_routed_experts * H + experts * expert_params(c) + 2 * shared_width(c) * H;
      if (c.moe_latent_size > 0) p += 2 * c.moe_latent_size * H;
      return p;
    }
    case LayerKind::linear: return H * H;  // DeciLM replace_with_linear
  }
  return 0;
}

int64_t mixer_vector_params(const ModelConfig& c, LayerKind kind, bool active) {
  const int64_t H = c.hidden_size;
  switch (kind) {
    case LayerKind::mamba: {
      const int64_t d = c.mamba_d_inner(), conv = c.mamba_conv_dim(), nH = c.mamba_num_heads;
      int64_t p = conv * c.conv_kernel + (c.use_conv_bias ? conv : 0);  // conv1d [conv_dim, 1, K] + bias
      p += 3 * nH + d;                                                // dt_bias, A_log, D; gated norm [d]
      if (c.use_bias) p += c.mamba_in_proj_dim() + H;                 // in_proj / out_proj biases
      return p;
    }
    case LayerKind::attention:
      return c.attention_bias ? (c.num_attention_heads + 2 * c.num_key_value_heads) * c.attn_head_dim() + H : 0;
    case LayerKind::mlp:
      return c.mlp_bias ? (c.gated_mlp() ? 2 : 1) * c.intermediate_size + H : 0;
    case LayerKind::moe: {  // e_score_correction_bias [E]; the experts and shared expert are MLPs (mlp_bias)
      int64_t p = c.n_routed_experts;
      if (c.mlp_bias) p += (active ? c.num_experts_per_tok : c.n_routed_experts) * (c.moe_intermediate_size + c.moe_expert_dim());
      if (c.mlp_bias && shared_width(c) > 0) p += shared_width(c) + H;
      return p;
    }
    case LayerKind::linear: return 0;
  }
  return 0;
}

std::vector<std::pair<std::string, int64_t>> layer_dims(const ModelConfig& c, LayerKind kind) {
  switch (kind) {
    case LayerKind::mamba:
      return {{"nH", c.mamba_num_heads}, {"P", c.mamba_head_dim}, {"G", c.n_groups},
              {"N", c.ssm_state_size},   {"conv", c.conv_kernel},    {"chunk", c.chunk_size},
              {"d_inner", c.mamba_d_inner()}};
    case LayerKind::attention:
      return {{"heads", c.num_attention_heads}, {"kv_heads", c.num_key_value_heads}, {"head_dim", c.attn_head_dim()}};
    case LayerKind::mlp:
      return {{"F", c.intermediate_size}};
    case LayerKind::moe: {
      std::vector<std::pair<std::string, int64_t>> d = {
          {"E", c.n_routed_experts}, {"top_k", c.num_experts_per_tok}, {"F", c.moe_intermediate_size}};
      if (shared_width(c) > 0) d.push_back({"shared_F", shared_width(c)});
      if (c.moe_latent_size > 0) d.push_back({"latent", c.moe_latent_size});
      return d;
    }
    case LayerKind::linear: return {{"in", c.hidden_size}, {"out", c.hidden_size}};
  }
  return {};
}

std::string dims_text(const std::vector<std::pair<std::string, int64_t>>& dims) {
  std::string s;
  for (const auto& [name, v] : dims) s += fmt::format("{}{}={}", s.empty() ? "" : " ", name, v);
  return s;
}

// Mean causal context (T + 1) / 2; QK^T and PV are 2 FLOPs per MAC each over nq * hd.
double attention_flops_per_token(const ModelConfig& c, int64_t T) {
  const double width = static_cast<double>(c.num_attention_heads * c.attn_head_dim());
  return 2.0 * 2.0 * width * (static_cast<double>(T) + 1) / 2.0;
}

}  // namespace

int64_t mixer_params(const ModelConfig& c, LayerKind kind) {
  return mixer_matrix_params(c, kind, /*active=*/false) + mixer_vector_params(c, kind, false);
}

int64_t mixer_active_params(const ModelConfig& c, LayerKind kind) {
  return mixer_matrix_params(c, kind, /*active=*/true) + mixer_vector_params(c, kind, true);
}

int64_t mixer_matmul_macs(const ModelConfig& c, LayerKind kind) { return mixer_matrix_params(c, kind, true); }

int64_t mtp_params(const ModelConfig& c) {
  if (c.num_nextn_predict_layers <= 0) return 0;
  const int64_t H = c.hidden_size;
  // enorm [H], hnorm [H], eh_proj [H, 2H], one norm [H] + mixer per inner layer, final_layernorm [H].
  int64_t block = 2 * H + 2 * H * H + H;
  for (char s : c.mtp_hybrid_override_pattern) block += H + mixer_params(c, static_cast<LayerKind>(s));
  return c.num_nextn_predict_layers * block;
}

ModelInfo model_info(const ModelConfig& c, int64_t seq_len) {
  NM_CHECK(seq_len > 0, "seq_len {}", seq_len);
  ModelInfo info;
  info.seq_len = seq_len;
  const int64_t H = c.hidden_size, V = c.vocab_size;
  info.embedding_params = V * H;
  info.lm_head_params = c.tie_word_embeddings ? 0 : V * H;
  info.final_norm_params = H;
  int64_t macs = V * H;  // lm_head (a matmul even when tied)
  int64_t active = info.embedding_params + info.lm_head_params + info.final_norm_params;
  const std::vector<LayerSpec> specs = layer_specs(c);
  for (size_t i = 0; i < specs.size(); ++i) {
    const ModelConfig lc = sized_for(c, specs[i]);  // this layer's KV heads and FFN width
    LayerInfo l;
    l.index = static_cast<int64_t>(i);
    l.block = specs[i].block;
    l.kind = specs[i].kind;
    l.params = H + mixer_params(lc, l.kind);
    l.active_params = H + mixer_active_params(lc, l.kind);
    l.matmul_macs = mixer_matmul_macs(lc, l.kind);
    if (l.kind == LayerKind::attention) l.attention_flops = attention_flops_per_token(lc, seq_len);
    l.forward_flops = 2.0 * static_cast<double>(l.matmul_macs) + l.attention_flops;
    l.dims = layer_dims(lc, l.kind);
    info.layer_params += l.params;
    active += l.active_params;
    macs += l.matmul_macs;
    info.attention_flops_per_token += l.attention_flops;
    info.layers.push_back(std::move(l));
  }
  info.mtp_params = mtp_params(c);
  info.total_params =
      info.embedding_params + info.lm_head_params + info.final_norm_params + info.layer_params + info.mtp_params;
  info.active_params = active;
  info.matmul_flops_per_token = 2.0 * static_cast<double>(macs);
  info.forward_flops_per_token = info.matmul_flops_per_token + info.attention_flops_per_token;
  if (c.mtp_depths() > 0) {
    // One depth: enorm, hnorm, eh_proj, the inner layers, final_layernorm; then the shared head.
    int64_t depth_active = 2 * H + 2 * H * H + H, depth_macs = 2 * H * H + V * H;
    double depth_attention = 0;
    for (char s : c.mtp_hybrid_override_pattern) {
      const LayerKind k = static_cast<LayerKind>(s);
      depth_active += H + mixer_active_params(c, k);
      depth_macs += mixer_matmul_macs(c, k);
      if (k == LayerKind::attention) depth_attention += attention_flops_per_token(c, seq_len);
    }
    info.mtp_active_params = depth_active;
    info.mtp_forward_flops_per_token =
        static_cast<double>(c.mtp_depths()) * (2.0 * static_cast<double>(depth_macs) + depth_attention);
  }
  info.training_flops_per_token = 3.0 * (info.forward_flops_per_token + info.mtp_forward_flops_per_token);
  return info;
}

// ---- formatting ---------------------------------------------------------------------------------

std::string format_count(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

namespace {
std::string scaled(double x, const std::array<const char*, 5>& units) {
  static const double kScale[] = {1.0, 1e3, 1e6, 1e9, 1e12};
  int u = 0;
  while (u < 4 && std::fabs(x) >= kScale[u + 1]) ++u;
  if (u == 0) return fmt::format("{:.0f}{}{}", x, units[0][0] ? " " : "", units[0]);
  return fmt::format("{:.2f} {}", x / kScale[u], units[u]);
}
}  // namespace

std::string human_count(double n) { return scaled(n, {"", "K", "M", "B", "T"}); }
std::string human_flops(double f) { return scaled(f, {"FLOP", "KFLOP", "MFLOP", "GFLOP", "TFLOP"}); }

namespace {

std::string mtp_note(const ModelConfig& c, const ModelInfo& info) {
  return fmt::format("MTP: {} block{} of pattern \"{}\" ({} params = {}, counted in the total) run at {} depth{} "
                     "in training (loss weight {} / {}); generation does not run it",
                     c.num_nextn_predict_layers, c.num_nextn_predict_layers == 1 ? "" : "s",
                     c.mtp_hybrid_override_pattern, format_count(info.mtp_params), human_count(info.mtp_params),
                     c.mtp_depths(), c.mtp_depths() == 1 ? "" : "s", c.mtp_loss_scaling_factor, c.mtp_depths());
}

constexpr const char* kFlopsNote =
    "FLOPs/token = 2 x active matmul MACs (lm_head included) + causal attention 2*heads*head_dim*(T+1) per * "
    "layer; conv, SSM scan, norms and activations not counted; training = 3 x (forward + the MTP depths, if any)";

using LineFn = std::function<void(const std::string&)>;

// Nemotron-H: one row per layer kind present (every layer of a kind has the same size), then
// every layer five to a row.
void kind_tables(const ModelInfo& info, const LineFn& line) {
  // One row per layer kind present: count, params per layer, dims.
  line(fmt::format("  {:<3} {:<10} {:>6} {:>14} {:>14}  {}", "sym", "kind", "layers", "params/layer",
                   "active/layer", "dims"));
  for (LayerKind k : {LayerKind::mamba, LayerKind::attention, LayerKind::mlp, LayerKind::moe, LayerKind::linear}) {
    int64_t n = 0;
    const LayerInfo* first = nullptr;
    for (const LayerInfo& l : info.layers)
      if (l.kind == k) n++, first = first ? first : &l;
    if (n == 0) continue;
    line(fmt::format("  {:<3} {:<10} {:>6} {:>14} {:>14}  {}", static_cast<char>(k), layer_kind_name(k), n,
                     human_count(first->params), human_count(first->active_params), dims_text(first->dims)));
  }
  line("");

  // Every layer, five to a row.
  line("layers (index, symbol, params):");
  std::string row;
  for (size_t i = 0; i < info.layers.size(); ++i) {
    const LayerInfo& l = info.layers[i];
    row += fmt::format("  {:>4} {} {:>9}", l.index, static_cast<char>(l.kind), human_count(l.params));
    if (i % 5 == 4 || i + 1 == info.layers.size()) line(row), row.clear();
  }
  line("");

}

// DeciLM: every block is its own shape, so one row per block (B.5: 80 rows for the 49B).
void decilm_tables(const ModelConfig& c, const ModelInfo& info, const LineFn& line) {
  line(fmt::format("blocks:   {} (heads {}, head_dim {}; rope_theta {}{})", c.block_configs.size(),
                   c.num_attention_heads, c.attn_head_dim(), c.rope_theta,
                   c.rope_scaling_factor > 0 ? fmt::format(", llama3 scaling x{}", c.rope_scaling_factor) : ""));
  line("");
  line(fmt::format("  {:>5}  {:<18} {:<25} {:>14}", "block", "attention", "ffn", "params"));
  std::vector<int64_t> block_params(c.block_configs.size(), 0);
  for (const LayerInfo& l : info.layers) block_params[static_cast<size_t>(l.block)] += l.params;
  auto sub = [](SubBlock k, const std::string& normal) {
    return k == SubBlock::no_op ? std::string("no_op") : k == SubBlock::linear ? std::string("linear [H, H]") : normal;
  };
  for (size_t i = 0; i < c.block_configs.size(); ++i) {
    const DeciBlock& b = c.block_configs[i];
    const std::string attn = b.attention == SubBlock::normal
                                 ? fmt::format("gqa kv_heads={}", c.num_attention_heads / b.n_heads_in_group)
                                 : "";
    const std::string ffn =
        b.ffn == SubBlock::normal
            ? fmt::format("swiglu F={} ({:g})", decilm_ffn_width(b.ffn_mult, c.hidden_size), b.ffn_mult)
            : "";
    line(fmt::format("  {:>5}  {:<18} {:<25} {:>14}", i, sub(b.attention, attn), sub(b.ffn, ffn),
                     format_count(block_params[i])));
  }
  line("");
}

}  // namespace

std::string model_info_text(const ModelConfig& c, const ModelInfo& info, const std::string& source) {
  std::string out;
  auto line = [&](const std::string& s) { out += s + "\n"; };
  line(fmt::format("config:   {}", source));
  const std::string layers = c.is_decilm() ? fmt::format("{} blocks ({} residual sub-layers)", c.block_configs.size(),
                                                          c.num_layers())
                                           : fmt::format("{} layers", c.num_layers());
  line(fmt::format("model:    {}, {}, hidden {}, vocab {}, {} lm_head", c.model_type, layers, c.hidden_size,
                   c.vocab_size, c.tie_word_embeddings ? "tied" : "untied"));
  if (c.is_decilm()) {
    decilm_tables(c, info, line);
  } else {
    line(fmt::format("pattern:  {}", c.hybrid_override_pattern));
    line("");
    kind_tables(info, line);
  }

  auto count_line = [&](const char* name, int64_t n, const std::string& extra) {
    line(fmt::format("  {:<17} {:>17}  ({}{})", name, format_count(n), human_count(n), extra));
  };
  line("parameters:");
  count_line("embedding", info.embedding_params, "");
  count_line("layers", info.layer_params, "");
  count_line("final norm", info.final_norm_params, "");
  count_line("lm_head", info.lm_head_params, c.tie_word_embeddings ? ", tied to the embedding" : "");
  if (info.mtp_params > 0) count_line("mtp", info.mtp_params, "");
  count_line("total", info.total_params, "");
  std::string routing;
  if (c.hybrid_override_pattern.find('E') != std::string::npos)
    routing = fmt::format("; MoE routes {} of {} experts", c.num_experts_per_tok, c.n_routed_experts);
  count_line("active per token", info.active_params, routing);
  line("");
  line(fmt::format("compute per token at seq_len {}:", info.seq_len));
  line(fmt::format("  forward   {:>14}  (matmuls {}, attention {})", human_flops(info.forward_flops_per_token),
                   human_flops(info.matmul_flops_per_token), human_flops(info.attention_flops_per_token)));
  if (info.mtp_params > 0)
    line(fmt::format("  mtp       {:>14}  ({} depth{}, training only)", human_flops(info.mtp_forward_flops_per_token),
                     c.mtp_depths(), c.mtp_depths() == 1 ? "" : "s"));
  line(fmt::format("  training  {:>14}  (3 x {})", human_flops(info.training_flops_per_token),
                   info.mtp_params > 0 ? "(forward + mtp)" : "forward"));
  line("");
  if (info.mtp_params > 0) line("note: " + mtp_note(c, info));
  line("note: " + std::string(kFlopsNote));
  return out;
}

json model_info_json(const ModelConfig& c, const ModelInfo& info, const std::string& source) {
  json layers = json::array();
  for (const LayerInfo& l : info.layers) {
    json dims = json::object();
    for (const auto& [name, v] : l.dims) dims[name] = v;
    layers.push_back({{"index", l.index},
                      {"block", l.block},
                      {"symbol", std::string(1, static_cast<char>(l.kind))},
                      {"kind", layer_kind_name(l.kind)},
                      {"params", l.params},
                      {"active_params", l.active_params},
                      {"matmul_macs_per_token", l.matmul_macs},
                      {"forward_flops_per_token", l.forward_flops},
                      {"dims", dims}});
  }
  json notes = json::array();
  if (info.mtp_params > 0) notes.push_back(mtp_note(c, info));
  notes.push_back(kFlopsNote);
  return {{"config", source},
          {"model",
           {{"model_type", c.model_type},
            {"num_layers", c.num_layers()},
            {"hidden_size", c.hidden_size},
            {"vocab_size", c.vocab_size},
            {"hybrid_override_pattern", c.hybrid_override_pattern},
            {"tie_word_embeddings", c.tie_word_embeddings}}},
          {"layers", layers},
          {"params",
           {{"embedding", info.embedding_params},
            {"layers", info.layer_params},
            {"final_norm", info.final_norm_params},
            {"lm_head", info.lm_head_params},
            {"mtp", info.mtp_params},
            {"total", info.total_params},
            {"active_per_token", info.active_params},
            {"mtp_active_per_token", info.mtp_active_params}}},
          {"flops_per_token",
           {{"seq_len", info.seq_len},
            {"matmul", info.matmul_flops_per_token},
            {"attention", info.attention_flops_per_token},
            {"forward", info.forward_flops_per_token},
            {"mtp", info.mtp_forward_flops_per_token},
            {"training", info.training_flops_per_token}}},
          {"notes", notes}};
}

}  // namespace nemotron::model
