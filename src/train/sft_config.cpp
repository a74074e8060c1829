#include "train/sft_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/config_tree.h"
#include "core/error.h"
#include "train/plan.h"

namespace nemotron::train {

using nlohmann::json;

namespace {

void read_dataset(ConfigReader& root, SftConfig& c) {
  ConfigReader& d = root.section("dataset");
  SftDatasetSection& s = c.dataset;
  if (!d.has("dataset_root"))
    d.fail("dataset_root", "missing (the output_dir of `data prep sft`: splits/train, splits/valid, metadata.json)");
  s.dataset_root = d.get_string("dataset_root", "");
  if (!d.has("seq_length")) d.fail("seq_length", "missing (tokens per packed row: the data's pack_size)");
  s.seq_length = d.get_positive_int("seq_length", 0);
  if (s.seq_length < 2) d.fail("seq_length", fmt::format("expected an integer >= 2, got {}", s.seq_length));
  if (d.has("packed_sequence_specs")) {
    ConfigReader& p = d.section("packed_sequence_specs");
    const int64_t size = p.get_positive_int("packed_sequence_size", s.seq_length);
    if (size != s.seq_length)
      p.fail("packed_sequence_size", fmt::format("{} differs from dataset.seq_length {} (a packed row is one "
                                                 "sequence of the model: give them the same value)",
                                                 size, s.seq_length));
  }
  s.seed = static_cast<uint64_t>(d.get_nonnegative_int("seed", 1234));
  if (s.seq_length > c.model.max_position_embeddings)
    d.fail("seq_length", fmt::format("{} exceeds model.max_position_embeddings {}", s.seq_length,
                                     c.model.max_position_embeddings));
}

// The model's layer kinds that a LoRA target needs (so a target that names no module fails at
// read time, --dry-run included; attach_lora checks the built model again).
bool model_has_target(const model::ModelConfig& m, const std::string& target) {
  const std::string& p = m.hybrid_override_pattern;
  const auto has = [&](char c) { return p.find(c) != std::string::npos; };
  if (target == "linear_qkv" || target == "linear_proj") return has('*');
  if (target == "in_proj" || target == "out_proj") return has('M');
  const bool shared = has('E') && m.moe_shared_expert_intermediate_size > 0 && m.n_shared_experts > 0;
  return has('-') || shared;  // linear_fc1/fc2: a dense MLP or a shared expert
}

void read_peft(ConfigReader& root, SftConfig& c) {
  if (!root.has("peft")) {
    root.ignore("peft");
    return;
  }
  const json& raw = root.get_raw("peft");
  if (raw.is_string()) {
    const std::string scheme = raw.get<std::string>();
    if (scheme == "none") return;
    if (scheme != "lora") root.fail("peft", fmt::format("expected lora, none or a mapping, got \"{}\"", scheme));
    c.peft = model::LoraConfig{};
  } else {
    if (!raw.is_object()) root.fail("peft", "expected lora, none or a mapping (target_modules, dim, alpha, dropout)");
    ConfigReader& p = root.section("peft");
    model::LoraConfig l;
    const std::string scheme = p.get_string("scheme", "lora");
    if (scheme != "lora") p.fail("scheme", fmt::format("expected lora, got \"{}\"", scheme));
    if (p.has("target_modules")) {
      const json& t = p.get_raw("target_modules");
      if (!t.is_array() || t.empty()) p.fail("target_modules", "expected a non-empty list of module names");
      l.target_modules.clear();
      for (const json& v : t) {
        if (!v.is_string()) p.fail("target_modules", fmt::format("expected module names, got {}", describe_value(v)));
        l.target_modules.push_back(v.get<std::string>());
      }
    } else {
      p.ignore("target_modules");
    }
    l.dim = p.get_positive_int("dim", l.dim);
    l.alpha = p.get_number("alpha", l.alpha);
    if (!(l.alpha > 0)) p.fail("alpha", fmt::format("expected a positive number, got {}", l.alpha));
    l.dropout = p.get_number("dropout", l.dropout);
    if (!(l.dropout >= 0.0 && l.dropout < 1.0))
      p.fail("dropout", fmt::format("expected a probability in [0, 1) (the adapter input's dropout), got {}",
                                    l.dropout));
    c.peft = l;
  }
  for (const std::string& t : c.peft->target_modules) {
    if (t == "experts" || t == "linear_fc1_experts" || t == "linear_fc2_experts")
      throw_config_error(c.source, "peft.target_modules",
                         fmt::format("{}: the routed experts run as one grouped GEMM that takes no adapter; target "
                                     "linear_fc1/linear_fc2 (the dense MLP and the shared expert)",
                                     t));
    if (model::lora_hf_modules(t).empty())
      throw_config_error(c.source, "peft.target_modules",
                         fmt::format("unknown module \"{}\" (expected some of {})", t,
                                     fmt::join(model::lora_target_names(), ", ")));
    if (!model_has_target(c.model, t))
      throw_config_error(c.source, "peft.target_modules",
                         fmt::format("{} names no module of this model (pattern {})", t,
                                     c.model.hybrid_override_pattern));
  }
}

}  // namespace

SftConfig read_sft_config(const json& tree, const std::string& source) {
  SftConfig c;
  c.source = source;
  c.tree = tree;
  c.stage_name = "sft";
  ConfigReader root(c.tree, source);
  root.ignore("run");
  root.ignore("recipe");
  if (!root.has("model")) root.fail("model", "missing (a recipe holds the model's shape in its model: section)");
  c.model = model::read_model_config(root.section("model"));
  read_train_loop_config(root, c);
  read_dataset(root, c);
  read_peft(root, c);
  // LoRA freezes the whole base, the MoE correction bias included: its update (a change to a base
  // tensor that an adapter checkpoint would not hold) is off, the bias routes as loaded.
  if (c.peft) c.moe.moe_router_enable_expert_bias = false;
  c.seq_length = c.dataset.seq_length;
  c.data_seed = c.dataset.seed;
  root.check_unknown_keys();
  model::validate(c.model, source, "model");
  return c;
}

SftConfig load_sft_config(const std::string& path, const std::vector<std::string>& overrides,
                          const ConfigTreeHook& resolve) {
  json tree = load_config_file(path);
  if (!tree.is_object() && !tree.is_null()) throw_config_error(path, "", "expected a mapping of sections");
  apply_overrides(tree, overrides, path);
  if (resolve) resolve(tree, path);
  return read_sft_config(tree, path);
}

std::string sft_dry_run_text(const SftConfig& cfg, const std::string& recipe, size_t overrides) {
  const std::string data =
      fmt::format("data: packed SFT rows of {} (splits/train, splits/valid), {} tokens per row, seed {}",
                  cfg.dataset.dataset_root, cfg.dataset.seq_length, cfg.dataset.seed);
  return dry_run_text(cfg, cfg.model, data,
                      estimate_memory(cfg.model, cfg.train.micro_batch_size, cfg.dataset.seq_length,
                                      cfg.peft ? model::lora_param_count(cfg.model, *cfg.peft) : -1),
                      recipe,
                      overrides);
}

}  // namespace nemotron::train
