#include "train/checkpoint.h"

#include "io/checkpoint_layout.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>

#include "core/config_tree.h"
#include "core/error.h"
#include "io/mapped_file.h"
#include "io/file_hash.h"
#include "io/safetensors.h"
#include "io/tensor_pieces.h"
#include "model/hf_checkpoint.h"
#include "model/lora.h"
#include "model/weights_io.h"
#include "train/sharded_checkpoint.h"

namespace nemotron::train {

namespace fs = std::filesystem;
using nlohmann::json;

void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("{}: cannot open to flush: {}", dir, std::strerror(errno)));
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw Error(fmt::format("{}: cannot flush: {}", dir, std::strerror(errno)));
}

namespace {

void fsync_dir(const fs::path& dir) { train::fsync_dir(dir.string()); }

void write_text(const fs::path& path, const std::string& text) {
  io::write_file_atomically(path.string(), text.data(), text.size());
}

std::string read_text(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(fmt::format("{}: cannot open: {}", path.string(), std::strerror(errno)));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool complete(const fs::path& iter_dir) { return io::incomplete_iteration_reason(iter_dir.string()).empty(); }

void remove_all_or_throw(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
  if (ec) throw Error(fmt::format("{}: cannot remove: {}", p.string(), ec.message()));
}

}  // namespace

json TrainState::to_json() const {
  return {{"format_version", kCheckpointFormatVersion},
          {"iteration", iteration},
          {"consumed_train_samples", consumed_train_samples},
          {"optimizer_steps", optimizer_steps},
          {"scheduler", {{"num_steps", consumed_train_samples}, {"last_lr", last_lr}}},
          {"data", data},
          {"rng", rng}};
}

TrainState TrainState::from_json(const json& j, const std::string& source) {
  auto fail = [&](const std::string& key, const std::string& problem) { throw_config_error(source, key, problem); };
  if (!j.is_object()) fail("", "expected a JSON object");
  auto get_int = [&](const char* key) -> int64_t {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_integer() || it->get<int64_t>() < 0)
      fail(key, "missing or not a non-negative integer");
    return it->get<int64_t>();
  };
  int64_t version = get_int("format_version");
  if (version != kCheckpointFormatVersion && version != kShardedCheckpointFormatVersion)
    fail("format_version", fmt::format("{} is not a format this build reads ({} or {})", version,
                                       kCheckpointFormatVersion, kShardedCheckpointFormatVersion));
  TrainState s;
  s.iteration = get_int("iteration");
  s.consumed_train_samples = get_int("consumed_train_samples");
  s.optimizer_steps = get_int("optimizer_steps");
  s.data = j.value("data", json::object());
  s.rng = j.value("rng", json::object());
  if (auto it = j.find("scheduler"); it != j.end() && it->is_object()) s.last_lr = it->value("last_lr", 0.0);
  return s;
}


std::string make_temp_iteration_dir(const std::string& save_dir, int64_t iteration, long pid) {
  std::error_code ec;
  fs::create_directories(save_dir, ec);
  if (ec) throw Error(fmt::format("{}: cannot create the checkpoint directory: {}", save_dir, ec.message()));
  const fs::path tmp = fs::path(save_dir) / fmt::format("{}.tmp-{}", iteration_dir_name(iteration), pid);
  remove_all_or_throw(tmp);
  fs::create_directory(tmp, ec);
  if (ec) throw Error(fmt::format("{}: cannot create: {}", tmp.string(), ec.message()));
  return tmp.string();
}

std::string save_checkpoint(const std::string& save_dir, const CheckpointContent& c, int64_t most_recent_k,
                            const SaveStageHook& hook) {
  NM_CHECK(c.params != nullptr, "save_checkpoint without parameters");
  NM_CHECK(!c.optimizer || !c.optimizer->sharded(),
           "save_checkpoint: a sharded optimizer's state is saved by every rank (save_sharded_checkpoint)");
  auto stage = [&](const char* name) {
    if (hook) hook(name);
  };
  const fs::path tmp = make_temp_iteration_dir(save_dir, c.state.iteration, ::getpid());
  stage("model");
  // A LoRA run keeps its adapters only: the frozen base is the pretrained checkpoint.
  const model::ParamFilter only =
      model::has_lora(*c.params) ? model::ParamFilter(model::is_lora) : model::ParamFilter();
  model::save_weights(tmp.string(), *c.params, size_t{4} << 30, only);
  if (c.optimizer) {
    stage("optimizer");
    const auto& all = c.params->all();
    std::vector<io::NamedTensor> moments;
    for (size_t k = 0; k < all.size(); ++k) {
      if (!all[k]->requires_grad) continue;
      const Tensor& m = c.optimizer->first_moments()[k];
      const Tensor& v = c.optimizer->second_moments()[k];
      NM_CHECK(m.defined() && v.defined(), "no optimizer state for {}", all[k]->name);
      moments.push_back({"exp_avg." + all[k]->name, m});
      moments.push_back({"exp_avg_sq." + all[k]->name, v});
    }
    io::save_safetensors((tmp / "optimizer.safetensors").string(), moments,
                         {{"format", "nemotron-adamw"}, {"step", std::to_string(c.optimizer->steps_taken())}});
  }
  return commit_iteration(save_dir, tmp.string(), c, json::object(), {}, most_recent_k, hook);
}

