// SIGTERM and SIGINT during training (Megatron's exit-signal-handler; Slurm sends SIGTERM before
// it kills a preempted or timed-out job): the first one asks the trainer to save a checkpoint at
// the next step boundary and stop; a second one ends the process at once (checkpoints are
// crash-safe, so that loses only the steps since the last save). After a stop, the command
// raises the signal again with its default action, so the shell sees 128 + the signal number
// (143 for SIGTERM, 130 for SIGINT) and Slurm sees a job ended by the signal. A signal that was
// ignored when the process started (nohup, a shell's background job and SIGINT) stays ignored.
#pragma once
#include <csignal>
#include <string>

namespace nemotron::cli {

class StopSignals {
 public:
  // Installs the handlers (one StopSignals at a time). `action` completes the message the first
  // signal prints ("received SIGTERM: <action> (a second one exits at once)"): what this command
  // does about it.
  explicit StopSignals(const char* action = "saving and stopping after this step");
  ~StopSignals();  // restores the previous ones
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  // "" until a signal arrived, then "received SIGTERM" (for TrainerOptions::stop_requested).
  static std::string requested();
  // The signal that arrived, 0 if none.
  static int signal_number();
};

// Flushes stdio and ends the process by `sig` with its default action (exit status 128 + sig).
[[noreturn]] void reraise(int sig);

}  // namespace nemotron::cli
