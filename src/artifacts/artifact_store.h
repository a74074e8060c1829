// The local artifact store (reference/pipeline-and-rl.md §5.5, the manifest backend without W&B):
//   <root>/<name>/v1/manifest.json      the Artifact (artifact.h), written once, never changed
//   <root>/<name>/v2/manifest.json
//   <root>/<name>/latest                plain text "v2"
//   <root>/<name>/aliases.json          {"iter_0000120": "v2", ...}
// Publishing the same content again (same type, path, content hash and inputs as the latest
// version) returns the latest version instead of writing a new one; anything else becomes the
// next version. Writers take <root>/.lock (flock) so concurrent stages number versions without
// gaps or clashes; every file is written under a temporary name and renamed, so a crash leaves
// the previous state.
#pragma once
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "artifacts/artifact.h"

namespace nemotron::artifacts {

class ArtifactStore {
 public:
  explicit ArtifactStore(std::filesystem::path root);
  const std::filesystem::path& root() const { return root_; }

  // Writes `a` as the next version of a.name (or returns the latest when it holds the same
  // content; its aliases are then added to it). a.version is ignored; created_at is set when
  // empty. Every input must resolve (InputError naming it).
  Artifact publish(Artifact a);
  // nullopt when the name or version does not exist.
  std::optional<Artifact> find(const ArtifactRef& ref) const;
  // As find(), else InputError "artifact NAME:VERSION not found in ROOT (have: ...)".
  Artifact get(const ArtifactRef& ref) const;
  // The newest artifact (of `type`, any when empty) whose latest version lies at `path`: how a
  // stage that reads a plain directory (the tiny recipes' paths) finds the artifact it consumed.
  std::optional<Artifact> latest_at_path(const std::string& path, const std::string& type = "") const;
  // latest_at_path() for every path at once, keyed by the normalised absolute path: one read of
  // the store for a caller that looks up many paths.
  std::map<std::string, Artifact> latest_by_path(const std::string& type = "") const;
  std::vector<std::string> names() const;                 // sorted
  std::vector<Artifact> versions(const std::string& name) const;  // v1, v2, ...

 private:
  std::filesystem::path root_;
};

// `name:vN` of every artifact `ref` descends from, depth first, each once, with its depth
// (0 = ref itself): what `nemotron artifacts lineage` prints.
struct LineageEntry {
  Artifact artifact;
  int depth = 0;
};
std::vector<LineageEntry> lineage(const ArtifactStore& store, const ArtifactRef& ref);

}  // namespace nemotron::artifacts
