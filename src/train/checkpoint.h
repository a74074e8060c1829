// Training checkpoints in Megatron's directory layout (reference/pipeline-and-rl.md §7), with
// safetensors instead of torch_dist shards:
//   <save>/latest_checkpointed_iteration.txt   ASCII iteration (Megatron-LM's tracker)
//   <save>/iter_0000100/model.safetensors       weights by Hub name (model::save_weights)
//                       optimizer.safetensors   AdamW moments exp_avg.<name>, exp_avg_sq.<name>
//                       (a LoRA run: the adapters' tensors and moments only; the frozen base is
//                       checkpoint.pretrained_checkpoint, recorded in config.yaml)
//                       config.yaml             the resolved config of the run
//                       tokenizer/              the run's tokenizer files (generate/serve find them)
//                       train_state.json        iteration, samples, optimizer steps, data cursor,
//                                               RNG, scheduler position, format version, every
//                                               file's size and content hash (checked on load)
// That is the format of one process; several write a sharded iteration instead
// (train/sharded_checkpoint.h); every loader here reads both.
// Crash safety: the iteration is written under a temporary name, fsynced and renamed into place,
// and only then is the tracker replaced atomically; train_state.json is written last inside the
// directory and lists every other file with its size, so a directory without it, or with a file
// missing, is never a checkpoint. A kill at any moment leaves the tracker naming a complete
// checkpoint (the previous one until the very last rename). Pruning renames an iteration to
// .pruning-iter_XXXXXXX before deleting it, so a kill mid-delete never leaves a half iter_*;
// finish_interrupted_writes() (run at the start of every run, under the run-directory lock of
// train/run_dir.h) removes what such kills left.
#pragma once
#include "io/checkpoint_layout.h"
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "model/param.h"
#include "model/weights_io.h"
#include "train/adamw.h"

namespace nemotron::train {

constexpr int kCheckpointFormatVersion = 1;         // one process: model.safetensors, optimizer.safetensors
constexpr int kShardedCheckpointFormatVersion = 2;  // several: rank files (train/sharded_checkpoint.h)
using io::kTrackerFile;

struct TrainState {
  int64_t iteration = 0;                           // optimizer steps completed
  int64_t consumed_train_samples = 0;              // = the scheduler position in samples
  int64_t optimizer_steps = 0;                     // AdamW's step count (its bias corrections)
  nlohmann::json data = nlohmann::json::object();  // {"train": BatchSource::state()}
  nlohmann::json rng = nlohmann::json::object();   // seeds (every stream is counter-based)
  double last_lr = 0;