std::string commit_iteration(const std::string& save_dir, const std::string& tmp_dir, const CheckpointContent& c,
                             const json& extra, const std::map<std::string, std::string>& known_hashes,
                             int64_t most_recent_k, const SaveStageHook& hook) {
  auto stage = [&](const char* name) {
    if (hook) hook(name);
  };
  const fs::path parent(save_dir), tmp(tmp_dir);
  stage("config");
  write_text(tmp / "config.yaml", c.config_yaml);
  bool tokenizer = false;
  if (!c.tokenizer_dir.empty()) {
    stage("tokenizer");
    tokenizer = !model::copy_tokenizer_files(c.tokenizer_dir, tmp / "tokenizer").empty();
  }
  stage("train_state");
  json state = c.state.to_json();
  for (const auto& [key, value] : extra.items()) state[key] = value;
  // Every file so far (tokenizer/ included), with its size and content hash.
  json files = json::object(), hashes = json::object();
  for (const auto& e : fs::recursive_directory_iterator(tmp)) {
    if (!e.is_regular_file()) continue;
    const std::string rel = e.path().lexically_relative(tmp).generic_string();
    files[rel] = static_cast<uint64_t>(e.file_size());
    auto known = known_hashes.find(rel);
    hashes[rel] = known != known_hashes.end() ? known->second : io::file_hash(e.path().string());
  }
  state["files"] = files;
  state[io::kFileHashesKey] = hashes;
  if (tokenizer) fsync_dir(tmp / "tokenizer");
  write_text(tmp / io::kTrainStateFile, state.dump(2) + "\n");
  fsync_dir(tmp);

  stage("rename");
  const std::string name = iteration_dir_name(c.state.iteration);
  const fs::path final_dir = parent / name;
  const fs::path old = parent / fmt::format("{}.old-{}", name, ::getpid());
  std::error_code ec;
  const bool replacing = fs::exists(final_dir, ec);
  if (replacing) {  // saved again by a run resumed from an earlier iteration of this directory
    remove_all_or_throw(old);
    fs::rename(final_dir, old, ec);
    if (ec) throw Error(fmt::format("cannot move {} aside: {}", final_dir.string(), ec.message()));
  }
  fs::rename(tmp, final_dir, ec);
  if (ec) throw Error(fmt::format("cannot rename {} to {}: {}", tmp.string(), final_dir.string(), ec.message()));
  fsync_dir(parent);
  if (replacing) remove_all_or_throw(old);

  stage("tracker");
  write_text(parent / kTrackerFile, std::to_string(c.state.iteration));
  fsync_dir(parent);

  stage("prune");
  prune_checkpoints(save_dir, most_recent_k, hook);
  return final_dir.string();
}

bool has_checkpoint(const std::string& path) {
  std::error_code ec;
  return fs::exists(fs::path(path) / kTrackerFile, ec) || fs::exists(fs::path(path) / io::kTrainStateFile, ec);
}

std::string resolve_checkpoint_dir(const std::string& path, bool weights_only) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) throw InputError(fmt::format("{}: no such checkpoint directory", path));
  const int64_t it = io::read_tracker(path);
  if (it >= 0) {
    fs::path dir = fs::path(path) / iteration_dir_name(it);
    if (!fs::exists(dir, ec))
      throw InputError(fmt::format("{}/{} names iteration {}, but {} is missing or incomplete", path, kTrackerFile, it,
                                   dir.string()));
    if (const std::string why = io::incomplete_iteration_reason(dir.string()); !why.empty())
      throw InputError(fmt::format("{}/{} names iteration {}, but {} is incomplete ({})", path, kTrackerFile, it,
                                   dir.string(), why));
    io::verify_iteration_hashes(dir.string());
    return dir.string();
  }
  if (fs::exists(fs::path(path) / io::kTrainStateFile, ec)) {
    io::require_complete_iteration(path);
    return path;
  }
  const bool has_weights = fs::exists(fs::path(path) / "model.safetensors", ec) ||
                           fs::exists(fs::path(path) / "model.safetensors.index.json", ec);
  if (weights_only && has_weights) return path;  // e.g. the output of `nemotron convert import`
  throw InputError(fmt::format("{}: not a checkpoint (neither {} nor an iter_* directory with train_state.json{})", path,
                               kTrackerFile,
                               has_weights ? "; it holds weights only: load it with checkpoint.finetune=true" : ""));
}

