// The command tree of the `nemotron` binary. run() parses argv and dispatches; it returns the
// process exit code: 0 after the command (or --help, --version), 2 for a command-line usage error
// (printed as "error: ..."); a command's own bad input propagates as InputError (main: exit 2).
#pragma once
#include <string>
#include <vector>

namespace nemotron::cli {

int run(int argc, char** argv);

// True when `words` name a command of this binary (e.g. {"super3", "data", "prep", "sft"}):
// what `pipeline` checks for every stage before it runs any.
bool has_command(const std::vector<std::string>& words);

}  // namespace nemotron::cli
