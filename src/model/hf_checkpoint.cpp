// HfCheckpoint: config.json + safetensors -> Hub-named byte ranges, checked against the model the
// config describes (tensor_specs). Nothing is copied until load() is called.
#include "model/hf_checkpoint.h"

#include "model/weights_io.h"
#include "io/checkpoint_layout.h"
#include "io/tensor_pieces.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "core/config_tree.h"
#include "core/error.h"
#include "model/hybrid_model.h"
#include "model/layer_spec.h"

namespace nemotron::model {

namespace fs = std::filesystem;

namespace {

// A backend that hands out no memory: HybridModel's blocks register their parameters on it, which
// yields every name and shape without allocating a model. Any attempt to touch the (absent)
// memory fails: the device is not the host, so Tensor::data() refuses, and copies throw.
class ShapeOnlyBackend final : public Backend {
 public:
  Device device() const override { return Device{DeviceKind::cuda, -1}; }
  std::string name() const override { return "shape-only"; }
  void* allocate(size_t) override { return nullptr; }
  void deallocate(void*, size_t) override {}
  void fill_zero(void*, size_t) override {}
  void copy_to_host(void*, const void*, size_t) override { refuse(); }
  void copy_from_host(void*, const void*, size_t) override { refuse(); }
  void copy_on_device(void*, const void*, size_t) override { refuse(); }
  void synchronize() override {}
  size_t bytes_in_use() const override { return 0; }
  size_t peak_bytes() const override { return 0; }

