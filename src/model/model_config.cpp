// Reading, validating and writing ModelConfig. One reader serves both sources: a recipe's `model:`
// mapping (strict: unknown keys are errors) and a Hugging Face config.json (extra keys ignored).
// Field names and legacy aliases: reference/architectures.md A.1.1, A.1.3.
#include "model/model_config.h"

#include <cmath>
#include <filesystem>
#include <functional>
#include <initializer_list>

#include <fmt/format.h>

#include "core/config_tree.h"
#include "core/error.h"

namespace nemotron::model {

using nlohmann::json;

const char* layer_kind_name(LayerKind kind) {
  switch (kind) {
    case LayerKind::mamba: return "mamba";
    case LayerKind::attention: return "attention";
    case LayerKind::mlp: return "mlp";
    case LayerKind::moe: return "moe";
    case LayerKind::linear: return "linear";
  }
  return "?";
}

bool is_layer_symbol(char c) { return c == 'M' || c == '*' || c == '-' || c == 'E'; }

namespace {

// The key to read: `name` if given, else the first legacy alias given, else `name`. Two spellings
// given with different values are an error naming both.
std::string pick_alias(ConfigReader& r, const std::string& name, std::initializer_list<const char*> legacy) {
  std::string chosen = r.has(name) ? name : "";
  for (const char* alias : legacy) {
    if (!r.has(alias)) continue;
    if (chosen.empty()) {
      chosen = alias;
    } else if (r.get_raw(alias) != r.get_raw(chosen)) {
      r.fail(alias, fmt::format("{} conflicts with {}: {}; give only one", describe_value(r.get_raw(alias)),
                                chosen, describe_value(r.get_raw(chosen))));
    }
  }
  return chosen.empty() ? name : chosen;
}

char symbol_from_layer_type(const std::string& t) {
  if (t == "mamba" || t == "linear_attention") return 'M';
  if (t == "attention" || t == "full_attention") return '*';
  if (t == "mlp") return '-';
  if (t == "moe") return 'E';
  return 0;
}

// A `layers_block_type`-style list -> pattern string.
std::string pattern_from_list(ConfigReader& r, const std::string& key) {
  const json& list = r.get_raw(key);
  if (!list.is_array()) r.fail(key, "expected a list of layer types, got " + describe_value(list));
  std::string pattern;
  for (size_t i = 0; i < list.size(); ++i) {
    char c = list[i].is_string() ? symbol_from_layer_type(list[i].get<std::string>()) : 0;
    if (c == 0)
      r.fail(key, fmt::format("unknown layer type {} at index {} (expected mamba, attention, mlp or moe; "
                              "or linear_attention, full_attention)",
                              describe_value(list[i]), i));
    pattern += c;
  }
  return pattern;
}

// The pattern string under `string_key` first, else the list form under `list_key`; "" if neither.
std::string read_pattern(ConfigReader& r, const std::string& string_key, const std::string& list_key) {
  std::string pattern;
  if (r.has(string_key)) {
    pattern = r.get_string(string_key, "");
  } else if (r.has(list_key)) {
    pattern = pattern_from_list(r, list_key);
  }
  r.ignore(list_key);
  return pattern;
}

// One sub-block of a block_configs entry: no_op / replace_with_linear / normal.
SubBlock read_sub_block(ConfigReader& r) {
  const bool no_op = r.get_bool("no_op", false), linear = r.get_bool("replace_with_linear", false);
  if (no_op && linear) r.fail("no_op", "no_op and replace_with_linear are both true; give at most one");
  // Fields of other DeciLM variants (attention sinks, windows, sparsity): accepted when off.
  for (const char* k : {"sparsify", "window_length", "num_sink_tokens"})
    if (r.has(k)) r.fail(k, "unsupported (only null is accepted: the 49B and 253B models leave it null)");
  for (const char* k : {"use_prefill_window_in_sink_attention", "unshifted_sink"})
    if (r.get_bool(k, false)) r.fail(k, "unsupported (only false is accepted)");
  return no_op ? SubBlock::no_op : linear ? SubBlock::linear : SubBlock::normal;
}

// DeciLM `block_configs` (B.2): a list of {attention: {...}, ffn: {...}}.
std::vector<DeciBlock> read_block_configs(ConfigReader& r) {
  const json& list = r.get_raw("block_configs");
  if (!list.is_array() || list.empty())
    r.fail("block_configs", "expected a non-empty list of {attention: ..., ffn: ...}, got " + describe_value(list));
  std::vector<DeciBlock> blocks;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = fmt::format("{}[{}]", r.key_path("block_configs"), i);
    if (!list[i].is_object()) throw_config_error(r.source(), at, "expected a mapping, got " + describe_value(list[i]));
    ConfigReader e(list[i], r.source(), at);
    DeciBlock b;
    ConfigReader& a = e.section("attention");
    b.attention = read_sub_block(a);
    b.n_heads_in_group = a.get_positive_int("n_heads_in_group", 0);
    ConfigReader& f = e.section("ffn");
    b.ffn = read_sub_block(f);
    b.ffn_mult = f.get_number("ffn_mult", 0.0);
    e.check_unknown_keys();
    blocks.push_back(b);
  }
  return blocks;
}

// rope_scaling (B.3): null, or {rope_type: "llama3", factor, low_freq_factor, high_freq_factor,
// original_max_position_embeddings}.
void read_rope_scaling(ConfigReader& r, ModelConfig& c) {
  if (!r.has("rope_scaling")) return;
  ConfigReader& s = r.section("rope_scaling");
  const std::string type = s.has("rope_type") ? s.get_string("rope_type", "") : s.get_string("type", "");
  if (type != "llama3") s.fail("rope_type", fmt::format("supported: \"llama3\", got \"{}\"", type));
  c.rope_scaling_factor = s.get_number("factor", 0.0);
  c.rope_low_freq_factor = s.get_number("low_freq_factor", c.rope_low_freq_factor);
  c.rope_high_freq_factor = s.get_number("high_freq_factor", c.rope_high_freq_factor);
  c.rope_original_max_position_embeddings =
      s.get_positive_int("original_max_position_embeddings", c.rope_original_max_position_embeddings);
  if (!(c.rope_scaling_factor >= 1) || !std::isfinite(c.rope_scaling_factor))
    s.fail("factor", fmt::format("expected a number >= 1, got {}", c.rope_scaling_factor));
  if (!(c.rope_low_freq_factor > 0) || !(c.rope_high_freq_factor > c.rope_low_freq_factor))
    s.fail("high_freq_factor", fmt::format("expected 0 < low_freq_factor < high_freq_factor, got {} and {}",
                                           c.rope_low_freq_factor, c.rope_high_freq_factor));
}

}  // namespace

