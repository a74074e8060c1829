// `${art:NAME,FIELD}` in recipe configs (reference/pipeline-and-rl.md §5.6): NAME is a key of the
// config's `run:` section (run.data, run.model) holding an artifact reference (`name:latest`,
// `name:v3`); FIELD defaults to `path`, else any field Artifact::field() knows (pack_size,
// iteration, ...). A string that is exactly one reference takes the field's JSON value (a number
// stays a number); references inside longer strings are replaced by the field's text.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "artifacts/artifact_store.h"

namespace nemotron::artifacts {

// Resolves every `${art:...}` in `tree` in place and returns the artifacts used ("name:vN",
// sorted, each once: the stage's inputs for lineage). InputError naming `source` and the key for
// an unknown run.NAME, a missing artifact or field, or a malformed reference.
std::vector<std::string> resolve_artifact_refs(nlohmann::json& tree, const ArtifactStore& store,
                                               const std::string& source);

// True when the tree holds any `${art:` reference (a stage then needs the store).
bool has_artifact_refs(const nlohmann::json& tree);

}  // namespace nemotron::artifacts
