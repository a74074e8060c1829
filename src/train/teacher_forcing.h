// Proof that SFT teaches the answers: on held-out chat prompts (the `heldout/*.jsonl` of `data
// prep sft`: a user turn and its reference answer), the share of answer tokens the model predicts
// right under teacher forcing. Each example is the prompt rendered with the chat template and its
// generation prompt (data::chat_generation_prompt, no thinking: the training rows without
// reasoning end their assistant prefix the same way), then the rest of the rendered assistant
// turn (the reference answer and the end-of-turn marker), tokenized chunk by chunk as data prep
// does. At every answer position the argmax of the model's next-token distribution is compared
// with the reference token. Examples are packed into rows of `pack_size` tokens with their
// sequence layout, so each is scored as if alone.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/chat_template.h"
#include "data/tokenizer.h"
#include "model/hybrid_model.h"
#include "train/continuation_scoring.h"

namespace nemotron::train {

// tokens: prompt then answer; the answer tokens are tokens[prompt_tokens..].
using TeacherForcedExample = ContinuationRequest;

// Reads `path` (rows {"messages": [...], "reference": "..."}); InputError "<file>:<line>: ..." on
// a malformed row. Examples longer than max_tokens are left out (counted in *skipped).
std::vector<TeacherForcedExample> load_teacher_forced_examples(const std::string& path, const data::Tokenizer& tok,
                                                               const data::ChatTemplate& chat, int64_t max_tokens,
                                                               int64_t* skipped = nullptr);

struct TeacherForcedAccuracy {
  int64_t correct = 0, answer_tokens = 0, examples = 0;
  double share() const { return answer_tokens > 0 ? static_cast<double>(correct) / static_cast<double>(answer_tokens) : 0.0; }
};

// Forward only (nothing kept), on the model's device, `pack_size` tokens per packed row.
// `groups`: the run's (a tensor-parallel model needs them); null: one process.
TeacherForcedAccuracy teacher_forced_accuracy(model::HybridModel& net, const std::vector<TeacherForcedExample>& examples,
                                              int64_t pack_size, int32_t pad_id,
                                              const parallel::ProcessGroups* groups = nullptr);

}  // namespace nemotron::train
