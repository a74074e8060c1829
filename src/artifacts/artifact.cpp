#include "artifacts/artifact.h"

#include <ctime>

#include "core/error.h"

namespace nemotron::artifacts {

bool valid_artifact_name(const std::string& name) {
  if (name.empty() || name.size() > 200 || name[0] == '.') return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) return false;
  return true;
}

std::string artifact_name(const std::string& semantic_name) {
  std::string s = semantic_name.substr(0, semantic_name.find('?'));
  for (char& c : s)
    if (c == '/') c = '-';
  return s;
}

ArtifactRef ArtifactRef::parse(const std::string& text, const std::string& source) {
  ArtifactRef r;
  const size_t colon = text.rfind(':');
  r.name = artifact_name(colon == std::string::npos ? text : text.substr(0, colon));
  if (colon != std::string::npos) r.version = text.substr(colon + 1);
  if (!valid_artifact_name(r.name))
    throw InputError(fmt::format("{}: \"{}\" is not an artifact reference (NAME or NAME:VERSION, NAME of letters, "
                                 "digits, '.', '_', '-')",
                                 source, text));
  if (r.version.empty() || !valid_artifact_name(r.version))
    throw InputError(fmt::format("{}: \"{}\": the version after ':' must be latest, vN or an alias", source, text));
  return r;
}

nlohmann::json Artifact::to_json() const {
  return {{"name", name},         {"version", version_label(version)},
          {"type", type},         {"path", path},
          {"created_at", created_at}, {"producer", producer},
          {"metadata", metadata}, {"inputs", inputs},
          {"aliases", aliases},   {"content_hash", content_hash},
          {"config", config_yaml}};
}

Artifact Artifact::from_json(const nlohmann::json& j, const std::string& source) {
  auto str = [&](const char* key) -> std::string {
    if (!j.is_object() || !j.contains(key) || !j[key].is_string())
      throw InputError(fmt::format("{}: {}: missing or not a string", source, key));
    return j[key].get<std::string>();
  };
  auto list = [&](const char* key) {
    std::vector<std::string> out;
    if (!j.contains(key)) return out;
    if (!j[key].is_array()) throw InputError(fmt::format("{}: {}: not a list", source, key));
    for (const auto& v : j[key]) {
      if (!v.is_string()) throw InputError(fmt::format("{}: {}: holds a non-string", source, key));
      out.push_back(v.get<std::string>());
    }
    return out;
  };
  Artifact a;
  a.name = str("name");
  const std::string v = str("version");
  if (v.size() < 2 || v[0] != 'v' || v.find_first_not_of("0123456789", 1) != std::string::npos)
    throw InputError(fmt::format("{}: version: \"{}\" is not vN", source, v));
  a.version = std::stoll(v.substr(1));
  a.type = str("type");
  a.path = str("path");
  a.created_at = str("created_at");
  a.producer = str("producer");
  if (j.contains("metadata")) a.metadata = j["metadata"];
  if (!a.metadata.is_object()) throw InputError(fmt::format("{}: metadata: not a mapping", source));
  a.inputs = list("inputs");
  a.aliases = list("aliases");
  a.content_hash = j.value("content_hash", "");
  a.config_yaml = j.value("config", "");
  return a;
}

nlohmann::json Artifact::field(const std::string& key) const {
  if (key == "path") return path;
  if (key == "name") return name;
  if (key == "version") return version_label(version);
  if (key == "type") return type;
  if (key == "created_at") return created_at;
  if (key == "content_hash") return content_hash;
  if (metadata.contains(key)) return metadata[key];
  return nullptr;
}

std::string version_label(int64_t version) { return fmt::format("v{}", version); }

std::string now_iso8601() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S%z", &tm);
  std::string s = buf;  // +0000 -> +00:00 (ISO 8601 extended, as Python's isoformat writes)
  if (s.size() >= 5) s.insert(s.size() - 2, 1, ':');
  return s;
}

}  // namespace nemotron::artifacts
