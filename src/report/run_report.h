// `nemotron report`: one self-contained HTML page for a run directory (e.g. runs/super3/tiny with
// pretrain/, sft/, rl/ stages): per stage, the curves of its metrics.jsonl against iteration (lm
// loss with validation loss, learning rate, grad norm, RL reward/accuracy, throughput, and any
// other number the stage logged), a summary row, and its resolved config.yaml; an evaluation table
// per results.json found. Missing stages are left out; a malformed line or file becomes a warning
// on the page, not a failure. No script, font or request leaves the page.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace nemotron::report {

struct StageRun {
  std::string name;  // the stage directory's name ("pretrain", "sft", ...)
  std::string dir;
  std::vector<nlohmann::json> records;  // metrics.jsonl, in file order
  std::string config_path, config_text;  // the newest config.yaml found ("" if none)
  std::vector<std::string> warnings;     // lines or files that could not be read
};

struct EvalResults {
  std::string path;
  nlohmann::json results;  // null when unreadable (see warning)
  std::string warning;
};

struct RunData {
  std::string run_dir;
  std::vector<StageRun> stages;
  std::vector<EvalResults> evals;
  // RUN_DIR/pipeline.json when `nemotron <family> pipeline` wrote it (null otherwise): each
  // stage's command, result, seconds, config and artifacts, and the lineage of those artifacts.
  nlohmann::json pipeline;
  std::string pipeline_warning;  // pipeline.json exists but cannot be read
};

// Reads the stages of `run_dir`: the directory itself when it holds a metrics.jsonl, and each
// subdirectory holding a metrics.jsonl or checkpoints (known stages first: pretrain, sft, rl,
// grpo, eval; then the others by name); results.json in it or one level down; pipeline.json in it.
// InputError when `run_dir` is not a directory or holds no stage, no results.json and no
// pipeline.json.
RunData load_run(const std::string& run_dir);

// The whole page; `generated_at` is shown as given (the caller's clock).
std::string render_report(const RunData& run, const std::string& generated_at);

}  // namespace nemotron::report