 private:
  [[noreturn]] static void refuse() { throw_internal(__FILE__, __LINE__, "shape-only tensors hold no data"); }
};

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// "backbone.layers.12.mixer.experts.up_proj" -> (12, "up_proj"); the fused 3-D expert tensors.
std::optional<std::pair<int64_t, std::string>> fused_expert(const std::string& name) {
  const std::string head = "backbone.layers.";
  if (!starts_with(name, head)) return std::nullopt;
  size_t p = head.size(), q = p;
  while (q < name.size() && std::isdigit(static_cast<unsigned char>(name[q]))) ++q;
  if (q == p) return std::nullopt;
  const std::string rest = name.substr(q);
  for (const char* proj : {"up_proj", "down_proj"})
    if (rest == std::string(".mixer.experts.") + proj) return std::make_pair(std::stoll(name.substr(p, q - p)), proj);
  return std::nullopt;
}

bool is_float_st(io::StDtype t) {
  return t == io::StDtype::F64 || t == io::StDtype::F32 || t == io::StDtype::F16 || t == io::StDtype::BF16;
}

std::string describe_pattern(const ModelConfig& c) {
  if (c.is_decilm())
    return fmt::format("DeciLM, {} blocks, stack \"{}\", hidden_size {}, vocab_size {}", c.block_configs.size(),
                       c.hybrid_override_pattern, c.hidden_size, c.vocab_size);
  return fmt::format("pattern \"{}\", hidden_size {}, vocab_size {}", c.hybrid_override_pattern, c.hidden_size,
                     c.vocab_size);
}

}  // namespace

std::vector<TensorSpec> tensor_specs(const ModelConfig& cfg) {
  static ShapeOnlyBackend backend;
  HybridModel shapes(cfg, backend, DType::f32);
  std::vector<TensorSpec> out;
  for (const Param* p : shapes.params().all()) out.push_back({p->name, p->value.shape(), p->requires_grad});
  return out;
}

const char* hf_layout_name(HfLayout layout) { return layout == HfLayout::hub ? "hub" : "fused"; }

const std::vector<std::string>& tokenizer_file_names() {
  static const std::vector<std::string> names = {
      "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",   "vocab.json",
      "merges.txt",     "added_tokens.json",     "chat_template.jinja",     "chat_template.json"};
  return names;
}

std::vector<std::string> copy_tokenizer_files(const std::filesystem::path& from, const std::filesystem::path& to) {
  std::vector<std::string> copied;
  std::error_code ec;
  for (const std::string& f : tokenizer_file_names()) {
    if (!fs::is_regular_file(from / f, ec)) continue;
    fs::create_directories(to, ec);
    fs::copy_file(from / f, to / f, fs::copy_options::overwrite_existing, ec);
    if (ec) throw Error(fmt::format("{}: cannot copy to {}: {}", (from / f).string(), to.string(), ec.message()));
    copied.push_back(f);
  }
  return copied;
}

DType weight_dtype(const HfTensor& t) {
  std::optional<DType> d = io::dtype_of_st(t.dtype);
  if (!d || !is_float(*d))
    throw InputError(
        fmt::format("{}: tensor \"{}\" is {}, which a model checkpoint we hold cannot keep as it is "
                    "(convert it with --dtype bf16 or float32)",
                    t.file, t.stored_as, io::st_dtype_name(t.dtype)));
  return *d;
}

HfCheckpoint HfCheckpoint::open(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw InputError(fmt::format("{}: {}", dir,
                                 fs::exists(dir, ec) ? "is not a directory (expected a Hugging Face "
                                                       "model directory)"
                                                     : "no such directory"));
  const std::string config_path = (fs::path(dir) / "config.json").string();
  if (!fs::exists(config_path, ec))
    throw InputError(
        fmt::format("{}: no config.json (expected a Hugging Face model directory with config.json and "
                    "*.safetensors)",
                    dir));
  return open_weights(dir, load_model_config(config_path), "config.json", load_config_file(config_path));
}

HfCheckpoint HfCheckpoint::open_weights(const std::string& dir, const ModelConfig& cfg, const std::string& config_name,
                                        nlohmann::json config_json) {
  HfCheckpoint ck;
  ck.dir_ = dir;
  ck.config_ = cfg;
  ck.config_json_ = std::move(config_json);
  std::error_code ec;
  if (const std::vector<std::string> ranks = io::rank_files(dir); !ranks.empty()) {
    // A sharded training iteration: its whole tensors assembled in memory from the rank files.
    ck.set_ = std::make_shared<io::SafetensorsSet>(io::open_weight_set(dir));
  } else if (!fs::exists(fs::path(dir) / "model.safetensors", ec) &&
      !fs::exists(fs::path(dir) / "model.safetensors.index.json", ec)) {
    std::string hint;
    if (fs::exists(fs::path(dir) / "pytorch_model.bin", ec) ||
        fs::exists(fs::path(dir) / "pytorch_model.bin.index.json", ec))
      hint = "; it has pytorch_model.bin (pickle), which is not read: save it with safetensors";
    throw InputError(
        fmt::format("{}: no weights (expected model.safetensors or model.safetensors.index.json){}", dir, hint));
  } else {
    ck.set_ = std::make_shared<io::SafetensorsSet>(io::SafetensorsSet::open(dir));
  }

  // Every stored tensor: its file and byte range.
  struct Stored {
    const io::SafetensorsFile* file;
    const io::StTensorInfo* info;
  };
  std::map<std::string, Stored> stored;
  for (const io::SafetensorsFile& f : ck.set_->files())
    for (const io::StTensorInfo& t : f.tensors())
      if (ck.set_->contains(t.name) && &ck.set_->info(t.name) == &t) stored[t.name] = {&f, &t};

  // Layout: the prefix of the model's tensors. DeciLM checkpoints have one layout, whose Hub names
  // are model.* (B.4): nothing to rename.
  const bool decilm = ck.config_.is_decilm();
  std::string a_hub, a_fused;
  for (const auto& [name, s] : stored) {
    if (decilm) break;
    if (starts_with(name, "backbone.") && a_hub.empty()) a_hub = name;
    if (starts_with(name, "model.") && a_fused.empty()) a_fused = name;
  }
  if (!a_hub.empty() && !a_fused.empty())
    throw InputError(
        fmt::format("{}: mixes the Hub layout (\"{}\") and transformers' in-memory layout (\"{}\"); "
                    "expected one of them",
                    dir, a_hub, a_fused));
  ck.layout_ = a_fused.empty() ? HfLayout::hub : HfLayout::fused;

  // Resolve to Hub names, then check against the model. The tie of the head is decided by the
  // checkpoint when config.json and the weights disagree (see below), so specs may be redone.
  struct Found {
    HfTensor t;
    Shape stored_shape;
  };
  std::map<std::string, Found> found;  // by Hub name
  std::vector<std::string> unexpected;
  const int64_t E = ck.config_.n_routed_experts;
  for (const auto& [name, s] : stored) {
    const std::string where = (fs::path(s.file->path())).string();
    const bool mtp = starts_with(name, "mtp.") || starts_with(name, "model.mtp.") || starts_with(name, "backbone.mtp.");
    if (mtp && ck.config_.num_nextn_predict_layers == 0) {  // a config without MTP: set aside, reported
      ck.skipped_.push_back(name);
      continue;
    }
    if (!is_float_st(s.info->dtype))
      throw InputError(fmt::format("{}: tensor \"{}\" is {}, expected a floating-point weight", where, name,
                                   io::st_dtype_name(s.info->dtype)));
    std::string hub = mtp                                      ? name.substr(name.find("mtp."))
                      : !decilm && starts_with(name, "model.") ? "backbone." + name.substr(6)
                                                               : name;
    if (!decilm && hub == "backbone.embedding.weight") {
      hub = "backbone.embeddings.weight";
      ck.notes_.push_back(fmt::format("read \"{}\" as backbone.embeddings.weight (legacy spelling)", name));
    }
    auto add = [&](const std::string& n, int64_t expert, Shape shape, std::span<const uint8_t> bytes) {
      HfTensor t{n, name, expert, where, s.info->dtype, std::move(shape), bytes};
      if (auto it = found.find(n); it != found.end())
        throw InputError(fmt::format("{}: tensor \"{}\" is stored twice, as \"{}\" ({}) and \"{}\" ({})", dir, n,
                                     it->second.t.stored_as, it->second.t.file, name, where));
      found.emplace(n, Found{t, s.info->shape});
    };
    std::span<const uint8_t> bytes = s.file->bytes(*s.info);
    if (auto fe = decilm ? std::nullopt : fused_expert(hub)) {
      const Shape& sh = s.info->shape;
      if (sh.rank() != 3 || E <= 0 || sh[0] != E)
        throw InputError(
            fmt::format("{}: tensor \"{}\" has shape {}, expected [{}, ...]: n_routed_experts {} "
                        "experts stacked (transformers' fused layout)",
                        where, name, sh.str(), E, E));
      const size_t per = bytes.size() / static_cast<size_t>(E);
      for (int64_t e = 0; e < E; ++e)
        add(fmt::format("backbone.layers.{}.mixer.experts.{}.{}.weight", fe->first, e, fe->second), e,
            Shape({sh[1], sh[2]}), bytes.subspan(static_cast<size_t>(e) * per, per));
      continue;
    }
    add(hub, -1, s.info->shape, bytes);
  }

  // A head stored although config.json ties it: transformers' NemotronHForCausalLM does not tie
  // (its _tied_weights_keys is empty), so a checkpoint it wrote carries lm_head.weight, and that is
  // what it computes with. The same bytes as the embedding: drop the copy. Different bytes: keep
  // the head and untie, which is what transformers runs.
  const std::string embedding = stack_names(ck.config_).embedding;
  if (ck.config_.tie_word_embeddings && found.count("lm_head.weight") && found.count(embedding)) {
    const HfTensor& head = found.at("lm_head.weight").t;
    const HfTensor& emb = found.at(embedding).t;
    if (head.dtype == emb.dtype && head.shape == emb.shape &&
        std::equal(head.bytes.begin(), head.bytes.end(), emb.bytes.begin(), emb.bytes.end())) {
      ck.notes_.push_back("lm_head.weight holds the same bytes as the tied embedding; not needed");
      found.erase("lm_head.weight");
    } else {
      ck.config_.tie_word_embeddings = false;
      ck.notes_.push_back(
          fmt::format("config.json ties the embeddings but lm_head.weight differs from {}; transformers "
                      "computes with lm_head.weight, so it is kept: tie_word_embeddings = false",
                      embedding));
    }
  }

  const std::vector<TensorSpec> specs = tensor_specs(ck.config_);
  std::set<std::string> expected;
  for (const TensorSpec& spec : specs) expected.insert(spec.name);
  for (const auto& [name, f] : found)
    if (!expected.count(name)) unexpected.push_back(name);
  if (!unexpected.empty()) {
    const Found& f = found.at(unexpected.front());
    throw InputError(fmt::format("{}: tensor \"{}\" is not part of the model {} describes ({}){}", f.t.file,
                                 f.t.stored_as, config_name, describe_pattern(ck.config_),
                                 unexpected.size() > 1 ? fmt::format("; {} such tensors", unexpected.size()) : ""));
  }
  std::vector<std::string> missing;
  for (const TensorSpec& spec : specs) {
    auto it = found.find(spec.name);
    if (it == found.end()) {
      missing.push_back(spec.name);
      continue;
    }
    HfTensor& t = it->second.t;
    if (t.shape != spec.shape) {
      if (t.expert >= 0)
        throw InputError(fmt::format("{}: tensor \"{}\" has shape {}, expected [{}, {}, {}] from {}", t.file,
                                     t.stored_as, it->second.stored_shape.str(), E, spec.shape[0], spec.shape[1],
                                     config_name));
      throw InputError(fmt::format("{}: tensor \"{}\" has shape {}, expected {} from {} ({})", t.file, t.stored_as,
                                   t.shape.str(), spec.shape.str(), config_name, describe_pattern(ck.config_)));
    }
    ck.tensors_.push_back(t);
  }
  if (!missing.empty()) {
    const TensorSpec& first =
        *std::find_if(specs.begin(), specs.end(), [&](const TensorSpec& s) { return s.name == missing.front(); });
    throw InputError(fmt::format("{}: missing tensor \"{}\" (shape {}) that the model of {} needs{}", dir, first.name,
                                 first.shape.str(), config_name,
                                 missing.size() > 1 ? fmt::format("; {} tensors missing", missing.size()) : ""));
  }
  if (!ck.skipped_.empty())
    ck.notes_.push_back(
        fmt::format("skipped {} mtp.* tensor(s), e.g. \"{}\": the config has no multi-token prediction "
                    "(num_nextn_predict_layers 0)",
                    ck.skipped_.size(), ck.skipped_.front()));
  return ck;
}

const HfTensor& HfCheckpoint::tensor(const std::string& name) const {
  for (const HfTensor& t : tensors_)
    if (t.name == name) return t;
  throw InputError(fmt::format("{}: no tensor \"{}\"", dir_, name));
}

std::string HfCheckpoint::declared_dtype() const {
  for (const char* key : {"dtype", "torch_dtype"})
    if (config_json_.contains(key) && config_json_[key].is_string()) return config_json_[key].get<std::string>();
  return "";
}

std::string HfCheckpoint::dtype_summary() const {
  std::map<std::string, int64_t> count;
  for (const HfTensor& t : tensors_) ++count[io::st_dtype_name(t.dtype)];
  std::vector<std::pair<int64_t, std::string>> order;
  for (const auto& [d, n] : count) order.push_back({-n, d});
  std::sort(order.begin(), order.end());
  std::string out = order.empty() ? "none" : order[0].second;
  for (size_t i = 1; i < order.size(); ++i)
    out += fmt::format(" (+ {}: {} tensor{})", order[i].second, -order[i].first, -order[i].first == 1 ? "" : "s");
  return out;
}

Tensor HfCheckpoint::load(const HfTensor& t, std::optional<DType> as) const {
  if (std::optional<DType> native = io::dtype_of_st(t.dtype)) {
    Tensor raw = Tensor::empty(t.shape, *native);  // aligned copy: the mapping may not be
    NM_CHECK(raw.nbytes() == t.bytes.size(), "{}: {} bytes for {}", t.name, t.bytes.size(), raw.describe());
    if (!t.bytes.empty()) std::memcpy(raw.raw(), t.bytes.data(), t.bytes.size());
    return as && *as != *native ? raw.to_host(*as) : raw;
  }
  // A dtype we do not hold (F16): the reader converts whole tensors; slice an expert after.
  DType want = as.value_or(DType::f32);
  Tensor whole = set_->load(t.stored_as, want);
  return t.expert < 0 ? whole : whole.select(t.expert).clone();
}

void HfCheckpoint::load_into(ParamStore& store) const {
  std::map<std::string, const HfTensor*> by_name;
  for (const HfTensor& t : tensors_) by_name[t.name] = &t;
  for (Param* p : store.all()) {
    auto it = by_name.find(p->name);
    if (it == by_name.end())
      throw InputError(fmt::format("{}: missing tensor \"{}\" (shape {}) that the model needs", dir_, p->name,
                                   p->value.shape().str()));
    const HfTensor& t = *it->second;
    if (t.shape != p->global_shape())
      throw InputError(fmt::format("{}: tensor \"{}\" has shape {} but the model expects {}", t.file, t.stored_as,
                                   t.shape.str(), p->global_shape().str()));
    Tensor loaded = load(t, p->value.dtype());
    check_loaded_finite(loaded, t.file, t.expert < 0 ? t.stored_as : fmt::format("{}[{}]", t.stored_as, t.expert));
    p->value.copy_from(local_part(*p, loaded));  // this rank's part under tensor parallelism
  }
}

}  // namespace nemotron::model
