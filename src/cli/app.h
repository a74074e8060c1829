// The command tree of the `nemotron` binary. run() parses argv and dispatches; it throws
// InputError for bad usage and returns the process exit code otherwise.
#pragma once

namespace nemotron::cli {

int run(int argc, char** argv);

}  // namespace nemotron::cli