TrainState read_train_state(const std::string& iter_dir) {
  const std::string path = (fs::path(iter_dir) / io::kTrainStateFile).string();
  TrainState s = TrainState::from_json(parse_json_text(read_text(path), path), path);
  const int64_t named = io::iteration_of_dir_name(iter_dir);
  if (named >= 0 && named != s.iteration)
    throw InputError(fmt::format("{}: iteration {} does not match its directory {} (iteration {}); the file was "
                                 "copied or edited: load a directory whose name and train_state.json agree",
                                 path, s.iteration, fs::path(iter_dir).filename().string(), named));
  return s;
}

namespace {

// The weights of one checkpoint directory: model.safetensors (or its index), or a sharded
// iteration's rank files; loads what `only` accepts.
struct WeightFiles {
  std::string source;
  std::optional<io::SafetensorsSet> set;
  std::optional<io::PieceSet> pieces;

  explicit WeightFiles(const std::string& dir) {
    const std::vector<std::string> ranks = io::rank_files(dir);
    if (ranks.empty()) {
      set = io::SafetensorsSet::open(dir);
      source = (fs::path(dir) / "model.safetensors").string();
    } else {
      pieces = io::PieceSet::open(ranks, dir);
      source = dir;
    }
  }
  std::vector<std::string> names() const { return set ? set->names() : pieces->names("model"); }
  void load(model::ParamStore& params, const model::ParamFilter& only, const model::WeightSink* sink) const {
    if (set) model::load_weights(*set, params, source, /*strict=*/true, only, sink);
    else load_sharded_weights(*pieces, params, source, only, sink);
  }
};

}  // namespace

void load_checkpoint_weights(const std::string& iter_dir, model::ParamStore& params,
                             const std::string& base_checkpoint, const model::WeightSink* sink) {
  const WeightFiles here(iter_dir);
  if (!model::has_lora(params)) return here.load(params, {}, sink);
  bool adapters_here = false;
  for (const std::string& name : here.names()) adapters_here = adapters_here || model::is_lora_param(name);
  if (!adapters_here) return here.load(params, model::is_base, sink);  // the pretrained model: adapters keep their init
  if (base_checkpoint.empty())
    throw InputError(fmt::format("{}: a LoRA checkpoint (adapters only); its base weights come from "
                                 "checkpoint.pretrained_checkpoint, which is not set",
                                 here.source));
  WeightFiles(resolve_checkpoint_dir(base_checkpoint, true)).load(params, model::is_base, sink);
  here.load(params, model::is_lora, sink);
}

void load_checkpoint_optimizer(const std::string& iter_dir, AdamW& opt, const model::ParamStore& params,
                               int64_t optimizer_steps) {
  if (const std::vector<std::string> ranks = io::rank_files(iter_dir); !ranks.empty()) {
    load_sharded_optimizer(io::PieceSet::open(ranks, iter_dir), opt, params, iter_dir);
    opt.set_steps_taken(optimizer_steps);
    return;
  }
  const std::string path = (fs::path(iter_dir) / "optimizer.safetensors").string();
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw InputError(
        fmt::format("{}: missing (a weights-only checkpoint; load it with checkpoint.finetune=true)", path));
  io::SafetensorsFile f = io::SafetensorsFile::open(path);
  opt.ensure_moments();
  const auto& all = params.all();
  for (size_t k = 0; k < all.size(); ++k) {
    if (!all[k]->requires_grad) continue;
    const Shape want = all[k]->global_shape();
    Tensor loaded[2];
    for (int i = 0; i < 2; ++i) {
      const std::string name = (i == 0 ? "exp_avg." : "exp_avg_sq.") + all[k]->name;
      const io::StTensorInfo* info = f.find(name);
      if (!info)
        throw InputError(
            fmt::format("{}: missing tensor \"{}\" (shape {}) that the optimizer needs", path, name, want.str()));
      if (info->shape != want)
        throw InputError(fmt::format("{}: tensor \"{}\" has shape {} but the optimizer expects {}", path, name,
                                     info->shape.str(), want.str()));
      loaded[i] = model::local_part(*all[k], f.load(name, all[k]->grad.dtype()));
      model::check_loaded_finite(loaded[i], path, name);  // a NaN moment poisons every later step
    }
    opt.set_moments(k, loaded[0], loaded[1]);
  }
  opt.set_steps_taken(optimizer_steps);
}

