#include "io/checkpoint_layout.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/json_limits.h"
#include "io/file_hash.h"

namespace nemotron::io {

namespace fs = std::filesystem;

namespace {

bool verify_hashes = true;

// train_state.json of `iter_dir` as JSON; InputError naming it when unreadable.
nlohmann::json read_state(const std::string& iter_dir) {
  const fs::path path = fs::path(iter_dir) / kTrainStateFile;
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(fmt::format("{}: cannot open: {}", path.string(), std::strerror(errno)));
  nlohmann::json j = parse_json_or_discarded<nlohmann::json>(f);
  if (j.is_discarded() || !j.is_object()) throw InputError(fmt::format("{}: not a JSON object", path.string()));
  return j;
}

}  // namespace

void set_verify_checkpoint_hashes(bool on) { verify_hashes = on; }

std::string rank_file_name(int rank) { return fmt::format("rank_{:05d}.safetensors", rank); }

std::vector<std::string> rank_files(const std::string& iter_dir) {
  std::error_code ec;
  if (!fs::exists(fs::path(iter_dir) / kTrainStateFile, ec)) return {};
  const nlohmann::json j = read_state(iter_dir);
  auto it = j.find(kShardedKey);
  if (it == j.end()) return {};
  const std::string where = (fs::path(iter_dir) / kTrainStateFile).string() + ": " + kShardedKey + ".rank_files";
  if (!it->is_object() || !it->contains("rank_files") || !(*it)["rank_files"].is_array())
    throw InputError(fmt::format("{}: missing or not a list", where));
  std::vector<std::string> out;
  for (const auto& f : (*it)["rank_files"]) {
    if (!f.is_string() || f.get<std::string>().find('/') != std::string::npos)
      throw InputError(fmt::format("{}: {} is not a file name", where, f.dump()));
    out.push_back((fs::path(iter_dir) / f.get<std::string>()).string());
  }
  return out;
}

void verify_iteration_hashes(const std::string& iter_dir) {
  std::error_code ec;
  if (!verify_hashes || !fs::exists(fs::path(iter_dir) / kTrainStateFile, ec)) return;
  const nlohmann::json j = read_state(iter_dir);
  auto it = j.find(kFileHashesKey);
  if (it == j.end() || !it->is_object()) return;
  for (const auto& [name, want] : it->items()) {
    const std::string path = (fs::path(iter_dir) / name).string();
    const std::string have = file_hash(path);
    if (!want.is_string() || have != want.get<std::string>())
      throw InputError(fmt::format("{}: content hash {} differs from the {} that {} records (the file changed after "
                                   "it was saved: corrupt or edited); load another iteration, or set "
                                   "NEMOTRON_CHECKPOINT_VERIFY=0 to load it anyway",
                                   path, have, want.dump(), kTrainStateFile));
  }
}

std::string iteration_dir_name(int64_t iteration) { return fmt::format("iter_{:07d}", iteration); }

int64_t iteration_of_dir_name(const std::string& path) {
  static const std::regex kIter("iter_([0-9]{7})");
  fs::path p(path);
  if (!p.has_filename()) p = p.parent_path();  // "runs/x/iter_0000020/"
  const std::string name = p.filename().string();
  std::smatch m;
  return std::regex_match(name, m, kIter) ? std::stoll(m[1].str()) : -1;
}

int64_t read_tracker(const std::string& save_dir) {
  const fs::path tracker = fs::path(save_dir) / kTrackerFile;
  std::error_code ec;
  if (!fs::exists(tracker, ec)) return -1;
  std::ifstream f(tracker, std::ios::binary);
  if (!f) throw InputError(fmt::format("{}: cannot open: {}", tracker.string(), std::strerror(errno)));
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  text.erase(std::remove_if(text.begin(), text.end(), [](unsigned char c) { return std::isspace(c); }), text.end());
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < 0)
    throw InputError(fmt::format("{}: expected an iteration number, got \"{}\"", tracker.string(), text));
  return v;
}

std::string incomplete_iteration_reason(const std::string& iter_dir) {
  const fs::path dir(iter_dir);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return "missing";
  const fs::path state_path = dir / kTrainStateFile;
  if (!fs::is_regular_file(state_path, ec)) return fmt::format("missing {}", kTrainStateFile);
  std::ifstream f(state_path, std::ios::binary);
  nlohmann::json state = parse_json_or_discarded<nlohmann::json>(f);
  if (state.is_discarded() || !state.is_object()) return fmt::format("{} is not valid JSON", kTrainStateFile);
  std::vector<std::string> missing, wrong_size;
  auto files = state.find("files");
  if (files == state.end() || !files->is_object()) {  // written before the list: the essentials
    for (const char* name : {"model.safetensors", "config.yaml"})
      if (!fs::is_regular_file(dir / name, ec) &&
          !(std::string(name) == "model.safetensors" && fs::is_regular_file(dir / "model.safetensors.index.json", ec)))
        missing.push_back(name);
  } else {
    for (const auto& [name, bytes] : files->items()) {
      const fs::path p = dir / name;
      if (!fs::is_regular_file(p, ec)) {
        missing.push_back(name);
      } else if (bytes.is_number_unsigned() && fs::file_size(p, ec) != bytes.get<uint64_t>()) {
        wrong_size.push_back(fmt::format("{} ({} bytes, {} recorded)", name, fs::file_size(p, ec), bytes.get<uint64_t>()));
      }
    }
  }
  std::string why;
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  };
  if (!missing.empty()) why = "missing " + join(missing);
  if (!wrong_size.empty()) why += (why.empty() ? "" : "; ") + std::string("truncated ") + join(wrong_size);
  return why;
}

bool is_training_iteration(const std::string& dir) {
  std::error_code ec;
  return fs::exists(fs::path(dir) / kTrainStateFile, ec) || fs::exists(fs::path(dir) / "optimizer.safetensors", ec);
}

void require_complete_iteration(const std::string& dir) {
  if (!is_training_iteration(dir)) return;
  const std::string why = incomplete_iteration_reason(dir);
  if (!why.empty())
    throw InputError(fmt::format("{}: incomplete checkpoint ({}; an interrupted save or prune): load another iteration",
                                 dir, why));
  verify_iteration_hashes(dir);
}

}  // namespace nemotron::io
