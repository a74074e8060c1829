// One artifact (reference/pipeline-and-rl.md §5): a path plus typed metadata, with the artifacts
// it was made from. Names are the semantic names of §5.3 in their W&B form (`super3-sft-data`);
// versions count from 1 per name and never change once written. A reference is `name`,
// `name:latest`, `name:vN`, or `name:<alias>` (a model artifact's iteration, e.g. iter_0000120).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace nemotron::artifacts {

// Artifact types (§5.2; W&B's type names).
inline constexpr const char* kPretrainData = "PretrainBlendsArtifact";
inline constexpr const char* kSftData = "SFTDataArtifact";
inline constexpr const char* kRlData = "SplitJsonlDataArtifact";
inline constexpr const char* kModel = "model";
inline constexpr const char* kEvalResults = "EvalResultsArtifact";

struct ArtifactRef {
  std::string name;
  std::string version = "latest";  // "latest", "vN", or an alias
  // "name[:version]" -> ref. InputError naming `source` for an empty name or version, or a
  // name that is not a valid artifact name.
  static ArtifactRef parse(const std::string& text, const std::string& source);
  std::string str() const { return name + ":" + version; }
};

// §5.3: `super3/sft/data?sample=8` -> `super3-sft-data` ('/' -> '-', the query dropped).
std::string artifact_name(const std::string& semantic_name);
// Names are what a directory may be called: [A-Za-z0-9._-]+, not starting with '.'.
bool valid_artifact_name(const std::string& name);

struct Artifact {
  std::string name;
  int64_t version = 0;  // set by the store
  std::string type;
  std::string path;  // absolute: the data directory, the file, or the checkpoint save directory
  std::string created_at;  // ISO 8601 with offset
  std::string producer = "local";
  nlohmann::json metadata = nlohmann::json::object();  // typed fields (total_tokens, iteration, ...)
  std::vector<std::string> inputs;                      // "name:vN" of the artifacts it came from
  std::vector<std::string> aliases;                     // besides vN and latest (e.g. iter_0000120)
  std::string content_hash;                             // of the files that matter (content_hash.h)
  std::string config_yaml;                              // the producing stage's resolved config

  std::string ref() const { return name + ":v" + std::to_string(version); }
  // manifest.json (§5.5): name, version ("vN"), type, path, created_at, producer, metadata,
  // inputs, aliases, content_hash, config.
  nlohmann::json to_json() const;
  // `source` names the file in errors (InputError for a missing or mistyped field).
  static Artifact from_json(const nlohmann::json& j, const std::string& source);
  // A field for `${art:NAME,FIELD}`: path, name, version, type, created_at, or a metadata key;
  // null when absent.
  nlohmann::json field(const std::string& key) const;
};

// A version as references and the store's directories spell it: 3 -> "v3".
std::string version_label(int64_t version);

// Now, as ISO 8601 with the UTC offset ("2026-11-25T08:15:02+00:00").
std::string now_iso8601();

}  // namespace nemotron::artifacts