namespace {

const std::regex kIterName("iter_([0-9]{7})");
const std::regex kTmpName("iter_[0-9]{7}\\.tmp-[0-9]+");
const std::regex kOldName("(iter_[0-9]{7})\\.old-[0-9]+");
constexpr const char* kPruningPrefix = ".pruning-";

std::vector<fs::path> list_dir(const std::string& dir) {
  std::error_code ec;
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path());
  if (ec) throw Error(fmt::format("{}: cannot list: {}", dir, ec.message()));
  std::sort(out.begin(), out.end());
  return out;
}

// Renames `iter_dir` to .pruning-<name> (one atomic step: from then on it is no checkpoint), then
// deletes it; a kill in between leaves only the hidden name, which finish_interrupted_writes()
// removes.
void prune_one(const fs::path& iter_dir, const SaveStageHook& hook) {
  const fs::path aside = iter_dir.parent_path() / (kPruningPrefix + iter_dir.filename().string());
  remove_all_or_throw(aside);
  std::error_code ec;
  fs::rename(iter_dir, aside, ec);
  if (ec) throw Error(fmt::format("cannot move {} aside to prune it: {}", iter_dir.string(), ec.message()));
  fsync_dir(iter_dir.parent_path());
  if (hook) hook("prune_delete");
  remove_all_or_throw(aside);
}

}  // namespace

std::vector<std::string> finish_interrupted_writes(const std::string& save_dir) {
  std::vector<std::string> done;
  std::error_code ec;
  if (!fs::is_directory(save_dir, ec)) return done;
  for (const fs::path& p : list_dir(save_dir)) {
    const std::string name = p.filename().string();
    std::smatch m;
    if (name.rfind(kPruningPrefix, 0) == 0) {
      remove_all_or_throw(p);
      done.push_back(fmt::format("finished the interrupted removal of {}", name.substr(std::strlen(kPruningPrefix))));
    } else if (std::regex_match(name, kTmpName)) {
      remove_all_or_throw(p);
      done.push_back(fmt::format("removed {}, an interrupted save", name));
    } else if (std::regex_match(name, m, kOldName)) {
      const fs::path original = p.parent_path() / m[1].str();
      if (!fs::exists(original, ec)) {
        fs::rename(p, original, ec);
        if (ec) throw Error(fmt::format("cannot move {} back to {}: {}", p.string(), original.string(), ec.message()));
        done.push_back(fmt::format("restored {} from {} (its replacement was interrupted)", m[1].str(), name));
      } else {
        remove_all_or_throw(p);
        done.push_back(fmt::format("removed {}, already replaced", name));
      }
    }
  }
  if (!done.empty()) fsync_dir(save_dir);
  return done;
}

void prune_checkpoints(const std::string& save_dir, int64_t most_recent_k, const SaveStageHook& hook) {
  finish_interrupted_writes(save_dir);
  if (most_recent_k < 0) return;
  std::vector<std::pair<int64_t, fs::path>> iters;
  const int64_t tracked = io::read_tracker(save_dir);
  for (const fs::path& p : list_dir(save_dir)) {
    const std::string name = p.filename().string();
    std::smatch m;
    if (!std::regex_match(name, m, kIterName)) continue;
    const int64_t it = std::stoll(m[1].str());
    if (complete(p))
      iters.emplace_back(it, p);
    else if (tracked >= 0 && it < tracked)  // half-deleted by an earlier build's prune: never loadable
      prune_one(p, hook);
  }
  if (static_cast<int64_t>(iters.size()) <= most_recent_k) return;
  std::sort(iters.begin(), iters.end());
  for (size_t i = 0; i + static_cast<size_t>(most_recent_k) < iters.size(); ++i)
    if (iters[i].first != tracked) prune_one(iters[i].second, hook);
}

void check_checkpoint_model(const std::string& iter_dir, const model::ModelConfig& want, const std::string& recipe) {
  const std::string path = (std::filesystem::path(iter_dir) / "config.yaml").string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return;
  const nlohmann::json have = model::model_config_to_hf_json(model::load_model_config(path));
  const nlohmann::json mine = model::model_config_to_hf_json(want);
  for (const auto& [key, value] : mine.items()) {
    const nlohmann::json other = have.contains(key) ? have.at(key) : nlohmann::json();
    if (other != value)
      throw InputError(fmt::format("{}: the checkpoint's model differs from {}'s: model.{} is {} there, {} here (load a "
                                   "checkpoint of this model, or give the recipe its model: section)",
                                   iter_dir, recipe, key, other.dump(), value.dump()));
  }
}

}  // namespace nemotron::train
