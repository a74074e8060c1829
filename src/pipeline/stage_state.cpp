#include "pipeline/stage_state.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/config_tree.h"
#include "core/error.h"
#include "core/json_limits.h"
#include "io/checkpoint_layout.h"
#include "io/mapped_file.h"

namespace nemotron::pipeline {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string short_value(const json& v) {
  if (v.is_null()) return "(absent)";
  std::string s = v.is_string() ? fmt::format("\"{}\"", v.get<std::string>()) : v.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

// The first key (dotted) whose value differs, with both values.
std::string first_difference(const json& a, const json& b, const std::string& path) {
  if (a == b) return "";
  if (a.is_object() && b.is_object()) {
    std::vector<std::string> keys;
    for (auto it = a.begin(); it != a.end(); ++it) keys.push_back(it.key());
    for (auto it = b.begin(); it != b.end(); ++it)
      if (!a.contains(it.key())) keys.push_back(it.key());
    for (const std::string& k : keys) {
      const json& va = a.contains(k) ? a[k] : json();
      const json& vb = b.contains(k) ? b[k] : json();
      std::string d = first_difference(va, vb, path.empty() ? k : path + "." + k);
      if (!d.empty()) return d;
    }
  }
  return fmt::format("config key {}: {} -> {}", path.empty() ? "(root)" : path, short_value(a), short_value(b));
}

json strings(const std::vector<std::string>& v) { return json(v); }

std::vector<std::string> read_strings(const json& j, const std::string& source, const std::string& key) {
  std::vector<std::string> out;
  if (j.is_null()) return out;
  if (!j.is_array()) throw_config_error(source, key, "expected a list of strings");
  for (const json& s : j) {
    if (!s.is_string()) throw_config_error(source, key, "expected a list of strings");
    out.push_back(s.get<std::string>());
  }
  return out;
}

}  // namespace

std::string describe_change(const Fingerprint& was, const Fingerprint& now) {
  if (was.inputs != now.inputs) {
    std::string a, b;
    for (const std::string& s : was.inputs) a += (a.empty() ? "" : ", ") + s;
    for (const std::string& s : now.inputs) b += (b.empty() ? "" : ", ") + s;
    return fmt::format("inputs [{}] -> [{}]", a, b);
  }
  return first_difference(was.config, now.config, "");
}

const StageRecord* PipelineState::find(const std::string& name) const {
  for (const StageRecord& r : stages)
    if (r.name == name) return &r;
  return nullptr;
}

StageRecord& PipelineState::upsert(const std::string& name) {
  for (StageRecord& r : stages)
    if (r.name == name) return r;
  stages.push_back({});
  stages.back().name = name;
  return stages.back();
}

json PipelineState::to_json() const {
  json st = json::array();
  for (const StageRecord& r : stages)
    st.push_back({{"name", r.name},
                  {"status", r.status},
                  {"result", r.result},
                  {"command", r.command},
                  {"seconds", r.seconds},
                  {"finished_at", r.finished_at},
                  {"outputs", strings(r.outputs)},
                  {"inputs", strings(r.fingerprint.inputs)},
                  {"config", r.fingerprint.config}});
  return {{"format", "nemotron-pipeline/1"}, {"recipe", recipe}, {"family", family}, {"stages", st}, {"lineage", lineage},
          {"verdicts", verdicts}};
}

PipelineState PipelineState::from_json(const json& j, const std::string& source) {
  if (!j.is_object()) throw_config_error(source, "", "expected a JSON object");
  PipelineState s;
  try {
    s.recipe = j.value("recipe", "");
    s.family = j.value("family", "");
  } catch (const json::exception&) {
    throw_config_error(source, "recipe", "expected a string");
  }
  if (j.contains("lineage") && j["lineage"].is_array()) s.lineage = j["lineage"];
  if (j.contains("verdicts") && j["verdicts"].is_array()) s.verdicts = j["verdicts"];
  const json& st = j.contains("stages") ? j["stages"] : json::array();
  if (!st.is_array()) throw_config_error(source, "stages", "expected a list");
  for (size_t i = 0; i < st.size(); ++i) {
    const std::string where = fmt::format("stages[{}]", i);
    const json& e = st[i];
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string())
      throw_config_error(source, where, "expected a mapping with a name");
    StageRecord r;
    try {
      r.name = e["name"].get<std::string>();
      r.status = e.value("status", "");
      r.result = e.value("result", "");
      r.command = e.value("command", "");
      r.seconds = e.value("seconds", 0.0);
      r.finished_at = e.value("finished_at", "");
    } catch (const json::exception&) {
      throw_config_error(source, where, "a field has the wrong type");
    }
    r.outputs = read_strings(e.value("outputs", json()), source, where + ".outputs");
    r.fingerprint.inputs = read_strings(e.value("inputs", json()), source, where + ".inputs");
    r.fingerprint.config = e.value("config", json());
    s.stages.push_back(std::move(r));
  }
  return s;
}