  nlohmann::json to_json() const;
  // `source` names the file in errors.
  static TrainState from_json(const nlohmann::json& j, const std::string& source);
};

// "iter_0000100" (Megatron's iter_%07d).
using io::iteration_dir_name;

// Called with the stage about to run ("model", "optimizer", "config", "tokenizer", "train_state",
// "rename", "tracker", "prune", and "prune_delete" once an old iteration is renamed aside and
// about to be deleted; "rank_file" on every rank of a sharded save): tests inject crashes here.
using SaveStageHook = std::function<void(const std::string& stage)>;

struct CheckpointContent {
  const model::ParamStore* params = nullptr;
  const AdamW* optimizer = nullptr;  // null: no optimizer.safetensors
  TrainState state;
  std::string config_yaml;
  // A directory with the run's tokenizer files (tokenizer.json and the rest of the Hugging Face
  // set, model/hf_checkpoint.h tokenizer_file_names), copied into the iteration's tokenizer/ so
  // that generate and serve need no --tokenizer; empty: none (a mock-data run).
  std::string tokenizer_dir;
};

// Writes <save_dir>/iter_XXXXXXX for content.state.iteration as described above, then prunes to
// the most_recent_k newest iterations (-1 keeps all). Returns the iteration directory.
std::string save_checkpoint(const std::string& save_dir, const CheckpointContent& content, int64_t most_recent_k = -1,
                            const SaveStageHook& hook = {});

// The steps every save ends with, single-process or sharded (the first rank): config.yaml and
// the tokenizer files into `tmp_dir`, then train_state.json (c.state plus `extra` keys, and every
// file's size and content hash; `known_hashes` are those the ranks computed for their own files),
// the directory flushed, renamed to iter_XXXXXXX, the tracker, pruning. Returns the directory.
std::string commit_iteration(const std::string& save_dir, const std::string& tmp_dir, const CheckpointContent& c,
                             const nlohmann::json& extra, const std::map<std::string, std::string>& known_hashes,
                             int64_t most_recent_k, const SaveStageHook& hook);
// <save_dir>/iter_XXXXXXX.tmp-<pid>, created empty (an old one removed): where a save writes
// before its commit; finish_interrupted_writes removes what a killed save left.
std::string make_temp_iteration_dir(const std::string& save_dir, int64_t iteration, long pid);
// fsync of a directory (its entries durable); Error naming it on failure.
void fsync_dir(const std::string& dir);

// The iteration directory `path` names: a parent with the tracker file, or an iter_* directory
// holding train_state.json. InputError naming the path otherwise, and naming the missing files
// of an incomplete iteration.
// With weights_only, a directory holding only weights (model.safetensors, e.g. a
// `convert import` output) is accepted too: fine-tuning needs nothing else.
std::string resolve_checkpoint_dir(const std::string& path, bool weights_only = false);
// True when `path` holds a tracker or a train_state.json (something resolve_checkpoint_dir takes).
bool has_checkpoint(const std::string& path);

// Reads train_state.json of an iteration directory. An iter_XXXXXXX directory whose
// train_state.json records another iteration is an InputError naming both.
TrainState read_train_state(const std::string& iter_dir);
// Fills `params` from iter_dir/model.safetensors, or the rank files of a sharded iteration. A tensor missing or of another shape is an
// InputError naming the checkpoint, the tensor and both shapes (nothing on disk is touched).
// A store with LoRA adapters (model/lora.h): from a checkpoint without adapters (the pretrained
// model) the base weights load and the adapters keep their init; from a LoRA checkpoint (the
// adapters only, as save_checkpoint writes them) the adapters load and the base weights come
// from `base_checkpoint` (checkpoint.pretrained_checkpoint; an InputError when empty).
// `sink` (null: each parameter's whole truth): where what is read goes; a sharded optimizer's
// (train/shard_weight_sink.h) keeps only the rank's part.
void load_checkpoint_weights(const std::string& iter_dir, model::ParamStore& params,
                             const std::string& base_checkpoint = "", const model::WeightSink* sink = nullptr);
// When iter_dir holds the config.yaml of the run that wrote it: InputError naming the checkpoint,
// the first model key that differs from `want` and both values (a model of another shape or
// kind; training-only keys such as recompute_granularity do not count). Without config.yaml
// (a weights-only import) nothing is checked here; the weights' shapes still are, on load.
void check_checkpoint_model(const std::string& iter_dir, const model::ModelConfig& want, const std::string& recipe);
// Fills the moments of `opt` (every parameter that requires a gradient) from iter_dir/optimizer.safetensors
// (or a sharded iteration's rank files: each rank reads only its pieces' ranges) and
// sets its step count (a sharded optimizer takes its ranges of the full tensors: AdamW::set_moments).
void load_checkpoint_optimizer(const std::string& iter_dir, AdamW& opt, const model::ParamStore& params,
                               int64_t optimizer_steps);

// Removes complete iterations beyond the k newest (never the one the tracker names), each renamed
// out of the way first, and incomplete iter_* older than the tracked one (what an interrupted
// prune of an earlier build left); then finish_interrupted_writes().
void prune_checkpoints(const std::string& save_dir, int64_t most_recent_k, const SaveStageHook& hook = {});

// Finishes what a killed save or prune left in `save_dir`: deletes .pruning-* directories and
// iter_*.tmp-PID (incomplete saves), and an iter_*.old-PID (an iteration being replaced) is
// moved back when the new one never arrived, deleted otherwise. Returns one line per action,
// for the log. Only the holder of the run-directory lock may call it (it would delete another
// live run's temporary files).
std::vector<std::string> finish_interrupted_writes(const std::string& save_dir);

}  // namespace nemotron::train
