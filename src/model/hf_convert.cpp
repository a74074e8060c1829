// Import, export and round trip between Hugging Face directories and native checkpoints. Shards
// are written one at a time; a tensor that keeps its dtype is written from the mapped source.
#include "model/hf_convert.h"

#include "io/checkpoint_layout.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "core/config_tree.h"
#include "core/error.h"
#include "data/tokenizer.h"
#include "io/mapped_file.h"
#include "io/staged_dir.h"
#include "model/layer_spec.h"

namespace nemotron::model {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {


// config.json fields that ModelConfig does not hold, which transformers reads and which do not
// change the computation; an import records them and an export writes them back.
const std::vector<std::string>& carried_hf_fields() {
  static const std::vector<std::string> keys = {"bos_token_id",       "eos_token_id",          "pad_token_id",
                                                "num_logits_to_keep", "mamba_ssm_cache_dtype", "use_cache"};
  return keys;
}

std::string human_bytes(double b) {
  const char* unit[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) b /= 1000, ++u;
  return u == 0 ? fmt::format("{:.0f} B", b) : fmt::format("{:.2f} {}", b, unit[u]);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A tensor to write: its Hub name, and how to get it (a view of mapped bytes or a converted copy).
struct OutTensor {
  std::string name;
  Shape shape;
  DType dtype;
  std::function<Tensor()> make;
};

// A host tensor over bytes that someone else keeps alive (the caller holds the mapping).
Tensor view_bytes(const Shape& shape, DType dtype, std::span<const uint8_t> bytes) {
  Tensor t = Tensor::wrap(shape, dtype, host_backend(), std::shared_ptr<void>(),
                          const_cast<uint8_t*>(bytes.data()));  // only ever read
  NM_CHECK(t.nbytes() == bytes.size(), "{} bytes for {}", bytes.size(), t.describe());
  return t;
}

// Shards as transformers makes them: in order, a new shard when the next tensor would overflow.
// Returns the file names written (relative to dir).
std::vector<std::string> write_shards(const std::string& dir, const std::string& shown_dir,
                                      const std::vector<OutTensor>& tensors, size_t max_shard_bytes,
                                      const Progress& progress) {
  std::vector<std::vector<size_t>> shards(1);
  std::vector<size_t> shard_bytes(1, 0);
  size_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    size_t b = static_cast<size_t>(tensors[i].shape.numel()) * dtype_size(tensors[i].dtype);
    if (!shards.back().empty() && shard_bytes.back() + b > max_shard_bytes)
      shards.emplace_back(), shard_bytes.push_back(0);
    shards.back().push_back(i);
    shard_bytes.back() += b;
    total += b;
  }
  const size_t n = shards.size();
  progress(fmt::format("writing {}: {} tensors, {} in {} shard{}", shown_dir, tensors.size(),
                       human_bytes(static_cast<double>(total)), n, n == 1 ? "" : "s"));
  std::vector<std::string> names;
  json weight_map = json::object();
  for (size_t s = 0; s < n; ++s) {
    auto t0 = std::chrono::steady_clock::now();
    std::string file = n == 1 ? "model.safetensors" : fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, n);
    std::vector<io::NamedTensor> named;
    for (size_t i : shards[s]) {
      Tensor t = tensors[i].make();
      NM_CHECK(t.shape() == tensors[i].shape && t.dtype() == tensors[i].dtype, "{}: made {}, planned {} {}",
               tensors[i].name, t.describe(), dtype_name(tensors[i].dtype), tensors[i].shape.str());
      named.push_back({tensors[i].name, std::move(t)});
      weight_map[tensors[i].name] = file;
    }
    io::save_safetensors(dir + "/" + file, named, {{"format", "pt"}});
    names.push_back(file);
    double sec = seconds_since(t0);
    progress(fmt::format("  [{}/{}] {}: {} tensors, {} in {:.1f} s", s + 1, n, file, named.size(),
                         human_bytes(static_cast<double>(shard_bytes[s])), sec));
  }
  if (n > 1) {
    json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    std::string text = index.dump(2) + "\n";
    io::write_file_atomically(dir + "/model.safetensors.index.json", text.data(), text.size());
    names.push_back("model.safetensors.index.json");
  }
  return names;
}

bool is_our_weight_file(const std::string& f) {
  static const std::regex shard(R"(model-\d+-of-\d+\.safetensors)");
  return f == "model.safetensors" || f == "model.safetensors.index.json" || std::regex_match(f, shard);
}

// Checks `out` before anything is written: absent, empty, or replaced with force. The new
// directory replaces it as a whole (io::StagedDir), so nothing of an earlier model is left beside
// the new one; entries a convert does not write (`ours` is false: the user's notes, ...) are
// returned so that carry_over() keeps them.
std::vector<fs::path> check_out(const std::string& out, const std::string& source, bool force,
                                const std::function<bool(const std::string&)>& ours) {
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec))
    throw InputError(fmt::format("{}: exists and is not a directory", out));
  if (fs::exists(out, ec) && fs::exists(source, ec) && fs::equivalent(out, source, ec))
    throw InputError(fmt::format("{}: is the source itself; choose another --out", out));
  std::vector<fs::path> foreign;
  if (!fs::is_directory(out, ec) || fs::is_empty(out, ec)) return foreign;
  if (!force)
    throw InputError(
        fmt::format("{}: exists and is not empty (pass --force to replace the checkpoint "
                    "files in it)",
                    out));
  for (const auto& entry : fs::directory_iterator(out))
    if (!ours(entry.path().filename().string())) foreign.push_back(entry.path());
  return foreign;
}

