// Names in a checkpoint directory that every writer and reader shares (Megatron's layout,
// reference/pipeline-and-rl.md §7): `<save>/latest_checkpointed_iteration.txt` names the newest
// complete `<save>/iter_%07d/`. An iteration a training run saved is complete when its
// train_state.json (written last) exists and every file that train_state.json lists under
// "files" has the size it records: a save or prune cut short never passes for a checkpoint.
// train_state.json also records a content hash per file ("file_hashes", io/file_hash.h), checked
// when an iteration is resolved for loading. A sharded iteration (several ranks, each writing its
// own pieces: io/tensor_pieces.h) lists its rank files under "sharded" and has no
// model.safetensors / optimizer.safetensors.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace nemotron::io {

constexpr const char* kTrackerFile = "latest_checkpointed_iteration.txt";
constexpr const char* kTrainStateFile = "train_state.json";
constexpr const char* kFileHashesKey = "file_hashes";  // {"<file>": "xxh64:..."} in train_state.json
constexpr const char* kShardedKey = "sharded";         // {"world_size": N, "rank_files": [...]}

// "rank_00003.safetensors": the file world rank 3 writes into a sharded iteration.
std::string rank_file_name(int rank);
// The rank files of a sharded iteration (full paths, by rank), or {} when `iter_dir` holds the
// single-process format. InputError naming train_state.json when it is unreadable.
std::vector<std::string> rank_files(const std::string& iter_dir);

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

// Checks every file train_state.json records a hash for (iterations saved before hashes were
// recorded have none to check): a differing file is an InputError naming it and both hashes.
// Skipped when verification is off (set_verify_checkpoint_hashes: cli's
// NEMOTRON_CHECKPOINT_VERIFY=0, for checkpoints too large to read twice).
void verify_iteration_hashes(const std::string& iter_dir);
// The process-wide switch for verify_iteration_hashes (on by default); only cli sets it, from the
// environment, as it sets nothing else: a reading policy, not state that flows through the run.
void set_verify_checkpoint_hashes(bool on);

}  // namespace nemotron::io
