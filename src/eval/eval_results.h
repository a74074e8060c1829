// What an evaluation reports: per model, per task, its metrics with standard errors, written as
// results.json in lm-evaluation-harness's layout ({"results": {task: {"acc,none": x,
// "acc_stderr,none": se, ...}}, "n-samples": ..., "configs": ...}) with the model's label, path and
// artifact, and printed as one table with the models side by side (base -> SFT -> RL).
#pragma once
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/task_scoring.h"

namespace nemotron::eval {

struct ModelResults {
  std::string label;     // the artifact reference (super3-tiny-sft:v2) or the checkpoint path
  std::string path;      // the weights evaluated
  std::string artifact;  // "" when the model was given by path
  std::vector<TaskResult> tasks;
  double seconds = 0;
};

// One model's results.json object.
nlohmann::json results_json(const ModelResults& m, const nlohmann::json& config);
// The table: Task | Metric | one column per model ("0.750 ± 0.043"), arrows for the direction.
void print_results_table(std::FILE* out, const std::vector<ModelResults>& models);

}  // namespace nemotron::eval