// Puts the `foreign` entries of the old directory into the staged one (hard links where the file
// system allows, else copies), so that swapping it in keeps them.
void carry_over(const std::vector<fs::path>& foreign, const fs::path& staged) {
  for (const fs::path& p : foreign) {
    const fs::path to = staged / p.filename();
    std::error_code ec;
    fs::copy(p, to, fs::copy_options::recursive | fs::copy_options::create_hard_links, ec);
    if (ec) {
      fs::remove_all(to, ec);
      fs::copy(p, to, fs::copy_options::recursive, ec);
    }
    if (ec) throw Error(fmt::format("{}: cannot keep it in the new directory: {}", p.string(), ec.message()));
  }
}

bool is_tokenizer_file(const std::string& f) {
  const std::vector<std::string>& names = tokenizer_file_names();
  return std::find(names.begin(), names.end(), f) != names.end();
}

// The source's tokenizer.json must be one our tokenizer reads (training, data prep and compare
// will load it) and must fit the model's embedding table: otherwise the import is refused before
// anything is written, rather than copying a file that fails later.
void check_tokenizer(const std::string& hf_dir, const ModelConfig& cfg) {
  const fs::path path = fs::path(hf_dir) / "tokenizer.json";
  std::error_code ec;
  if (!fs::exists(path, ec)) return;
  const data::Tokenizer tok = data::Tokenizer::load(path.string());  // InputError naming the file and JSON path
  if (tok.vocab_size() > cfg.vocab_size)
    throw InputError(fmt::format("{}: {} tokens, more than the model's vocab_size {} (config.json): a tokenizer of "
                                 "another model?",
                                 path.string(), tok.vocab_size(), cfg.vocab_size));
}

std::string yaml_number(double v) {
  if (std::isinf(v)) return v > 0 ? ".inf" : "-.inf";
  if (std::isnan(v)) return ".nan";
  return fmt::format("{}", v);
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

// The dtype most tensors have, as transformers names it in config.json.
std::string dominant_dtype(const HfCheckpoint& ck) {
  std::map<std::string, int> count;
  for (const HfTensor& t : ck.tensors())
    if (t.name.find("e_score_correction_bias") == std::string::npos) ++count[dtype_name(weight_dtype(t))];
  std::string best;
  for (const auto& [d, n] : count)
    if (best.empty() || n > count[best]) best = d;
  return best.empty() ? "float32" : best;
}

}  // namespace

