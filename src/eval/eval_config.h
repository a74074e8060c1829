// `nemotron <family> eval`'s config (recipes/<family>/eval/*.yaml). The model comes as in the
// seeds' eval recipe: deployment.checkpoint_path (usually ${art:model,path} with run.model naming
// the model artifact); tasks under evaluation.tasks, each from a JSONL file (path + format) or the
// bundled generator (eval/bundled_tasks.h); evaluation.limit_samples caps every task.
//   run: {model: super3-tiny-sft:latest}
//   deployment: {checkpoint_path: ${art:model,path}, device: cpu, dtype: auto}
//                                                  (auto: bfloat16 on cuda, float32 on cpu)
//   tokenizer: {model: .../tokenizer.json}        (default: the one beside the checkpoint)
//   chat_template: nano3                           (for tasks with chat: true)
//   evaluation:
//     limit_samples: null
//     row_tokens: 512                              (tokens per packed scoring row)
//     rows_per_forward: 8                          (packed rows per scoring forward: the batch)
//     tasks:
//       - {name, type: multiple_choice|generate|perplexity, path | generator, format: auto,
//          num_fewshot: 0, fewshot_path, target_delimiter: " ", fewshot_delimiter: "\n\n",
//          chat: false, max_new_tokens: 64, samples: 1, temperature: 0, top_p: 1,
//          verifier: final_answer|exact|math, seed: 1234}
//   output_dir: runs/<family>/tiny/eval
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/eval_task.h"

namespace nemotron::eval {

struct TaskSpec {
  std::string name;
  TaskType type = TaskType::multiple_choice;
  std::string path;                   // a JSONL task file, or
  nlohmann::json generator;           // a bundled generator
  RowFormat format = RowFormat::automatic;
  std::string fewshot_path;           // few-shot examples (default: the task's other items)
  FewShot shots;
  int64_t limit = 0;                  // items (0: all; evaluation.limit_samples applies too)
  bool chat = false;                  // render each prompt as a user turn with the chat template
  int64_t max_new_tokens = 64;
  int64_t samples = 1;
  double temperature = 0, top_p = 1;
  std::string verifier = "final_answer";
  std::string where;                  // "evaluation.tasks[2]" for errors
};

struct EvalConfig {
  std::string source;
  std::string checkpoint_path;        // deployment.checkpoint_path
  std::string device = "cpu";         // deployment.device: cpu or cuda
  std::string dtype = "float32";      // deployment.dtype as resolved: bfloat16 (cuda only) or float32
  std::string tokenizer;              // tokenizer.model ("" = beside the checkpoint)
  std::string chat_template = "nano3";
  int64_t row_tokens = 512;
  int64_t rows_per_forward = 8;
  int64_t limit_samples = 0;
  std::vector<TaskSpec> tasks;
  std::string output_dir;
};

// Validates every key (unknown keys and bad values name the file and the dotted key).
EvalConfig read_eval_config(const nlohmann::json& tree, const std::string& source);

// The task's items: its file's rows or its generator's, at most the limit.
std::vector<EvalItem> load_task_items(const TaskSpec& t, const EvalConfig& cfg);
// Few-shot examples from fewshot_path, or empty (the task's own items serve).
std::vector<EvalItem> load_fewshot_pool(const TaskSpec& t);

}  // namespace nemotron::eval
