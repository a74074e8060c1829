// The only main(): parses argv, runs the command, turns exceptions into one clear line and an
// exit code (2 for bad input, 1 for failures).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "cli/app.h"
#include "cli/distributed.h"
#include "core/error.h"
#include "engine/cached_step_model.h"
#include "io/checkpoint_layout.h"

namespace {

// One line on standard error; in a run of several ranks, every rank ends with the code (the
// others may wait in a collective for this one), and an InputError, which every rank of one
// command hits alike, is printed by rank 0 only (another rank prints its own only when rank 0
// did not end the job within 5 s).
int fail(int code, const char* what, bool input_error) {
  const nemotron::cli::LaunchInfo& l = nemotron::cli::launch_info();
  if (l.size == 1) {
    std::fprintf(stderr, "error: %s\n", what);
    return code;
  }
  if (input_error && l.rank == 0) {
    std::fprintf(stderr, "error: %s\n", what);
  } else {
    // Another rank's bad input is almost always rank 0's too: give rank 0 the time to print it
    // and end the job; still alive after that, this rank's is the only message, so print it.
    if (input_error && !l.log_all_ranks) std::this_thread::sleep_for(std::chrono::seconds(5));
    std::fprintf(stderr, "error: rank %d of %d: %s\n", l.rank, l.size, what);
  }
  nemotron::cli::abort_ranks(code);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    nemotron::cli::launch_info();  // MPI first, when a launcher started this process
    // Checkpoint content hashes are verified on load unless turned off (huge checkpoints).
    if (const char* v = std::getenv("NEMOTRON_CHECKPOINT_VERIFY"); v && std::string(v) == "0")
      nemotron::io::set_verify_checkpoint_hashes(false);
    // The engine's decode steps run as CUDA graphs unless turned off (engine/decode_graphs.h).
    if (const char* v = std::getenv("NEMOTRON_DECODE_GRAPHS"); v && std::string(v) == "0")
      nemotron::engine::set_decode_graphs_default(false);
    return nemotron::cli::run(argc, argv);
  } catch (const nemotron::InputError& e) {
    return fail(2, e.what(), true);
  } catch (const std::exception& e) {
    return fail(1, e.what(), false);
  }
}