size_t parse_size(const std::string& text, const std::string& what) {
  static const std::regex re(R"(\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]i?B|B)?\s*)", std::regex::icase);
  std::smatch m;
  if (!std::regex_match(text, m, re))
    throw InputError(fmt::format("{}: expected a size such as 5GB, 500MB or 2GiB, got \"{}\"", what, text));
  double v = std::stod(m[1].str());
  std::string unit = m[2].str();
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double scale = 1;
  if (!unit.empty() && unit != "B") {
    const bool binary = unit.size() == 3;
    const int power = std::string("KMGT").find(unit[0]) + 1;
    scale = std::pow(binary ? 1024.0 : 1000.0, power);
  }
  double bytes = v * scale;
  if (!(bytes >= 1) || bytes > 1e18) throw InputError(fmt::format("{}: {} is not a usable size", what, text));
  return static_cast<size_t>(bytes);
}

std::string resolve_checkpoint_dir(const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  if (!fs::is_directory(p, ec))
    throw InputError(fmt::format("{}: {}", path, fs::exists(p, ec) ? "is not a directory" : "no such directory"));
  if (fs::exists(p / "config.yaml", ec)) {
    io::require_complete_iteration(path);  // not an iteration a killed save or prune left half-written
    return path;
  }
  const int64_t iter = io::read_tracker(path);
  if (iter < 0)
    throw InputError(
        fmt::format("{}: not a checkpoint (expected config.yaml, or {} naming an iteration)", path, io::kTrackerFile));
  fs::path dir = p / io::iteration_dir_name(iter);
  if (!fs::exists(dir / "config.yaml", ec))
    throw InputError(fmt::format("{}: names iteration {}, but {} has no config.yaml", (p / io::kTrackerFile).string(),
                                 iter, dir.string()));
  io::require_complete_iteration(dir.string());
  return dir.string();
}