std::string decilm_pattern(const std::vector<DeciBlock>& blocks) {
  std::string p;
  for (const DeciBlock& b : blocks) {
    if (b.attention != SubBlock::no_op) p += b.attention == SubBlock::linear ? 'L' : '*';
    if (b.ffn != SubBlock::no_op) p += b.ffn == SubBlock::linear ? 'L' : '-';
  }
  return p;
}

ModelConfig read_model_config(ConfigReader& r) {
  ModelConfig c;
  c.model_type = r.get_string("model_type", c.model_type);
  c.vocab_size = r.get_positive_int("vocab_size", c.vocab_size);
  c.hidden_size = r.get_positive_int("hidden_size", c.hidden_size);

  // DeciLM: the stack comes from block_configs; Llama-3 RoPE and SwiGLU are fixed by the family.
  if (c.is_decilm()) {
    c.block_configs = read_block_configs(r);
    c.hybrid_override_pattern = decilm_pattern(c.block_configs);
    c.num_hidden_layers = r.get_positive_int("num_hidden_layers", 0);
    c.position_embedding_type = "rope";
    c.mlp_hidden_act = r.get_string("hidden_act", "silu");
    read_rope_scaling(r, c);
    for (const char* k : {"architectures", "auto_map", "torch_dtype", "transformers_version", "bos_token_id",
                          "eos_token_id", "pad_token_id", "attention_dropout", "pretraining_tp", "use_cache",
                          "hidden_act"})
      r.ignore(k);
  }
  // Pattern: the string first, then the list form of newer transformers.
  if (!c.is_decilm()) c.hybrid_override_pattern = read_pattern(r, "hybrid_override_pattern", "layers_block_type");
  if (!c.is_decilm() && r.has("num_hidden_layers")) {
    int64_t n = r.get_positive_int("num_hidden_layers", 0);
    if (!c.hybrid_override_pattern.empty() && n != c.num_layers())
      r.fail("num_hidden_layers", fmt::format("{} does not match the {} layers of the pattern \"{}\"", n,
                                              c.num_layers(), c.hybrid_override_pattern));
  }

  c.layer_norm_epsilon = static_cast<float>(
      r.get_number(pick_alias(r, "layer_norm_epsilon", {"rms_norm_eps", "norm_eps"}), c.layer_norm_epsilon));
  c.tie_word_embeddings = r.get_bool("tie_word_embeddings", c.tie_word_embeddings);
  c.initializer_range = r.get_number("initializer_range", c.initializer_range);
  c.rescale_prenorm_residual = r.get_bool("rescale_prenorm_residual", c.rescale_prenorm_residual);
  c.recompute_granularity = r.get_string("recompute_granularity", "");
  if (!c.recompute_granularity.empty() && c.recompute_granularity != "full")
    r.fail("recompute_granularity",
           fmt::format("supported: full (or leave it unset), got \"{}\"; \"selective\" recomputes only core attention in "
                       "Megatron, which our flash-style attention never stores",
                       c.recompute_granularity));
  c.max_position_embeddings = r.get_positive_int("max_position_embeddings", c.max_position_embeddings);
  // The parallel layout (checked against the world size and the model by parallel::RankLayout).
  c.parallel.tensor = r.get_positive_int("tensor_model_parallel_size", 1);
  c.parallel.context = r.get_positive_int("context_parallel_size", 1);
  c.parallel.expert = r.get_positive_int("expert_model_parallel_size", 1);
  c.parallel.sequence_parallel = r.get_bool("sequence_parallel", false);

  // Attention.
  c.num_attention_heads = r.get_positive_int("num_attention_heads", c.num_attention_heads);
  c.num_key_value_heads = r.get_positive_int("num_key_value_heads", c.num_attention_heads);  // absent = MHA
  c.head_dim = r.get_nonnegative_int(pick_alias(r, "head_dim", {"attention_head_dim"}), c.head_dim);
  c.attention_bias = r.get_bool("attention_bias", c.attention_bias);
  c.position_embedding_type = r.get_string("position_embedding_type", c.position_embedding_type);
  c.rope_theta = r.get_number("rope_theta", c.rope_theta);

  // Dense MLP.
  c.intermediate_size = r.get_positive_int("intermediate_size", c.intermediate_size);
  c.mlp_hidden_act = r.get_string("mlp_hidden_act", c.mlp_hidden_act);
  c.mlp_bias = r.get_bool("mlp_bias", c.mlp_bias);

  // Mamba-2.
  c.mamba_num_heads = r.get_positive_int("mamba_num_heads", c.mamba_num_heads);
  c.mamba_head_dim = r.get_positive_int("mamba_head_dim", c.mamba_head_dim);
  c.n_groups = r.get_positive_int(pick_alias(r, "n_groups", {"mamba_n_groups"}), c.n_groups);
  c.ssm_state_size = r.get_positive_int("ssm_state_size", c.ssm_state_size);
  c.conv_kernel = r.get_positive_int(pick_alias(r, "conv_kernel", {"mamba_d_conv"}), c.conv_kernel);
  c.chunk_size = r.get_positive_int(pick_alias(r, "chunk_size", {"mamba_chunk_size"}), c.chunk_size);
  c.use_conv_bias = r.get_bool(pick_alias(r, "use_conv_bias", {"mamba_conv_bias"}), c.use_conv_bias);
  c.use_bias = r.get_bool(pick_alias(r, "use_bias", {"mamba_proj_bias"}), c.use_bias);
  c.time_step_min = r.get_number(pick_alias(r, "time_step_min", {"mamba_dt_min"}), c.time_step_min);
  c.time_step_max = r.get_number(pick_alias(r, "time_step_max", {"mamba_dt_max"}), c.time_step_max);
  c.time_step_floor = r.get_number(pick_alias(r, "time_step_floor", {"mamba_dt_init_floor"}), c.time_step_floor);
  const std::string limit_key = pick_alias(r, "time_step_limit", {"mamba_dt_limit"});
  if (const json& limit = r.get_raw(limit_key); !limit.is_null()) {
    std::optional<double> lo, hi;
    if (limit.is_array() && limit.size() == 2) lo = json_number(limit[0]), hi = json_number(limit[1]);
    if (!lo || !hi) r.fail(limit_key, "expected a list [min, max] of two numbers, got " + describe_value(limit));
    c.time_step_limit_min = *lo;
    c.time_step_limit_max = *hi;
  }
  r.ignore("expand");  // legacy: d_inner comes from mamba_num_heads * mamba_head_dim
  r.ignore("mamba_expand");
  if (std::string act = r.get_string("mamba_hidden_act", "silu"); act != "silu")
    r.fail("mamba_hidden_act", fmt::format("unsupported activation \"{}\" (the Mamba-2 conv uses silu)", act));

  // MoE.
  c.n_routed_experts = r.get_positive_int("n_routed_experts", c.n_routed_experts);
  c.num_experts_per_tok = r.get_positive_int("num_experts_per_tok", c.num_experts_per_tok);
  c.moe_intermediate_size = r.get_positive_int("moe_intermediate_size", c.moe_intermediate_size);
  c.moe_shared_expert_intermediate_size =
      r.get_nonnegative_int("moe_shared_expert_intermediate_size", c.moe_shared_expert_intermediate_size);
  // A shared-expert width without a count means one shared expert (the HF default count is 1).
  c.n_shared_experts = r.get_nonnegative_int("n_shared_experts", c.moe_shared_expert_intermediate_size > 0 ? 1 : 0);
  c.moe_latent_size = r.get_nonnegative_int("moe_latent_size", c.moe_latent_size);
  c.routed_scaling_factor = r.get_number("routed_scaling_factor", c.routed_scaling_factor);
  c.norm_topk_prob = r.get_bool("norm_topk_prob", c.norm_topk_prob);
  c.n_group = r.get_positive_int("n_group", c.n_group);
  c.topk_group = r.get_positive_int("topk_group", c.topk_group);

  // MTP.
  c.num_nextn_predict_layers = r.get_nonnegative_int("num_nextn_predict_layers", c.num_nextn_predict_layers);
  c.mtp_hybrid_override_pattern = read_pattern(r, "mtp_hybrid_override_pattern", "mtp_layers_block_type");
  c.mtp_num_layers = r.get_nonnegative_int("mtp_num_layers", c.mtp_num_layers);
  c.mtp_loss_scaling_factor = r.get_number("mtp_loss_scaling_factor", c.mtp_loss_scaling_factor);
  return c;
}

