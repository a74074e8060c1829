// Who may write a checkpoint directory (checkpoint.save) and the lock that keeps it to one run.
// The rules, for every command that trains (pretrain now; SFT and RL reuse them):
//  1. A directory belongs to the run that wrote it. A run may start in it only when it holds no
//     run yet (no tracker, no iter_*, no non-empty metrics.jsonl; other files are left alone) or
//     when it resumes that run: checkpoint.load names the same directory or an iteration inside
//     it, without checkpoint.finetune (Megatron's --load = --save habit). Anything else is
//     refused (InputError) before a byte is written: nothing is ever overwritten silently.
//     iter_* without a tracker (a kill just before the first tracker write) is resumed only by
//     naming the iteration: load = save would start from scratch over it.
//  2. While a run trains it holds an exclusive flock on <dir>/run.lock, which records its pid,
//     host, start time and command. The kernel drops the lock when the process dies, however it
//     dies, so a stale file never blocks; a second run fails at once naming the holder.
//  3. Under the lock, the start finishes what a killed run left (interrupted saves and prunes,
//     train/checkpoint.h) before anything else is written.
// Signals (cli only installs handlers): the first SIGTERM/SIGINT saves at the next step boundary
// and exits; a second one exits at once, which loses nothing a checkpoint holds (rule 3).
#pragma once
#include <cstdint>
#include <string>
#include <system_error>
#include <vector>

#include "io/file_lock.h"
#include "train/train_config.h"

namespace nemotron::train {

constexpr const char* kRunLockFile = "run.lock";

// What a checkpoint directory holds, as rule 1 sees it.
struct RunDirState {
  bool exists = false;
  int64_t tracked_iteration = -1;  // the tracker's iteration, -1 without one
  int64_t newest_iteration = -1;   // the newest iter_* directory, -1 without one
  std::string held_run;            // "" when no run; otherwise what it holds, for messages
};
RunDirState inspect_run_dir(const std::string& dir);

// Rules 1 and 2 before anything is read or written: InputError when checkpoint.save holds
// another run that this config does not resume, or when a live run holds its lock. Reads only.
// Returns what it saw (lock_run_dir checks it again under the lock).
// `save_key` names checkpoint.save in messages (RL's is checkpointing.checkpoint_dir).
RunDirState check_run_dir(const CheckpointSection& k, const std::string& save_key = "checkpoint.save");

// The held lock of rule 2; destroying it (or the process dying) releases it.
class RunDirLock {
 public:
  bool held() const { return lock_.held(); }
  // Lines for the log: interrupted writes finished (rule 3), or why the lock is not enforced.
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  friend RunDirLock lock_run_dir(const CheckpointSection&, const RunDirState&, const std::string&, const std::string&);
  io::FileLock lock_;
  std::vector<std::string> notes_;
};

// Creates checkpoint.save, takes its lock (InputError naming the holder when another run has
// it), records `command` in it, checks rule 1 again against `seen` (what check_run_dir saw: the
// directory must not have changed in between), then applies rule 3. An empty checkpoint.save
// returns a lock that holds nothing. A file system without flock gives a note, not an error.
RunDirLock lock_run_dir(const CheckpointSection& k, const RunDirState& seen, const std::string& command,
                        const std::string& save_key = "checkpoint.save");

// Why creating or opening `path` failed with `ec`, for a message: "<dir> is not writable" for a
// permission error or a read-only file system (<dir>: the nearest part of `path` that exists),
// the system's message otherwise.
std::string write_failure_reason(const std::string& path, const std::error_code& ec);
// True when `a` and `b` name the same directory (neither empty; either may not exist yet).
bool same_path(const std::string& a, const std::string& b);

}  // namespace nemotron::train
