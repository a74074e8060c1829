#include "cli/artifact_publish.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "artifacts/artifact_store.h"
#include "artifacts/content_hash.h"
#include "cli/artifact_refs.h"
#include "core/config_tree.h"

namespace nemotron::cli {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> inputs_at(const artifacts::ArtifactStore& store, const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  if (paths.empty()) return out;
  // One read of the store's manifests, then a lookup per path and ancestor.
  const std::map<std::string, artifacts::Artifact> at = store.latest_by_path();
  for (const std::string& p : paths) {
    if (p.empty()) continue;
    fs::path q = fs::absolute(p).lexically_normal();
    // A file inside an artifact's directory (a tokenizer.json, an iteration dir) counts as it.
    for (; !q.empty() && q != q.root_path(); q = q.parent_path())
      if (auto it = at.find(q.string()); it != at.end()) {
        out.push_back(it->second.ref());
        break;
      }
  }
  return out;
}

void warn(const std::string& what, const std::exception& e) {
  std::fprintf(stderr, "warning: %s was not recorded in the artifact store: %s\n", what.c_str(), e.what());
}

}  // namespace

std::string artifact_name_for_dir(const std::string& dir) {
  const fs::path abs = fs::absolute(dir).lexically_normal();
  const fs::path runs = (fs::current_path() / "runs").lexically_normal();
  const fs::path rel = abs.lexically_relative(runs);
  std::string name = !rel.empty() && *rel.begin() != ".." ? rel.generic_string() : abs.filename().string();
  while (!name.empty() && name.back() == '/') name.pop_back();
  return artifacts::artifact_name(name);
}

void publish_data_artifact(const std::string& output_dir, const std::vector<std::string>& input_paths) {
  try {
    artifacts::ArtifactStore store(default_artifact_root());
    const fs::path meta_path = fs::path(output_dir) / "metadata.json";
    std::ifstream in(meta_path);
    std::stringstream text;
    text << in.rdbuf();
    nlohmann::json meta = parse_json_text(text.str(), meta_path.string());
    artifacts::Artifact a;
    a.name = artifact_name_for_dir(output_dir);
    a.type = meta.value("type", "DataArtifact");
    a.path = fs::absolute(output_dir).lexically_normal().string();
    a.content_hash = artifacts::content_hash(output_dir, {"metadata.json"});
    if (meta.contains("config") && meta["config"].is_string()) a.config_yaml = meta["config"].get<std::string>();
    for (const char* k : {"config", "path", "type", "created_at", "producer"}) meta.erase(k);
    a.metadata = meta;
    a.inputs = inputs_at(store, input_paths);
    const artifacts::Artifact out = store.publish(a);
    std::printf("  artifact:  %s (%s) in %s\n", out.ref().c_str(), out.type.c_str(), store.root().c_str());
  } catch (const std::exception& e) {
    warn("the data prep output", e);
  }
}

void publish_model_artifact(const std::string& save_dir, const std::string& iteration_dir, int64_t iteration,
                            const std::string& config_yaml, const std::vector<std::string>& input_paths) {
  try {
    artifacts::ArtifactStore store(default_artifact_root());
    artifacts::Artifact a;
    a.name = artifact_name_for_dir(save_dir);
    a.type = artifacts::kModel;
    a.path = fs::absolute(save_dir).lexically_normal().string();
    // train_state.json lists every file of the iteration with its size (train/checkpoint.h) and
    // holds the iteration: hashing it names the checkpoint without reading gigabytes of weights.
    a.content_hash = artifacts::content_hash(fs::path(iteration_dir) / "train_state.json");
    a.config_yaml = config_yaml;
    a.metadata = {{"iteration", iteration},
                  {"absolute_path", a.path},
                  {"iteration_dir", fs::absolute(iteration_dir).lexically_normal().string()}};
    a.aliases = {fs::path(iteration_dir).filename().string()};
    a.inputs = inputs_at(store, input_paths);
    store.publish(a);
  } catch (const std::exception& e) {
    warn(fmt::format("the checkpoint {}", iteration_dir), e);
  }
}

}  // namespace nemotron::cli