std::string checkpoint_config_yaml(const ModelConfig& c, const json& source) {
  std::ostringstream y;
  auto str = [&](const char* k, const std::string& v) { y << "  " << k << ": " << json(v).dump() << "\n"; };
  auto num = [&](const char* k, double v) { y << "  " << k << ": " << yaml_number(v) << "\n"; };
  auto boolean = [&](const char* k, bool v) { y << "  " << k << ": " << (v ? "true" : "false") << "\n"; };
  auto positive = [&](const char* k, int64_t v) {  // sizes of layer kinds a model lacks stay unset (0)
    if (v > 0) y << "  " << k << ": " << v << "\n";
  };
  auto count = [&](const char* k, int64_t v) { y << "  " << k << ": " << v << "\n"; };
  y << "# A native nemotron checkpoint's configuration. model: is what `nemotron model info -c` and training read;\n"
       "# source: records where the weights came from.\n";
  y << "model:\n";
  if (c.is_decilm()) {
    // The DeciLM config.json's fields (what load_model_config reads back), one block per line.
    const json j = decilm_config_to_hf_json(c);
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "architectures" || it.key() == "block_configs") continue;
      y << "  " << it.key() << ": " << it.value().dump() << "\n";
    }
    y << "  block_configs:\n";
    for (const json& b : j["block_configs"]) y << "    - " << b.dump() << "\n";
    if (source.is_object() && !source.empty()) {
      y << "source:\n";
      for (auto it = source.begin(); it != source.end(); ++it) y << "  " << it.key() << ": " << it.value().dump() << "\n";
    }
    return y.str();
  }
  str("model_type", c.model_type);
  positive("vocab_size", c.vocab_size);
  positive("hidden_size", c.hidden_size);
  str("hybrid_override_pattern", c.hybrid_override_pattern);
  y << "  layer_norm_epsilon: " << fmt::format("{}", c.layer_norm_epsilon) << "\n";
  boolean("tie_word_embeddings", c.tie_word_embeddings);
  num("initializer_range", c.initializer_range);
  boolean("rescale_prenorm_residual", c.rescale_prenorm_residual);
  positive("max_position_embeddings", c.max_position_embeddings);
  positive("num_attention_heads", c.num_attention_heads);
  positive("num_key_value_heads", c.num_key_value_heads);
  count("head_dim", c.head_dim);
  boolean("attention_bias", c.attention_bias);
  str("position_embedding_type", c.position_embedding_type);
  num("rope_theta", c.rope_theta);
  positive("intermediate_size", c.intermediate_size);
  str("mlp_hidden_act", c.mlp_hidden_act);
  boolean("mlp_bias", c.mlp_bias);
  positive("mamba_num_heads", c.mamba_num_heads);
  positive("mamba_head_dim", c.mamba_head_dim);
  positive("n_groups", c.n_groups);
  positive("ssm_state_size", c.ssm_state_size);
  positive("conv_kernel", c.conv_kernel);
  positive("chunk_size", c.chunk_size);
  boolean("use_conv_bias", c.use_conv_bias);
  boolean("use_bias", c.use_bias);
  num("time_step_min", c.time_step_min);
  num("time_step_max", c.time_step_max);
  num("time_step_floor", c.time_step_floor);
  y << "  time_step_limit: [" << yaml_number(c.time_step_limit_min) << ", " << yaml_number(c.time_step_limit_max)
    << "]\n";
  positive("n_routed_experts", c.n_routed_experts);
  positive("num_experts_per_tok", c.num_experts_per_tok);
  positive("moe_intermediate_size", c.moe_intermediate_size);
  count("moe_shared_expert_intermediate_size", c.moe_shared_expert_intermediate_size);
  count("n_shared_experts", c.n_shared_experts);
  count("moe_latent_size", c.moe_latent_size);
  num("routed_scaling_factor", c.routed_scaling_factor);
  boolean("norm_topk_prob", c.norm_topk_prob);
  positive("n_group", c.n_group);
  positive("topk_group", c.topk_group);
  count("num_nextn_predict_layers", c.num_nextn_predict_layers);
  if (!c.mtp_hybrid_override_pattern.empty()) str("mtp_hybrid_override_pattern", c.mtp_hybrid_override_pattern);
  count("mtp_num_layers", c.mtp_num_layers);
  num("mtp_loss_scaling_factor", c.mtp_loss_scaling_factor);
  if (source.is_object() && !source.empty()) {
    y << "source:\n";  // JSON values are YAML flow values
    for (auto it = source.begin(); it != source.end(); ++it) y << "  " << it.key() << ": " << it.value().dump() << "\n";
  }
  return y.str();
}