namespace {

void check_pattern(const std::string& pattern, const std::string& source, const std::string& key) {
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (is_layer_symbol(c)) continue;
    std::string hint = "expected M, *, - or E";
    if (c == '/')
      hint += "; Megatron's MTP separator '/' is not accepted here: put the MTP part in mtp_hybrid_override_pattern";
    std::string shown =
        c >= 32 && c < 127 ? std::string(1, c) : fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    throw_config_error(source, key, fmt::format("unknown layer symbol '{}' at position {} in \"{}\" ({})", shown, i,
                                                pattern, hint));
  }
}

// DeciLM (B.2, B.3): the shared sizes, then every block_configs entry, each error naming its
// entry's key. The stack's layers (layer_spec.h) are built from the config only after this.
void validate_decilm(const ModelConfig& c, const std::function<void(const std::string&, const std::string&)>& fail) {
  auto positive = [&](const char* f, int64_t v) {
    if (v <= 0) fail(f, v == 0 ? "missing (expected a positive integer)" : fmt::format("expected a positive integer, got {}", v));
  };
  positive("vocab_size", c.vocab_size);
  positive("hidden_size", c.hidden_size);
  positive("num_attention_heads", c.num_attention_heads);
  if (c.head_dim < 0) fail("head_dim", fmt::format("expected a non-negative integer, got {}", c.head_dim));
  if (c.head_dim == 0 && c.hidden_size % c.num_attention_heads != 0)
    fail("num_attention_heads", fmt::format("{} does not divide hidden_size {} (and head_dim is not given)",
                                            c.num_attention_heads, c.hidden_size));
  if (c.attn_head_dim() % 2 != 0) fail("head_dim", fmt::format("RoPE needs an even head size, got {}", c.attn_head_dim()));
  const int64_t n = static_cast<int64_t>(c.block_configs.size());
  if (c.num_hidden_layers == 0) fail("num_hidden_layers", fmt::format("missing (block_configs has {} entries)", n));
  if (c.num_hidden_layers != n)
    fail("block_configs", fmt::format("has {} entries but num_hidden_layers is {} (one entry per layer)", n,
                                      c.num_hidden_layers));
  if (n > 4096) fail("block_configs", fmt::format("{} layers is beyond any real model (at most 4096)", n));
  // Multi-token prediction (A.8) is Nemotron-H's; its blocks are built from a Nemotron-H pattern.
  if (c.num_nextn_predict_layers > 0 || c.mtp_num_layers > 0)
    fail(c.num_nextn_predict_layers > 0 ? "num_nextn_predict_layers" : "mtp_num_layers",
         "multi-token prediction is not part of a nemotron-nas (DeciLM) model; expected 0");
  if (c.mlp_hidden_act != "silu") fail("hidden_act", fmt::format("supported: silu (SwiGLU), got \"{}\"", c.mlp_hidden_act));
  if (!(c.layer_norm_epsilon > 0) || !std::isfinite(c.layer_norm_epsilon))
    fail("rms_norm_eps", fmt::format("expected a positive number, got {}", c.layer_norm_epsilon));
  if (!(c.rope_theta > 0)) fail("rope_theta", fmt::format("expected a positive number, got {}", c.rope_theta));
  if (c.max_position_embeddings <= 0) fail("max_position_embeddings", "expected a positive integer");
  constexpr int64_t kMaxWidth = int64_t{1} << 20;  // the 253B's widest FFN is 425984
  if (c.vocab_size > (int64_t{1} << 22) || c.hidden_size > (int64_t{1} << 17))
    fail(c.vocab_size > (int64_t{1} << 22) ? "vocab_size" : "hidden_size", "beyond any real model");
  for (int64_t i = 0; i < n; ++i) {
    const DeciBlock& b = c.block_configs[i];
    const std::string at = fmt::format("block_configs[{}].", i);
    if (b.attention == SubBlock::normal) {
      if (b.n_heads_in_group <= 0)
        fail(at + "attention.n_heads_in_group", "missing (normal attention needs query heads per KV head)");
      if (c.num_attention_heads % b.n_heads_in_group != 0)
        fail(at + "attention.n_heads_in_group", fmt::format("{} does not divide num_attention_heads {}",
                                                            b.n_heads_in_group, c.num_attention_heads));
    }
    if (b.ffn == SubBlock::normal) {
      if (!(b.ffn_mult > 0) || !std::isfinite(b.ffn_mult))
        fail(at + "ffn.ffn_mult", fmt::format("expected a positive number, got {}", b.ffn_mult));
      if (b.ffn_mult * static_cast<double>(c.hidden_size) > static_cast<double>(kMaxWidth))
        fail(at + "ffn.ffn_mult", fmt::format("{} gives an FFN beyond any real model", b.ffn_mult));
    }
  }
}

}  // namespace

