// Names in a checkpoint directory that every writer and reader shares (Megatron's layout,
// reference/pipeline-and-rl.md §7): `<save>/latest_checkpointed_iteration.txt` names the newest
// complete `<save>/iter_%07d/`.
#pragma once
#include <cstdint>
#include <string>

namespace nemotron::io {

constexpr const char* kTrackerFile = "latest_checkpointed_iteration.txt";

std::string iteration_dir_name(int64_t iteration);  // "iter_0000100"
// The iteration the tracker in `save_dir` names, or -1 without a tracker; an unreadable tracker
// is an InputError naming it.
int64_t read_tracker(const std::string& save_dir);

}  // namespace nemotron::io
