// Names in a checkpoint directory that every writer and reader shares (Megatron's layout,
// reference/pipeline-and-rl.md §7): `<save>/latest_checkpointed_iteration.txt` names the newest
// complete `<save>/iter_%07d/`. An iteration a training run saved is complete when its
// train_state.json (written last) exists and every file that train_state.json lists under
// "files" has the size it records: a save or prune cut short never passes for a checkpoint.
#pragma once
#include <cstdint>
#include <string>

namespace nemotron::io {

constexpr const char* kTrackerFile = "latest_checkpointed_iteration.txt";
constexpr const char* kTrainStateFile = "train_state.json";

std::string iteration_dir_name(int64_t iteration);  // "iter_0000100"
// The iteration an `iter_%07d` directory name stands for (the last path component), or -1 when
// the name is not of that form.
int64_t iteration_of_dir_name(const std::string& path);
// The iteration the tracker in `save_dir` names, or -1 without a tracker; an unreadable tracker
// is an InputError naming it.
int64_t read_tracker(const std::string& save_dir);

// What keeps `iter_dir` from being a complete training iteration, as a phrase ("missing
// model.safetensors, optimizer.safetensors"), or "" when it is complete. Iterations saved before
// train_state.json listed its files need model.safetensors and config.yaml.
std::string incomplete_iteration_reason(const std::string& iter_dir);
// True when `dir` was written by a training run (it holds train_state.json or
// optimizer.safetensors), as opposed to weights alone (`convert import`).
bool is_training_iteration(const std::string& dir);
// InputError "<dir>: incomplete checkpoint (...)" when `dir` is a training iteration that is not
// complete; nothing otherwise.
void require_complete_iteration(const std::string& dir);

}  // namespace nemotron::io
