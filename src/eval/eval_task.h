// Evaluation tasks as data (reference/pipeline-and-rl.md §8): what a task file holds, how its rows
// are read, and how few-shot prompts are built. Three kinds, as lm-evaluation-harness scores them:
//   multiple_choice  log-likelihood of each choice after the context; acc (argmax) and acc_norm
//                    (argmax of the log-likelihood per byte of the choice)
//   generate         a completion checked by a verifier (exact match, the math verifier, the tiny
//                    recipe's answer form); pass@1 over N samples
//   perplexity       the log-likelihood of whole texts: token perplexity, bits per byte
// Task files are JSONL. Our own form ("native"): {"context", "choices", "gold"} for
// multiple_choice, {"prompt", "answer"} for generate, {"text"} for perplexity. Readers for common
// public layouts: lm-eval multiple-choice rows (ARC: question / choices.text / choices.label /
// answerKey; HellaSwag: ctx / endings / label; generic: query / choices / gold) and GSM8K
// (question / answer ending in "#### N").
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace nemotron::eval {

enum class TaskType { multiple_choice, generate, perplexity };
const char* task_type_name(TaskType t);
std::optional<TaskType> task_type_from_name(const std::string& name);

struct EvalItem {
  std::string context;               // multiple_choice: the question; generate: the prompt
  std::vector<std::string> choices;  // multiple_choice
  int64_t gold = 0;                  // index of the right choice
  std::string answer;                // generate: the reference answer
  std::string text;                  // perplexity
  // The text a few-shot example shows after its context (the right choice, or the worked answer).
  std::string shot_target;
};

// The row formats a task file may use; `auto` picks by the row's keys.
enum class RowFormat { automatic, native, lm_eval_mc, gsm8k };
std::optional<RowFormat> row_format_from_name(const std::string& name);

// One JSONL row -> an item of `type`. `where` ("file:line") prefixes an InputError for a row that
// does not fit the format (a missing key, gold out of range, no choices).
EvalItem parse_row(const nlohmann::json& row, TaskType type, RowFormat format, const std::string& where);

// Reads every row of `path` (at most `limit` when > 0).
std::vector<EvalItem> read_task_file(const std::string& path, TaskType type, RowFormat format, int64_t limit = 0);

struct FewShot {
  int64_t num_fewshot = 0;
  std::string target_delimiter = " ";      // between a context and its target
  std::string fewshot_delimiter = "\n\n";  // between examples
  uint64_t seed = 1234;
};

// The context with `shots.num_fewshot` solved examples of `pool` before it, drawn without
// replacement by a Philox stream keyed by (seed, item_index), never the item itself when the pool
// is the task's own items (`pool_is_items`). InputError when the pool is too small.
std::string fewshot_context(const EvalItem& item, int64_t item_index, const std::vector<EvalItem>& pool,
                            bool pool_is_items, const FewShot& shots);

}  // namespace nemotron::eval