void import_hf(const ImportOptions& o, const Progress& progress) {
  if (o.dtype != "keep" && o.dtype != "bf16" && o.dtype != "bfloat16" && o.dtype != "float32" && o.dtype != "fp32")
    throw InputError(fmt::format("--dtype: expected keep, bf16 or float32, got \"{}\"", o.dtype));
  auto t0 = std::chrono::steady_clock::now();
  HfCheckpoint ck = HfCheckpoint::open(o.hf_dir);

  std::optional<DType> policy;
  if (o.dtype == "bf16" || o.dtype == "bfloat16") policy = DType::bf16;
  if (o.dtype == "float32" || o.dtype == "fp32") policy = DType::f32;
  std::vector<OutTensor> out;
  for (const HfTensor& t : ck.tensors()) {
    DType want;
    if (!policy) {
      want = weight_dtype(t);
    } else {
      // transformers keeps the router's correction bias in float32 whatever the model's dtype.
      bool keep_f32 = t.name.find("e_score_correction_bias") != std::string::npos;
      want = keep_f32 ? DType::f32 : *policy;
    }
    std::optional<DType> native = io::dtype_of_st(t.dtype);
    if (native && *native == want)
      out.push_back({t.name, t.shape, want, [&t, want] { return view_bytes(t.shape, want, t.bytes); }});
    else
      out.push_back({t.name, t.shape, want, [&ck, &t, want] { return ck.load(t, want); }});
  }
  check_tokenizer(o.hf_dir, ck.config());
  const std::vector<fs::path> keep = check_out(o.out, o.hf_dir, o.force, [](const std::string& f) {
    return is_our_weight_file(f) || f == "config.yaml" || f == "tokenizer";
  });
  io::StagedDir staged(o.out);
  const std::string dir = staged.path().string();
  size_t bytes = 0;
  std::set<std::string> files;
  for (const HfTensor& t : ck.tensors()) bytes += t.bytes.size(), files.insert(t.file);
  progress(fmt::format("reading {} ({} layout, {} file{}): {} tensors, {}, {}", o.hf_dir, hf_layout_name(ck.layout()),
                       files.size(), files.size() == 1 ? "" : "s", ck.tensors().size(), ck.dtype_summary(),
                       human_bytes(static_cast<double>(bytes))));
  progress(fmt::format("model: {} layers \"{}\", hidden {}, vocab {}{}", ck.config().num_layers(),
                       ck.config().hybrid_override_pattern, ck.config().hidden_size, ck.config().vocab_size,
                       ck.config().tie_word_embeddings ? ", tied embeddings" : ""));
  for (const std::string& n : ck.notes()) progress("note: " + n);
  std::vector<std::string> written = write_shards(dir, o.out, out, o.max_shard_bytes, progress);

  json hf_fields = json::object();
  for (const std::string& k : carried_hf_fields())
    if (ck.config_json().contains(k)) hf_fields[k] = ck.config_json()[k];
  json source = {{"format", "huggingface"},
                 {"path", fs::absolute(o.hf_dir).lexically_normal().string()},
                 {"layout", hf_layout_name(ck.layout())},
                 {"dtype", ck.declared_dtype()},
                 {"weights", ck.dtype_summary()},
                 {"converted_to", o.dtype},
                 {"hf_config", hf_fields}};
  if (!ck.skipped().empty()) source["skipped"] = ck.skipped();
  std::string yaml = checkpoint_config_yaml(ck.config(), source);
  io::write_file_atomically(dir + "/config.yaml", yaml.data(), yaml.size());
  written.push_back("config.yaml");
  std::vector<std::string> tok = copy_tokenizer_files(o.hf_dir, fs::path(dir) / "tokenizer");
  if (!tok.empty()) written.push_back(fmt::format("tokenizer/ ({})", join(tok, ", ")));
  carry_over(keep, staged.path());
  staged.commit();
  progress(fmt::format("wrote {} in {:.1f} s: {}", o.out, seconds_since(t0), join(written, ", ")));
}

void export_hf(const ExportOptions& o, const Progress& progress) {
  auto t0 = std::chrono::steady_clock::now();
  const std::string dir = resolve_checkpoint_dir(o.checkpoint);
  const std::string yaml_path = dir + "/config.yaml";
  ModelConfig cfg = load_model_config(yaml_path);
  json tree = load_config_file(yaml_path);
  json source = tree.is_object() && tree.contains("source") ? tree["source"] : json::object();
  HfCheckpoint ck = HfCheckpoint::open_weights(dir, cfg, "config.yaml");

  std::vector<OutTensor> out;
  for (const HfTensor& t : ck.tensors()) {
    DType d = weight_dtype(t);
    out.push_back({t.name, t.shape, d, [&t, d] { return view_bytes(t.shape, d, t.bytes); }});
  }
  if (ck.config().tie_word_embeddings) {
    const HfTensor& emb = ck.tensor(stack_names(ck.config()).embedding);
    DType d = weight_dtype(emb);
    out.push_back({"lm_head.weight", emb.shape, d, [&emb, d] { return view_bytes(emb.shape, d, emb.bytes); }});
  }
  const std::vector<fs::path> keep = check_out(o.out, dir, o.force, [](const std::string& f) {
    return is_our_weight_file(f) || f == "config.json" || f == "generation_config.json" || is_tokenizer_file(f);
  });
  io::StagedDir staged(o.out);
  const std::string out_dir = staged.path().string();
  progress(fmt::format("reading {}: {} tensors, {}; model {} layers \"{}\"", dir, ck.tensors().size(),
                       ck.dtype_summary(), cfg.num_layers(), cfg.hybrid_override_pattern));
  for (const std::string& n : ck.notes()) progress("note: " + n);
  if (ck.config().tie_word_embeddings)
    progress(
        fmt::format("note: tied embeddings: lm_head.weight is written as a copy of {}, because transformers' "
                    "{} does not tie them",
                    stack_names(ck.config()).embedding,
                    ck.config().is_decilm() ? "DeciLMForCausalLM" : "NemotronHForCausalLM"));
  std::vector<std::string> written = write_shards(out_dir, o.out, out, o.max_shard_bytes, progress);

  json config = model_config_to_hf_json(ck.config());
  const std::string dtype = dominant_dtype(ck);
  config["dtype"] = dtype;
  config["torch_dtype"] = dtype;
  if (source.is_object() && source.contains("hf_config") && source["hf_config"].is_object())
    for (auto it = source["hf_config"].begin(); it != source["hf_config"].end(); ++it)
      if (!config.contains(it.key())) config[it.key()] = it.value();
  std::string text = config.dump(2) + "\n";
  io::write_file_atomically(out_dir + "/config.json", text.data(), text.size());
  written.push_back("config.json");
  std::vector<std::string> tok = copy_tokenizer_files(fs::path(dir) / "tokenizer", out_dir);
  written.insert(written.end(), tok.begin(), tok.end());
  carry_over(keep, staged.path());
  staged.commit();
  progress(fmt::format("wrote {} in {:.1f} s: {}", o.out, seconds_since(t0), join(written, ", ")));
}

