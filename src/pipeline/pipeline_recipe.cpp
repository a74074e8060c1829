#include "pipeline/pipeline_recipe.h"

#include <fmt/format.h>

#include <set>
#include <sstream>

#include "core/config_tree.h"
#include "core/error.h"

namespace nemotron::pipeline {

namespace {

bool valid_stage_name(const std::string& n) {
  if (n.empty()) return false;
  for (char c : n)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

std::string stage_names(const PipelineRecipe& r) {
  std::string s;
  for (const StageSpec& st : r.stages) s += (s.empty() ? "" : ", ") + st.name;
  return s;
}

size_t stage_index(const PipelineRecipe& r, const std::string& name, const char* option) {
  for (size_t i = 0; i < r.stages.size(); ++i)
    if (r.stages[i].name == name) return i;
  throw InputError(fmt::format("{} {}: no such stage in {} (stages: {})", option, name, r.source, stage_names(r)));
}

}  // namespace

const char* stage_kind_name(StageKind k) {
  switch (k) {
    case StageKind::kDataPrep: return "data_prep";
    case StageKind::kTrain: return "train";
    case StageKind::kEval: return "eval";
  }
  return "?";
}

PipelineRecipe read_pipeline_recipe(const nlohmann::json& tree, const std::string& source) {
  if (!tree.is_object()) throw_config_error(source, "", "expected a mapping with run_dir and stages");
  PipelineRecipe r;
  r.source = source;
  ConfigReader root(tree, source);
  r.run_dir = root.get_string("run_dir", "");
  if (r.run_dir.empty()) root.fail("run_dir", "required (where pipeline.json and report.html go)");
  const nlohmann::json& stages = root.get_raw("stages");
  if (!stages.is_array() || stages.empty()) root.fail("stages", "expected a non-empty list of stages");
  std::set<std::string> names;
  for (size_t i = 0; i < stages.size(); ++i) {
    const std::string where = fmt::format("stages[{}]", i);
    if (!stages[i].is_object()) throw_config_error(source, where, "expected a mapping (name, command, config, overrides)");
    ConfigReader st(stages[i], source, where);
    StageSpec s;
    s.where = where;
    s.name = st.get_string("name", "");
    if (!valid_stage_name(s.name)) st.fail("name", fmt::format("expected a name of a-z, 0-9 and _, got {}", describe_value(st.get_raw("name"))));
    if (!names.insert(s.name).second) st.fail("name", fmt::format("\"{}\" names two stages", s.name));
    const nlohmann::json& cmd = st.get_raw("command");
    if (cmd.is_string()) {
      s.command = split_words(cmd.get<std::string>());
    } else if (cmd.is_array()) {
      for (const auto& w : cmd) {
        if (!w.is_string() || w.get<std::string>().empty()) st.fail("command", "expected words (strings)");
        s.command.push_back(w.get<std::string>());
      }
    }
    if (s.command.empty()) st.fail("command", "required: the command after the family, e.g. \"data prep pretrain\" or \"sft\"");
    for (const std::string& w : s.command)
      if (w.front() == '-' || w.find('=') != std::string::npos)
        st.fail("command", fmt::format("\"{}\": options and overrides go in config and overrides", w));
    s.config = st.get_string("config", "default");
    const nlohmann::json& ov = st.get_raw("overrides");
    if (!ov.is_null()) {
      if (!ov.is_array()) st.fail("overrides", "expected a list of key=value strings");
      for (size_t k = 0; k < ov.size(); ++k) {
        const std::string key = fmt::format("overrides[{}]", k);
        if (!ov[k].is_string() || !is_override(ov[k].get<std::string>()))
          st.fail(key, fmt::format("expected key=value, got {}", describe_value(ov[k])));
        s.overrides.push_back(ov[k].get<std::string>());
      }
    }
    const bool is_prep = s.command.size() >= 2 && s.command[0] == "data" && s.command[1] == "prep";
    s.kind = is_prep ? StageKind::kDataPrep : s.command[0] == "eval" ? StageKind::kEval : StageKind::kTrain;
    const std::string kind = st.get_string("kind", "");
    if (kind == "data_prep") s.kind = StageKind::kDataPrep;
    else if (kind == "train") s.kind = StageKind::kTrain;
    else if (kind == "eval") s.kind = StageKind::kEval;
    else if (!kind.empty()) st.fail("kind", fmt::format("expected data_prep, train or eval, got \"{}\"", kind));
    s.output_key = st.get_string("output_key", s.output_key);
    s.checkpoint_key = st.get_string("checkpoint_key", s.checkpoint_key);
    s.iterations_key = st.get_string("iterations_key", s.iterations_key);
    st.check_unknown_keys();
    r.stages.push_back(std::move(s));
  }
  std::vector<std::string> names_in_order;
  for (const StageSpec& s : r.stages) names_in_order.push_back(s.name);
  r.verdicts = read_verdicts(root.get_raw("verdicts"), source, names_in_order);
  root.check_unknown_keys();
  return r;
}

std::string stage_command_line(const std::string& family, const StageSpec& s) {
  std::string line = "nemotron " + family;
  for (const std::string& w : s.command) line += " " + w;
  line += " -c " + s.config;
  for (const std::string& o : s.overrides) line += " " + o;
  return line;
}

std::vector<size_t> select_stages(const PipelineRecipe& r, const std::string& from, const std::string& only) {
  if (!from.empty() && !only.empty()) throw InputError("--from and --only: give one of them");
  std::vector<size_t> out;
  if (!only.empty()) {
    std::set<size_t> picked;
    std::string name;
    std::istringstream in(only);
    while (std::getline(in, name, ','))
      if (!name.empty()) picked.insert(stage_index(r, name, "--only"));
    if (picked.empty()) throw InputError("--only: expected stage names, comma-separated");
    return {picked.begin(), picked.end()};
  }
  const size_t first = from.empty() ? 0 : stage_index(r, from, "--from");
  for (size_t i = first; i < r.stages.size(); ++i) out.push_back(i);
  return out;
}

}  // namespace nemotron::pipeline