void validate(const ModelConfig& c, const std::string& source, const std::string& section) {
  auto key = [&](const std::string& f) { return section.empty() ? f : section + "." + f; };
  auto fail = [&](const std::string& f, const std::string& problem) { throw_config_error(source, key(f), problem); };
  // A size some layer needs: 0 means it was never given.
  auto need_positive = [&](const char* f, int64_t v, const std::string& why) {
    if (v == 0) fail(f, fmt::format("missing ({}; expected a positive integer)", why));
    if (v < 0) fail(f, fmt::format("expected a positive integer, got {}", v));
  };
  auto need_nonnegative = [&](const char* f, int64_t v) {
    if (v < 0) fail(f, fmt::format("expected a non-negative integer, got {}", v));
  };

  // Sizes far beyond any real model would overflow the 64-bit parameter and FLOP counts downstream
  // (model info, the memory plan): bounded here, each by its key, with room to spare (the largest
  // published widths are below 2^17, vocabularies below 2^22).
  auto need_at_most = [&](const char* f, int64_t v, int64_t most) {
    if (v > most) fail(f, fmt::format("{} is beyond any real model (at most {})", v, most));
  };
  constexpr int64_t kMaxWidth = int64_t{1} << 17;
  need_at_most("vocab_size", c.vocab_size, int64_t{1} << 22);
  need_at_most("max_position_embeddings", c.max_position_embeddings, int64_t{1} << 24);
  for (auto [f, v] : {std::pair<const char*, int64_t>{"hidden_size", c.hidden_size},
                      {"num_attention_heads", c.num_attention_heads}, {"num_key_value_heads", c.num_key_value_heads},
                      {"head_dim", c.head_dim}, {"intermediate_size", c.intermediate_size},
                      {"mamba_num_heads", c.mamba_num_heads}, {"mamba_head_dim", c.mamba_head_dim},
                      {"n_groups", c.n_groups}, {"ssm_state_size", c.ssm_state_size}, {"conv_kernel", c.conv_kernel},
                      {"chunk_size", c.chunk_size}, {"moe_intermediate_size", c.moe_intermediate_size},
                      {"moe_shared_expert_intermediate_size", c.moe_shared_expert_intermediate_size},
                      {"moe_latent_size", c.moe_latent_size}})
    need_at_most(f, v, kMaxWidth);
  for (auto [f, v] : {std::pair<const char*, int64_t>{"n_routed_experts", c.n_routed_experts},
                      {"num_experts_per_tok", c.num_experts_per_tok}, {"n_shared_experts", c.n_shared_experts},
                      {"n_group", c.n_group}, {"topk_group", c.topk_group},
                      {"num_nextn_predict_layers", c.num_nextn_predict_layers},
                      {"mtp_num_layers", c.mtp_num_layers}})
    need_at_most(f, v, 4096);
  if (c.num_layers() > 4096)
    fail("hybrid_override_pattern", fmt::format("{} layers is beyond any real model (at most 4096)", c.num_layers()));

  if (c.is_decilm()) {
    validate_decilm(c, fail);
    return;
  }
  if (c.model_type != "nemotron_h")
    fail("model_type",
         fmt::format("unsupported model type \"{}\" (expected \"nemotron_h\" or \"nemotron-nas\")", c.model_type));
  need_positive("vocab_size", c.vocab_size, "every model has an embedding");
  need_positive("hidden_size", c.hidden_size, "every model has a hidden size");
  if (c.hybrid_override_pattern.empty())
    fail("hybrid_override_pattern",
         "missing (give hybrid_override_pattern, one of M * - E per layer, or layers_block_type)");
  check_pattern(c.hybrid_override_pattern, source, key("hybrid_override_pattern"));
  need_nonnegative("num_nextn_predict_layers", c.num_nextn_predict_layers);
  std::string kinds = c.hybrid_override_pattern;
  if (c.num_nextn_predict_layers > 0) {
    if (c.mtp_hybrid_override_pattern.empty())
      fail("mtp_hybrid_override_pattern",
           fmt::format("missing (num_nextn_predict_layers is {}; give the MTP block's pattern, e.g. \"*E\")",
                       c.num_nextn_predict_layers));
    check_pattern(c.mtp_hybrid_override_pattern, source, key("mtp_hybrid_override_pattern"));
    kinds += c.mtp_hybrid_override_pattern;
    need_nonnegative("mtp_num_layers", c.mtp_num_layers);
    if (c.num_nextn_predict_layers > 1 && c.mtp_num_layers > 0 && c.mtp_num_layers != c.num_nextn_predict_layers)
      fail("mtp_num_layers",
           fmt::format("{} depths for {} MTP blocks (num_nextn_predict_layers); expected one block reused at every "
                       "depth (num_nextn_predict_layers: 1) or one block per depth",
                       c.mtp_num_layers, c.num_nextn_predict_layers));
    if (!(c.mtp_loss_scaling_factor >= 0) || !std::isfinite(c.mtp_loss_scaling_factor))
      fail("mtp_loss_scaling_factor",
           fmt::format("expected a non-negative number, got {}", c.mtp_loss_scaling_factor));
  } else if (c.mtp_num_layers > 0) {
    fail("mtp_num_layers", fmt::format("is {} but num_nextn_predict_layers is 0 (no MTP block to run; set "
                                       "num_nextn_predict_layers: 1 and mtp_hybrid_override_pattern)",
                                       c.mtp_num_layers));
  }
  auto has = [&](LayerKind k) { return kinds.find(static_cast<char>(k)) != std::string::npos; };

  if (!(c.layer_norm_epsilon > 0) || !std::isfinite(c.layer_norm_epsilon))
    fail("layer_norm_epsilon", fmt::format("expected a positive number, got {}", c.layer_norm_epsilon));
  if (!(c.initializer_range >= 0) || !std::isfinite(c.initializer_range))
    fail("initializer_range", fmt::format("expected a non-negative number, got {}", c.initializer_range));
  need_positive("max_position_embeddings", c.max_position_embeddings, "the longest sequence");

  if (has(LayerKind::mamba)) {
    const std::string why = "the pattern has M layers";
    need_positive("mamba_num_heads", c.mamba_num_heads, why);
    need_positive("mamba_head_dim", c.mamba_head_dim, why);
    need_positive("n_groups", c.n_groups, why);
    need_positive("ssm_state_size", c.ssm_state_size, why);
    need_positive("conv_kernel", c.conv_kernel, why);
    need_positive("chunk_size", c.chunk_size, why);
    if (c.mamba_num_heads % c.n_groups != 0)
      fail("mamba_num_heads",
           fmt::format("{} is not divisible by n_groups {}", c.mamba_num_heads, c.n_groups));
    if (!(c.time_step_min > 0) || !(c.time_step_min <= c.time_step_max) || !std::isfinite(c.time_step_max))
      fail("time_step_min", fmt::format("expected 0 < time_step_min <= time_step_max, got {} and {}",
                                        c.time_step_min, c.time_step_max));
    if (!(c.time_step_floor >= 0))
      fail("time_step_floor", fmt::format("expected a non-negative number, got {}", c.time_step_floor));
    if (!(c.time_step_limit_min >= 0) || !(c.time_step_limit_min <= c.time_step_limit_max))
      fail("time_step_limit", fmt::format("expected 0 <= min <= max, got [{}, {}]", c.time_step_limit_min,
                                          c.time_step_limit_max));
  }
  if (has(LayerKind::attention)) {
    const std::string why = "the pattern has * layers";
    need_positive("num_attention_heads", c.num_attention_heads, why);
    need_positive("num_key_value_heads", c.num_key_value_heads, why);
    need_nonnegative("head_dim", c.head_dim);
    if (c.num_attention_heads % c.num_key_value_heads != 0)
      fail("num_attention_heads", fmt::format("{} is not divisible by num_key_value_heads {}",
                                              c.num_attention_heads, c.num_key_value_heads));
    if (c.head_dim == 0 && c.hidden_size % c.num_attention_heads != 0)
      fail("head_dim", fmt::format("missing, and hidden_size {} is not divisible by num_attention_heads {}",
                                   c.hidden_size, c.num_attention_heads));
    if (c.position_embedding_type != "none" && c.position_embedding_type != "rope")
      fail("position_embedding_type",
           fmt::format("unknown value \"{}\" (expected \"none\" or \"rope\")", c.position_embedding_type));
    if (c.position_embedding_type == "rope" && !(c.rope_theta > 0))
      fail("rope_theta", fmt::format("expected a positive number, got {}", c.rope_theta));
  }
  if (has(LayerKind::mlp)) need_positive("intermediate_size", c.intermediate_size, "the pattern has - layers");
  if (has(LayerKind::mlp) || has(LayerKind::moe)) {
    if (c.mlp_hidden_act != "relu2" && c.mlp_hidden_act != "silu" && c.mlp_hidden_act != "swiglu")
      fail("mlp_hidden_act",
           fmt::format("unknown activation \"{}\" (expected relu2, silu or swiglu)", c.mlp_hidden_act));
  }
  if (has(LayerKind::moe)) {
    const std::string why = "the pattern has E layers";
    need_positive("n_routed_experts", c.n_routed_experts, why);
    need_positive("num_experts_per_tok", c.num_experts_per_tok, why);
    need_positive("moe_intermediate_size", c.moe_intermediate_size, why);
    need_positive("n_group", c.n_group, "group-limited routing; 1 = off");
    need_positive("topk_group", c.topk_group, "group-limited routing; 1 = off");
    need_nonnegative("n_shared_experts", c.n_shared_experts);
    need_nonnegative("moe_shared_expert_intermediate_size", c.moe_shared_expert_intermediate_size);
    need_nonnegative("moe_latent_size", c.moe_latent_size);
    if (c.num_experts_per_tok > c.n_routed_experts)
      fail("num_experts_per_tok",
           fmt::format("{} exceeds n_routed_experts {}", c.num_experts_per_tok, c.n_routed_experts));
    if (c.n_routed_experts % c.n_group != 0)
      fail("n_routed_experts", fmt::format("{} is not divisible by n_group {}", c.n_routed_experts, c.n_group));
    if (c.topk_group > c.n_group)
      fail("topk_group", fmt::format("{} exceeds n_group {}", c.topk_group, c.n_group));
    int64_t reachable = c.topk_group * (c.n_routed_experts / c.n_group);
    if (c.num_experts_per_tok > reachable)
      fail("num_experts_per_tok",
           fmt::format("{} exceeds the {} experts of the topk_group {} selected groups "
                       "(n_routed_experts {} / n_group {} per group)",
                       c.num_experts_per_tok, reachable, c.topk_group, c.n_routed_experts, c.n_group));
    if (c.n_shared_experts > 0 && c.moe_shared_expert_intermediate_size == 0)
      fail("moe_shared_expert_intermediate_size",
           fmt::format("missing (n_shared_experts is {}; expected a positive integer)", c.n_shared_experts));
    if (c.n_shared_experts == 0 && c.moe_shared_expert_intermediate_size > 0)
      fail("n_shared_experts",
           fmt::format("is 0 but moe_shared_expert_intermediate_size is {} (set n_shared_experts: 1, "
                       "or the size to 0 for no shared expert)",
                       c.moe_shared_expert_intermediate_size));
    if (!(c.routed_scaling_factor > 0) || !std::isfinite(c.routed_scaling_factor))
      fail("routed_scaling_factor", fmt::format("expected a positive number, got {}", c.routed_scaling_factor));
  }
}