RoundtripReport compare_hf_dirs(const std::string& original, const std::string& exported) {
  HfCheckpoint a = HfCheckpoint::open(original), b = HfCheckpoint::open(exported);
  RoundtripReport r;
  std::map<std::string, const HfTensor*> in_b;
  for (const HfTensor& t : b.tensors()) in_b[t.name] = &t;
  for (const HfTensor& t : a.tensors()) {
    RoundtripRow row{t.name, io::st_dtype_name(t.dtype), "", t.shape.str(), "", false, ""};
    auto it = in_b.find(t.name);
    if (it == in_b.end()) {
      row.problem = "missing from the export";
    } else {
      const HfTensor& u = *it->second;
      row.dtype_b = io::st_dtype_name(u.dtype);
      row.shape_b = u.shape.str();
      if (u.dtype != t.dtype) {
        row.problem = fmt::format("dtype {} -> {}", row.dtype_a, row.dtype_b);
      } else if (u.shape != t.shape) {
        row.problem = fmt::format("shape {} -> {}", row.shape_a, row.shape_b);
      } else if (u.bytes.size() != t.bytes.size() || !std::equal(t.bytes.begin(), t.bytes.end(), u.bytes.begin())) {
        size_t first =
            static_cast<size_t>(std::mismatch(t.bytes.begin(), t.bytes.end(), u.bytes.begin()).first - t.bytes.begin());
        size_t differ = 0;
        for (size_t i = 0; i < t.bytes.size(); ++i) differ += t.bytes[i] != u.bytes[i];
        row.problem = fmt::format("{} of {} bytes differ, first at byte {}", differ, t.bytes.size(), first);
      } else {
        row.same = true;
      }
      in_b.erase(it);
    }
    r.differences += !row.same;
    r.rows.push_back(std::move(row));
  }
  for (const auto& [name, u] : in_b) {
    r.rows.push_back({name, "", io::st_dtype_name(u->dtype), "", u->shape.str(), false, "not in the original"});
    ++r.differences;
  }
  if (model_config_to_hf_json(a.config()) != model_config_to_hf_json(b.config())) {
    json ja = model_config_to_hf_json(a.config()), jb = model_config_to_hf_json(b.config());
    std::vector<std::string> keys;
    for (auto it = ja.begin(); it != ja.end(); ++it)
      if (!jb.contains(it.key()) || jb[it.key()] != it.value()) keys.push_back(it.key());
    r.notes.push_back(fmt::format("DIFFERENT: config.json describes another model ({})", join(keys, ", ")));
    ++r.differences;
  } else {
    r.notes.push_back("config.json: the same model configuration");
  }
  std::vector<std::string> same_tok;
  std::error_code ec;
  for (const std::string& f : tokenizer_file_names()) {
    fs::path pa = fs::path(original) / f, pb = fs::path(exported) / f;
    if (!fs::exists(pa, ec)) continue;
    if (!fs::exists(pb, ec)) {
      r.notes.push_back(fmt::format("DIFFERENT: tokenizer file {} is missing from the export", f));
      ++r.differences;
      continue;
    }
    auto ma = io::MappedFile::open(pa.string()), mb = io::MappedFile::open(pb.string());
    if (ma->size() != mb->size() || !std::equal(ma->data(), ma->data() + ma->size(), mb->data())) {
      r.notes.push_back(fmt::format("DIFFERENT: tokenizer file {} differs", f));
      ++r.differences;
    } else {
      same_tok.push_back(f);
    }
  }
  if (!same_tok.empty()) r.notes.push_back(fmt::format("tokenizer files identical: {}", join(same_tok, ", ")));
  if (!a.skipped().empty()) {
    r.notes.push_back(
        fmt::format("DIFFERENT: {} mtp.* tensor(s) of the original are not carried (its config has no "
                    "multi-token prediction: num_nextn_predict_layers 0), e.g. \"{}\"",
                    a.skipped().size(), a.skipped().front()));
    r.differences += static_cast<int>(a.skipped().size());
  }
  for (const std::string& n : b.notes()) r.notes.push_back("export: " + n);
  return r;
}

