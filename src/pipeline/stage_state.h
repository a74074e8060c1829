// The pipeline's record (RUN_DIR/pipeline.json) and the up-to-date rule.
//
// A stage's fingerprint is its resolved command config (the recipe file after its overrides,
// before ${art:...} resolution) and its inputs: the output artifacts ("name:vN") of every stage
// before it in this run. The pipeline records it when a stage starts and again when it ends.
//  - data prep: always run; the command itself finds its output up to date (same inputs and
//    config) and does nothing. The stage counts as up to date when its output artifact did not
//    get a new version.
//  - training: skipped when its checkpoint directory holds the final iteration and the record's
//    fingerprint of a finished run is unchanged. Run (resumed by the trainer) when the directory
//    holds a partial run of the same fingerprint, or no run at all. Refused when the directory
//    holds a run of another fingerprint, or one this pipeline did not record: that run is kept
//    unless --force moves it aside and trains again.
//  - eval: skipped when results.json exists and the finished record's fingerprint is unchanged.
//  --force runs every selected stage again (data prep with --force).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/pipeline_recipe.h"

namespace nemotron::pipeline {

struct Fingerprint {
  nlohmann::json config;            // the stage's config tree
  std::vector<std::string> inputs;  // earlier stages' outputs, "name:vN"
  bool operator==(const Fingerprint& o) const { return config == o.config && inputs == o.inputs; }
};

// What changed between two fingerprints, for the user: `config key train.train_iters: 300 -> 20`
// or `input super3-tiny-data-pretrain:v1 -> v2`; "" when equal.
std::string describe_change(const Fingerprint& was, const Fingerprint& now);

struct StageRecord {
  std::string name;
  std::string status;  // running, done, failed, interrupted
  std::string command;
  Fingerprint fingerprint;
  std::vector<std::string> outputs;  // artifacts, "name:vN"
  double seconds = 0;                // the last run's time (0 when skipped)
  std::string result;                // ran, resumed, up to date, skipped (up to date), ...
  std::string finished_at;
};

struct PipelineState {
  std::string recipe, family;
  std::vector<StageRecord> stages;
  nlohmann::json lineage = nlohmann::json::array();  // [{artifact, type, inputs}] of every output, for the report
  nlohmann::json verdicts = nlohmann::json::array();  // the last eval's verdicts (stage_verdict.h: verdicts_json)
  const StageRecord* find(const std::string& name) const;
  StageRecord& upsert(const std::string& name);
  nlohmann::json to_json() const;
  static PipelineState from_json(const nlohmann::json& j, const std::string& source);
};

// Reads RUN_DIR/pipeline.json (an empty state when absent); InputError when malformed.
PipelineState load_state(const std::string& path);
// Writes it atomically (temporary name, then rename).
void save_state(const PipelineState& s, const std::string& path);

// A training stage's checkpoint directory as the rule sees it.
struct TrainProgress {
  bool has_run = false;          // any checkpoint (or tracker) in the directory
  int64_t latest_iteration = -1;  // the tracker's iteration, -1 when none
};
TrainProgress read_train_progress(const std::string& checkpoint_dir);

enum class Action { kRun, kSkip, kRefuse };
struct Decision {
  Action action = Action::kRun;
  std::string reason;  // why (printed in the stage header)
};

// The rule above. `record`: this stage's entry in pipeline.json, if any. `final_iteration`:
// the training stage's last iteration; `done_output`: eval's results.json exists.
Decision decide(StageKind kind, const StageRecord* record, const Fingerprint& now, const TrainProgress& progress,
                int64_t final_iteration, bool done_output, bool force);

}  // namespace nemotron::pipeline