ModelConfig model_config_from_json(const json& j, const std::string& source, bool strict) {
  ConfigReader r(j, source, strict ? "model" : "");
  ModelConfig c = read_model_config(r);
  if (strict) r.check_unknown_keys();
  validate(c, source, r.path());
  return c;
}

ModelConfig load_model_config(const std::string& path, const std::vector<std::string>& overrides) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext != ".json" && ext != ".yaml" && ext != ".yml")
    throw_config_error(path, "", "expected a recipe (.yaml/.yml) or a Hugging Face config.json (.json)");
  json tree = load_config_file(path);
  apply_overrides(tree, overrides, "command line");
  if (ext == ".json") {
    if (!tree.is_object()) throw_config_error(path, "", "expected a JSON object, got " + describe_value(tree));
    return model_config_from_json(tree, path, /*strict=*/false);
  }
  ConfigReader root(tree, path);
  if (!root.has("model"))
    throw_config_error(path, "model", "missing (a recipe holds the model's shape in its model: section)");
  return model_config_from_json(root.get_raw("model"), path, /*strict=*/true);
}

json decilm_config_to_hf_json(const ModelConfig& c) {
  json j;
  j["architectures"] = json::array({"DeciLMForCausalLM"});
  j["model_type"] = "nemotron-nas";
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["num_hidden_layers"] = static_cast<int64_t>(c.block_configs.size());
  j["num_attention_heads"] = c.num_attention_heads;
  if (c.head_dim > 0) j["head_dim"] = c.head_dim;
  j["num_key_value_heads"] = nullptr;  // per layer (B.2)
  j["intermediate_size"] = nullptr;
  j["hidden_act"] = c.mlp_hidden_act;
  j["rms_norm_eps"] = std::stod(fmt::format("{}", c.layer_norm_epsilon));
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["initializer_range"] = c.initializer_range;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["attention_bias"] = c.attention_bias;
  j["mlp_bias"] = c.mlp_bias;
  j["rope_theta"] = c.rope_theta;
  if (c.rope_scaling_factor > 0)
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", c.rope_scaling_factor},
                         {"low_freq_factor", c.rope_low_freq_factor},
                         {"high_freq_factor", c.rope_high_freq_factor},
                         {"original_max_position_embeddings", c.rope_original_max_position_embeddings}};
  else
    j["rope_scaling"] = nullptr;
  json blocks = json::array();
  for (const DeciBlock& b : c.block_configs) {
    json a = {{"no_op", b.attention == SubBlock::no_op}, {"replace_with_linear", b.attention == SubBlock::linear},
              {"n_heads_in_group", b.attention == SubBlock::normal ? json(b.n_heads_in_group) : json(nullptr)},
              {"sparsify", nullptr}};
    json f = {{"no_op", b.ffn == SubBlock::no_op}, {"replace_with_linear", b.ffn == SubBlock::linear},
              {"ffn_mult", b.ffn == SubBlock::normal ? json(b.ffn_mult) : json(nullptr)}, {"sparsify", nullptr}};
    blocks.push_back({{"attention", a}, {"ffn", f}});
  }
  j["block_configs"] = blocks;
  return j;
}