RoundtripReport roundtrip(const std::string& hf_dir, const std::string& work, const Progress& progress) {
  const std::string ckpt = (fs::path(work) / "checkpoint").string(), hf = (fs::path(work) / "hf").string();
  progress(fmt::format("== import {} -> {}", hf_dir, ckpt));
  import_hf({hf_dir, ckpt, "keep", true}, progress);
  progress(fmt::format("== export {} -> {}", ckpt, hf));
  export_hf({ckpt, hf, true}, progress);
  progress(fmt::format("== compare {} with {}", hf_dir, hf));
  return compare_hf_dirs(hf_dir, hf);
}

std::string roundtrip_table(const RoundtripReport& r) {
  static const std::regex layer(R"(\.layers\.\d+\.)"), expert(R"(\.experts\.\d+\.)");
  struct Group {
    int count = 0, same = 0;
    std::set<std::string> dtypes;
  };
  std::map<std::string, Group> groups;
  std::vector<std::string> order;
  for (const RoundtripRow& row : r.rows) {
    std::string key = std::regex_replace(std::regex_replace(row.name, layer, ".layers.*."), expert, ".experts.*.");
    if (!groups.count(key)) order.push_back(key);
    Group& g = groups[key];
    ++g.count;
    g.same += row.same;
    g.dtypes.insert(row.dtype_a.empty() ? row.dtype_b : row.dtype_a);
  }
  size_t w = 6;
  for (const std::string& k : order) w = std::max(w, k.size());
  std::string out = fmt::format("{:<{}}  {:>5}  {:<9}  {}\n", "tensor", w, "count", "dtype", "result");
  for (const std::string& k : order) {
    const Group& g = groups[k];
    std::string result = g.same == g.count ? "identical" : fmt::format("{} DIFFERENT", g.count - g.same);
    out += fmt::format("{:<{}}  {:>5}  {:<9}  {}\n", k, w, g.count,
                       join(std::vector<std::string>(g.dtypes.begin(), g.dtypes.end()), "+"), result);
  }
  for (const RoundtripRow& row : r.rows)
    if (!row.same) out += fmt::format("  {}: {}\n", row.name, row.problem);
  for (const std::string& n : r.notes) out += n + "\n";
  int same = 0;
  for (const RoundtripRow& row : r.rows) same += row.same;
  out += r.lossless() ? fmt::format("verdict: LOSSLESS ({} tensors identical in name, dtype, shape and bytes)\n", same)
                      : fmt::format("verdict: {} DIFFERENCE{} ({} of {} tensors identical)\n", r.differences,
                                    r.differences == 1 ? "" : "S", same, r.rows.size());
  return out;
}

}  // namespace nemotron::model
