// The only main(): parses argv, runs the command, turns exceptions into one clear line and an
// exit code (2 for bad input, 1 for failures).
#include <cstdio>

#include "cli/app.h"
#include "core/error.h"

int main(int argc, char** argv) {
  try {
    return nemotron::cli::run(argc, argv);
  } catch (const nemotron::InputError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
