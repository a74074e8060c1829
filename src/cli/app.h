// The command tree of the `nemotron` binary. run() parses argv and dispatches; it returns the
// process exit code: 0 after the command (or --help, --version), 2 for a command-line usage error
// (printed as "error: ..."); a command's own bad input propagates as InputError (main: exit 2).
#pragma once

namespace nemotron::cli {

int run(int argc, char** argv);

}  // namespace nemotron::cli
