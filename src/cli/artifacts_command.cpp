// `nemotron artifacts list|show|lineage`: the local artifact store (artifacts/artifact_store.h) as
// a W&B user browses artifacts: every name with its versions, one version's record, and the chain
// of inputs back to the raw data. The store is --root, else $NEMOTRON_ARTIFACTS_ROOT, else
// ./runs/artifacts (where the recipes' stages publish).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "artifacts/art_resolver.h"
#include "artifacts/artifact_store.h"
#include "cli/artifact_refs.h"
#include "cli/commands.h"

namespace nemotron::cli {

std::string default_artifact_root() {
  if (const char* env = std::getenv("NEMOTRON_ARTIFACTS_ROOT"); env && *env) return env;
  return "runs/artifacts";
}

train::ConfigTreeHook artifact_ref_resolver() {
  return [](nlohmann::json& tree, const std::string& source) {
    if (!artifacts::has_artifact_refs(tree)) return;
    const artifacts::ArtifactStore store(default_artifact_root());
    for (const std::string& ref : artifacts::resolve_artifact_refs(tree, store, source))
      std::printf("artifact %s: %s\n", ref.c_str(), store.get(artifacts::ArtifactRef::parse(ref, source)).path.c_str());
  };
}

namespace {

std::string metadata_summary(const artifacts::Artifact& a) {
  std::string s;
  for (const char* key : {"iteration", "num_tokens", "total_tokens", "total_sequences", "pack_size", "final_loss"})
    if (a.metadata.contains(key)) s += fmt::format("{}{}={}", s.empty() ? "" : " ", key, a.metadata[key].dump());
  return s;
}

void print_list(const artifacts::ArtifactStore& store) {
  const auto names = store.names();
  if (names.empty()) {
    std::printf("no artifacts in %s\n", store.root().c_str());
    return;
  }
  std::printf("%-36s %-8s %-24s %-26s %s\n", "NAME", "LATEST", "TYPE", "CREATED", "METADATA");
  for (const std::string& n : names) {
    const auto vs = store.versions(n);
    const artifacts::Artifact a = store.get({n, "latest"});
    std::printf("%-36s %-8s %-24s %-26s %s%s\n", n.c_str(), fmt::format("v{}", a.version).c_str(), a.type.c_str(),
                a.created_at.c_str(), metadata_summary(a).c_str(),
                vs.size() > 1 ? fmt::format("  ({} versions)", vs.size()).c_str() : "");
  }
}

void print_show(const artifacts::ArtifactStore& store, const std::string& ref, bool json) {
  const artifacts::Artifact a = store.get(artifacts::ArtifactRef::parse(ref, "artifacts show"));
  if (json) {
    std::printf("%s\n", a.to_json().dump(2).c_str());
    return;
  }
  std::printf("%s (%s)\n  path:         %s\n  created:      %s by %s\n  content hash: %s\n", a.ref().c_str(),
              a.type.c_str(), a.path.c_str(), a.created_at.c_str(), a.producer.c_str(), a.content_hash.c_str());
  if (!a.aliases.empty()) {
    std::string al;
    for (const auto& s : a.aliases) al += (al.empty() ? "" : ", ") + s;
    std::printf("  aliases:      %s\n", al.c_str());
  }
  for (const auto& [k, v] : a.metadata.items()) std::printf("  %-13s %s\n", (k + ":").c_str(), v.dump().c_str());
  for (const auto& in : a.inputs) std::printf("  input:        %s\n", in.c_str());
}

void print_lineage(const artifacts::ArtifactStore& store, const std::string& ref) {
  for (const auto& e : artifacts::lineage(store, artifacts::ArtifactRef::parse(ref, "artifacts lineage")))
    std::printf("%s%s%s (%s) %s%s\n", std::string(static_cast<size_t>(2 * e.depth), ' ').c_str(),
                e.depth > 0 ? "<- " : "", e.artifact.ref().c_str(), e.artifact.type.c_str(), e.artifact.path.c_str(),
                metadata_summary(e.artifact).empty() ? "" : ("  " + metadata_summary(e.artifact)).c_str());
}

}  // namespace

void add_artifacts_commands(CLI::App& app) {
  CLI::App* group = app.add_subcommand("artifacts", "the local artifact store: list, show, lineage");
  group->require_subcommand(1);
  auto root = std::make_shared<std::string>();
  group->add_option("--root", *root, "artifact store (default $NEMOTRON_ARTIFACTS_ROOT or runs/artifacts)");
  auto store = [root] { return artifacts::ArtifactStore(root->empty() ? default_artifact_root() : *root); };

  CLI::App* list = group->add_subcommand("list", "every artifact with its latest version");
  list->callback([store] { print_list(store()); });

  auto ref = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  CLI::App* show = group->add_subcommand("show", "one artifact version's record (NAME, NAME:latest, NAME:vN, NAME:ALIAS)");
  show->add_option("ref", *ref, "artifact reference")->required();
  show->add_flag("--json", *json, "print manifest.json");
  show->callback([store, ref, json] { print_show(store(), *ref, *json); });

  auto lref = std::make_shared<std::string>();
  CLI::App* lin = group->add_subcommand("lineage", "the chain of inputs from an artifact back to the raw data");
  lin->add_option("ref", *lref, "artifact reference")->required();
  lin->callback([store, lref] { print_lineage(store(), *lref); });
  for (CLI::App* sub : {list, show, lin}) sub->fallthrough();  // --root after the subcommand too
}

}  // namespace nemotron::cli