PipelineState load_state(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return {};
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot be read", path));
  std::stringstream ss;
  ss << in.rdbuf();
  const json j = parse_json_or_discarded<json>(ss.str());
  if (j.is_discarded())
    throw InputError(fmt::format("{}: not valid JSON (the pipeline's record; delete it to start the record over)", path));
  return PipelineState::from_json(j, path);
}

void save_state(const PipelineState& s, const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent);
  const std::string text = s.to_json().dump(2) + "\n";
  io::write_file_atomically(path, text.data(), text.size());
}

TrainProgress read_train_progress(const std::string& checkpoint_dir) {
  TrainProgress p;
  std::error_code ec;
  if (checkpoint_dir.empty() || !fs::is_directory(checkpoint_dir, ec)) return p;
  p.latest_iteration = io::read_tracker(checkpoint_dir);
  p.has_run = p.latest_iteration >= 0;
  for (const auto& e : fs::directory_iterator(checkpoint_dir, ec))
    if (io::iteration_of_dir_name(e.path().string()) >= 0) p.has_run = true;
  return p;
}

Decision decide(StageKind kind, const StageRecord* record, const Fingerprint& now, const TrainProgress& progress,
                int64_t final_iteration, bool done_output, bool force) {
  if (force) return {Action::kRun, "--force"};
  const bool same = record && record->fingerprint == now;
  const bool finished = same && record->status == "done";
  switch (kind) {
    case StageKind::kDataPrep:
      return {Action::kRun, "the data prep checks its own output"};
    case StageKind::kEval:
      if (finished && done_output) return {Action::kSkip, "up to date: same config and models"};
      if (!record) return {Action::kRun, done_output ? "results not recorded by this pipeline" : "no results yet"};
      if (!same) return {Action::kRun, describe_change(record->fingerprint, now)};
      return {Action::kRun, done_output ? "the last run did not finish" : "no results yet"};
    case StageKind::kTrain:
      break;
  }
  if (!progress.has_run) return {Action::kRun, "no checkpoint yet"};
  const bool final = progress.latest_iteration >= final_iteration;
  if (!record)
    return {Action::kRefuse, fmt::format("holds a run this pipeline did not record ({}); it is kept",
                                         progress.latest_iteration >= 0
                                             ? fmt::format("iteration {}", progress.latest_iteration)
                                             : std::string("an unfinished first save"))};
  if (!same)
    return {Action::kRefuse, fmt::format("holds a run of another config or inputs ({}); it is kept",
                                         describe_change(record->fingerprint, now))};
  if (final && finished) return {Action::kSkip, fmt::format("up to date: iteration {}, same config and inputs", progress.latest_iteration)};
  if (final) return {Action::kRun, fmt::format("iteration {} saved; finishing the stage", progress.latest_iteration)};
  return {Action::kRun, progress.latest_iteration >= 0
                            ? fmt::format("resuming from iteration {} of {}", progress.latest_iteration, final_iteration)
                            : "resuming an unfinished first save"};
}

}  // namespace nemotron::pipeline
