// What each stage publishes to the artifact store (artifacts/artifact_store.h; reference/
// pipeline-and-rl.md §5): data preps their output directory, training runs a `model` artifact
// after every checkpoint save (§5.4: the save directory, aliased by the iteration directory's
// name). Names follow the directory: its path below the working directory's runs/ with '/' -> '-'
// (runs/super3/tiny/pretrain -> super3-tiny-pretrain), else the directory's own name (the stem of
// checkpoint.save, as Megatron-Bridge names model artifacts). Inputs are found by path: the
// artifacts whose data a stage read. Publishing never fails a stage: a store that cannot be
// written gives one warning line and the stage goes on.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace nemotron::cli {

// The artifact name for an output directory, as above.
std::string artifact_name_for_dir(const std::string& dir);

// After a data prep: `output_dir` holds metadata.json (its typed fields become the artifact's
// metadata; its `type` the artifact type). `input_paths`: directories or files the prep read
// that may be artifacts (e.g. the tokenizer's data prep output).
void publish_data_artifact(const std::string& output_dir, const std::vector<std::string>& input_paths);

// After a checkpoint save: `iteration_dir` inside `save_dir`. `input_paths`: the data directory
// and the checkpoint a fine-tune started from.
void publish_model_artifact(const std::string& save_dir, const std::string& iteration_dir, int64_t iteration,
                            const std::string& config_yaml, const std::vector<std::string>& input_paths);

}  // namespace nemotron::cli
