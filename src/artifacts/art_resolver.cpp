#include "artifacts/art_resolver.h"

#include <set>

#include "core/config_tree.h"
#include "core/error.h"

namespace nemotron::artifacts {

namespace {

constexpr std::string_view kOpen = "${art:";

bool holds_ref(const nlohmann::json& node) {
  if (node.is_string()) return node.get<std::string>().find(kOpen) != std::string::npos;
  if (node.is_object() || node.is_array())
    for (const auto& v : node)
      if (holds_ref(v)) return true;
  return false;
}

struct Resolver {
  const nlohmann::json& run;  // the config's run: section (may be null)
  const ArtifactStore& store;
  const std::string& source;
  std::set<std::string> used;

  // "NAME[,FIELD]" at `key` -> the field's value.
  nlohmann::json field(const std::string& inner, const std::string& key) {
    const size_t comma = inner.find(',');
    std::string name = inner.substr(0, comma), fld = comma == std::string::npos ? "path" : inner.substr(comma + 1);
    auto trim = [](std::string& s) {
      s.erase(0, s.find_first_not_of(" \t"));
      s.erase(s.find_last_not_of(" \t") + 1);
    };
    trim(name), trim(fld);
    if (!run.is_object() || !run.contains(name) || !run[name].is_string())
      throw_config_error(source, key,
                         fmt::format("${{art:{},...}} needs run.{} = an artifact reference (NAME:latest or NAME:vN)",
                                     name, name));
    const Artifact a = store.get(ArtifactRef::parse(run[name].get<std::string>(), source + ": run." + name));
    used.insert(a.ref());
    nlohmann::json v = a.field(fld);
    if (v.is_null())
      throw_config_error(source, key, fmt::format("artifact {} has no field \"{}\"", a.ref(), fld));
    return v;
  }

  void walk(nlohmann::json& node, const std::string& key) {
    if (node.is_object()) {
      for (auto it = node.begin(); it != node.end(); ++it) walk(it.value(), key.empty() ? it.key() : key + "." + it.key());
    } else if (node.is_array()) {
      for (size_t i = 0; i < node.size(); ++i) walk(node[i], fmt::format("{}[{}]", key, i));
    } else if (node.is_string()) {
      const std::string s = node.get<std::string>();
      if (s.find(kOpen) == std::string::npos) return;
      std::string out;
      size_t pos = 0;
      nlohmann::json whole;
      while (true) {
        const size_t open = s.find(kOpen, pos);
        if (open == std::string::npos) break;
        const size_t close = s.find('}', open);
        if (close == std::string::npos) throw_config_error(source, key, fmt::format("unclosed ${{art: in \"{}\"", s));
        const nlohmann::json v = field(s.substr(open + kOpen.size(), close - open - kOpen.size()), key);
        if (open == 0 && close + 1 == s.size()) whole = v;
        out += s.substr(pos, open - pos) + (v.is_string() ? v.get<std::string>() : v.dump());
        pos = close + 1;
      }
      out += s.substr(pos);
      node = whole.is_null() ? nlohmann::json(out) : whole;
    }
  }
};

}  // namespace

bool has_artifact_refs(const nlohmann::json& tree) { return holds_ref(tree); }

std::vector<std::string> resolve_artifact_refs(nlohmann::json& tree, const ArtifactStore& store,
                                               const std::string& source) {
  static const nlohmann::json kNull;
  const nlohmann::json run = tree.is_object() && tree.contains("run") ? tree["run"] : kNull;
  Resolver r{run, store, source, {}};
  r.walk(tree, "");
  return {r.used.begin(), r.used.end()};
}

}  // namespace nemotron::artifacts
