// Scores one task on a model (eval_task.h for the kinds). Every metric carries the standard error
// of its mean over items (lm-evaluation-harness's mean_stderr: the sample standard deviation over
// sqrt(n)); perplexities carry the delta-method error of the per-token loss (a ratio estimator
// over documents).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "eval/eval_task.h"
#include "model/hybrid_model.h"
#include "train/continuation_scoring.h"

namespace nemotron::eval {

struct MetricValue {
  std::string name;  // acc, acc_norm, pass@1, token_perplexity, bits_per_byte, ...
  double value = 0;
  double stderr_ = 0;
  bool higher_is_better = true;
};

struct TaskResult {
  std::string task;
  TaskType type = TaskType::multiple_choice;
  int64_t items = 0;
  int64_t num_fewshot = 0;
  std::vector<MetricValue> metrics;
  double seconds = 0;
  const MetricValue* metric(const std::string& name) const;
};

// The model side of log-likelihood scoring: requests are packed `row_tokens` to a row,
// `rows_per_forward` rows to a forward (train/continuation_scoring.h).
struct LoglikelihoodModel {
  model::HybridModel* net = nullptr;
  const data::Tokenizer* tok = nullptr;
  int64_t row_tokens = 2048;
  int32_t pad_id = 0;
  std::optional<int32_t> bos;  // prepended to every request: data::prompt_bos, the rule serve and generate share
  int64_t rows_per_forward = 1;
  train::ContinuationStats* stats = nullptr;  // when set, every scoring call adds its forwards and tokens
};

// (context, continuation) -> one scoring request: m.bos (data::prompt_bos), the context, then the
// continuation's tokens: the tail of the whole text's encoding when it starts with the context's,
// else encoded alone. The context is cut from the left to fit row_tokens.
train::ContinuationRequest continuation_request(const LoglikelihoodModel& m, const std::string& context,
                                                const std::string& continuation);

// A multiple-choice item as tokens: one scoring request per choice (context, then the choice)
// and the choice's length in bytes (acc_norm's divisor).
struct TokenizedChoiceItem {
  std::vector<train::ContinuationRequest> choices;
  std::vector<double> choice_bytes;
  int64_t gold = 0;
};

// acc and acc_norm of tokenized items (score_multiple_choice's scoring; m.tok is not used).
TaskResult score_tokenized_choices(const LoglikelihoodModel& m, const std::string& name,
                                   const std::vector<TokenizedChoiceItem>& items, int64_t num_fewshot = 0);

// acc and acc_norm. The continuation is target_delimiter + choice, tokenized as the tail of
// context + continuation (lm-eval's split, so a word keeps its leading-space token).
TaskResult score_multiple_choice(const LoglikelihoodModel& m, const std::string& name, const std::vector<EvalItem>& items,
                                 const std::vector<EvalItem>* fewshot_pool, const FewShot& shots);

// token_perplexity, bits_per_byte, word_perplexity over whole texts, each cut into windows of
// row_tokens + 1 tokens that overlap by one token (every token after the first is predicted once).
TaskResult score_perplexity(const LoglikelihoodModel& m, const std::string& name, const std::vector<EvalItem>& items);

// Completions for prompts: samples per prompt, in order.
using GenerateFn = std::function<std::vector<std::vector<std::string>>(const std::vector<std::string>& prompts,
                                                                       int64_t samples)>;
// True when a completion answers the item.
using VerifyFn = std::function<bool(const std::string& completion, const EvalItem& item)>;

// pass@1 over `samples` completions per item (the mean of their verdicts, then over items).
TaskResult score_generation(const GenerateFn& generate, const VerifyFn& verify, const std::string& name,
                            const std::vector<EvalItem>& items, const std::vector<EvalItem>* fewshot_pool,
                            const FewShot& shots, int64_t samples);

// The mean of `x` and its standard error (0 for fewer than two values).
std::pair<double, double> mean_and_stderr(const std::vector<double>& x);

}  // namespace nemotron::eval
