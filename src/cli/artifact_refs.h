// Where the stages publish artifacts and `nemotron artifacts` reads them: $NEMOTRON_ARTIFACTS_ROOT,
// else runs/artifacts (relative to the working directory, beside the recipes' runs/); and the
// config hook that resolves ${art:NAME,FIELD} (artifacts/art_resolver.h) in a stage's recipe
// against that store, printing each artifact it used.
#pragma once
#include <string>

#include "train/train_loop_config.h"

namespace nemotron::cli {

std::string default_artifact_root();

// Resolves the tree's ${art:...} references (no-op, and no store opened, when it has none).
train::ConfigTreeHook artifact_ref_resolver();

}  // namespace nemotron::cli
