// Where the stages publish artifacts and `nemotron artifacts` reads them: $NEMOTRON_ARTIFACTS_ROOT,
// else runs/artifacts (relative to the working directory, beside the recipes' runs/).
#pragma once
#include <string>

namespace nemotron::cli {

std::string default_artifact_root();

}  // namespace nemotron::cli
