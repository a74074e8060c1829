// A pipeline recipe (recipes/<family>/pipeline/NAME.yaml): the stages `nemotron <family> pipeline`
// runs in order, each one a command of the same binary with its own recipe config and overrides,
// exactly as a user would type it (`nemotron super3 sft -c tiny key=value`), and the run directory
// that receives the pipeline's record (pipeline.json) and its report. Each stage's kind says how
// the pipeline knows its output is up to date (stage_state.h): a data prep checks itself; a
// training stage is done when its checkpoint directory holds the final iteration; an eval when its
// output directory holds results.json.
//
//   run_dir: runs/super3/tiny
//   stages:
//     - {name: data_prep_pretrain, command: data prep pretrain, config: tiny}
//     - {name: pretrain, command: pretrain, config: tiny, overrides: [checkpoint.load=runs/super3/tiny/pretrain]}
//     - {name: eval, command: eval, config: tiny, overrides: ["run.model=a:latest,b:latest"]}
//   verdicts: [...]   # optional: per stage, the eval gain that proves it (stage_verdict.h)
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "pipeline/stage_verdict.h"

namespace nemotron::pipeline {

enum class StageKind { kDataPrep, kTrain, kEval };

const char* stage_kind_name(StageKind k);

struct StageSpec {
  std::string name;                   // [a-z0-9_]+, unique: what --from and --only name
  std::vector<std::string> command;   // the words after the family: {"data", "prep", "sft"}
  std::string config = "default";     // -c NAME|PATH of that command
  std::vector<std::string> overrides; // key=value, after -c
  StageKind kind = StageKind::kTrain;  // from `kind:`, else from the command (data prep ..., eval, else train)
  // Where a stage's output lives in its own resolved config (dotted keys).
  std::string output_key = "output_dir";              // data prep and eval: the output directory
  std::string checkpoint_key = "checkpoint.save";     // training: the checkpoint directory
  std::string iterations_key = "train.train_iters";   // training: the final iteration
  std::string where;                  // "stages[3]" for error messages
};

struct PipelineRecipe {
  std::string source;   // the file, for error messages
  std::string run_dir;  // pipeline.json and report.html go here
  std::vector<StageSpec> stages;
  std::vector<VerdictSpec> verdicts;  // judged after the last eval stage, against its results.json
};

// Reads and checks a recipe tree (after overrides); InputError naming `source` and the key.
PipelineRecipe read_pipeline_recipe(const nlohmann::json& tree, const std::string& source);

// The command as typed: "nemotron super3 data prep pretrain -c tiny key=value".
std::string stage_command_line(const std::string& family, const StageSpec& s);

// The stages to consider: all of them, those from `from` on, or only those named in `only`
// (comma-separated, run in recipe order). InputError for a name the recipe does not have, or
// for both options at once.
std::vector<size_t> select_stages(const PipelineRecipe& r, const std::string& from, const std::string& only);

}  // namespace nemotron::pipeline