json model_config_to_hf_json(const ModelConfig& c) {
  if (c.is_decilm()) return decilm_config_to_hf_json(c);
  json j;
  // Sizes of layer kinds the pattern does not use stay 0 here; they are left out (transformers
  // then keeps its defaults, which nothing uses).
  auto put_size = [&](const char* key, int64_t v) {
    if (v > 0) j[key] = v;
  };
  j["architectures"] = json::array({"NemotronHForCausalLM"});
  j["model_type"] = c.model_type;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["hybrid_override_pattern"] = c.hybrid_override_pattern;
  j["num_hidden_layers"] = c.num_layers();
  j["layer_norm_epsilon"] = std::stod(fmt::format("{}", c.layer_norm_epsilon));  // 1e-05, not 9.99e-06
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["initializer_range"] = c.initializer_range;
  j["rescale_prenorm_residual"] = c.rescale_prenorm_residual;
  j["residual_in_fp32"] = false;
  j["max_position_embeddings"] = c.max_position_embeddings;

  put_size("num_attention_heads", c.num_attention_heads);
  put_size("num_key_value_heads", c.num_key_value_heads);
  if (c.head_dim > 0 || c.num_attention_heads > 0) j["head_dim"] = c.attn_head_dim();
  j["attention_bias"] = c.attention_bias;
  j["rope_theta"] = c.rope_theta;
  if (c.position_embedding_type != "none") j["position_embedding_type"] = c.position_embedding_type;

  put_size("intermediate_size", c.intermediate_size);
  j["mlp_hidden_act"] = c.mlp_hidden_act;
  j["mlp_bias"] = c.mlp_bias;

  put_size("mamba_num_heads", c.mamba_num_heads);
  put_size("mamba_head_dim", c.mamba_head_dim);
  j["n_groups"] = c.n_groups;
  put_size("ssm_state_size", c.ssm_state_size);
  j["conv_kernel"] = c.conv_kernel;
  j["chunk_size"] = c.chunk_size;
  j["use_conv_bias"] = c.use_conv_bias;
  j["use_bias"] = c.use_bias;
  j["mamba_proj_bias"] = c.use_bias;
  j["mamba_hidden_act"] = "silu";
  j["time_step_min"] = c.time_step_min;
  j["time_step_max"] = c.time_step_max;
  j["time_step_floor"] = c.time_step_floor;
  if (c.time_step_limit_min != 0.0 || !std::isinf(c.time_step_limit_max)) {
    auto bound = [](double v) -> json {
      if (std::isinf(v)) return {{"__float__", v > 0 ? "Infinity" : "-Infinity"}};
      return v;
    };
    j["time_step_limit"] = json::array({bound(c.time_step_limit_min), bound(c.time_step_limit_max)});
  }

  put_size("n_routed_experts", c.n_routed_experts);
  put_size("num_experts_per_tok", c.num_experts_per_tok);
  put_size("moe_intermediate_size", c.moe_intermediate_size);
  j["moe_shared_expert_intermediate_size"] = c.moe_shared_expert_intermediate_size;
  j["n_shared_experts"] = c.n_shared_experts;
  j["moe_latent_size"] = c.moe_latent_size > 0 ? json(c.moe_latent_size) : json(nullptr);
  j["routed_scaling_factor"] = c.routed_scaling_factor;
  j["norm_topk_prob"] = c.norm_topk_prob;
  j["n_group"] = c.n_group;
  j["topk_group"] = c.topk_group;

  j["num_nextn_predict_layers"] = c.num_nextn_predict_layers;
  if (!c.mtp_hybrid_override_pattern.empty()) j["mtp_hybrid_override_pattern"] = c.mtp_hybrid_override_pattern;
  return j;
}

}  // namespace nemotron::model
