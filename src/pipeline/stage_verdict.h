// Did a stage teach what it is there to teach? A pipeline recipe's `verdicts:` name, per stage, the
// eval task and metric that measure its skill, the eval columns (artifact names) before and after
// the stage, and the least gain that counts as proof; the pipeline prints one line per verdict
// after the eval table ("verdict rl: GRPO raised arithmetic_onestep pass@1 8.0% -> 31.0% ...").
// The least gain is the recipe's claim: it should sit far outside the spread of the metric across
// seeds and machines (measured for the tiny recipes in the README), so a stage that did not learn
// reads FAIL on every machine and one that did reads PASS on every machine.
//
//   verdicts:
//     - {stage: rl, says: GRPO, task: arithmetic_onestep, metric: pass@1,
//        before: super3-tiny-sft, after: super3-tiny-rl, min_gain: 0.10}
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace nemotron::pipeline {

struct VerdictSpec {
  std::string stage;       // the stage judged (a stage name of the recipe)
  std::string says;        // how the line names it ("GRPO"); default: the stage name
  std::string task;        // eval task name (results.json "results" key)
  std::string metric;      // its metric ("pass@1"; results.json key "pass@1,none")
  std::string before;      // eval column before the stage: artifact name, version left out
  std::string after;       // eval column after it
  double min_gain = 0;     // after - before must reach this (in the metric's units) to PASS
  std::string where;       // "verdicts[1]" for error messages
};

// Reads `verdicts:` (absent or null: none) of a pipeline recipe tree; InputError naming `source`
// and the key. Stage names are checked against `stage_names`.
std::vector<VerdictSpec> read_verdicts(const nlohmann::json& node, const std::string& source,
                                       const std::vector<std::string>& stage_names);

struct Verdict {
  VerdictSpec spec;
  std::optional<double> before, after;  // empty: that column or metric is not in the results
  bool passed = false;
  std::string line;  // "verdict sft: SFT raised ... : PASS", or why it could not be judged
};

// Judges every spec against an eval results.json (nemotron eval's: "models": [{"model":
// {"artifact": "name:vN"}, "results": {task: {"metric,none": value}}}]). A missing column or
// metric is a FAIL line that says what is missing.
std::vector<Verdict> judge(const std::vector<VerdictSpec>& specs, const nlohmann::json& results);

// pipeline.json's record of the verdicts.
nlohmann::json verdicts_json(const std::vector<Verdict>& v);

}  // namespace nemotron::pipeline
