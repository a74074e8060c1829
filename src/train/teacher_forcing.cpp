#include "train/teacher_forcing.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "data/jsonl.h"

namespace nemotron::train {

std::vector<TeacherForcedExample> load_teacher_forced_examples(const std::string& path, const data::Tokenizer& tok,
                                                               const data::ChatTemplate& chat, int64_t max_tokens,
                                                               int64_t* skipped) {
  data::JsonlReader reader(path);
  std::vector<TeacherForcedExample> out;
  nlohmann::ordered_json row;
  int64_t left_out = 0;
  while (reader.next_row(row)) {
    const auto msgs = row.find("messages");
    const auto ref = row.find("reference");
    if (msgs == row.end() || !msgs->is_array() || msgs->empty())
      throw InputError(fmt::format("{}: messages: expected a non-empty list of chat messages", reader.where()));
    if (ref == row.end() || !ref->is_string())
      throw InputError(fmt::format("{}: reference: expected the reference answer as a string", reader.where()));
    std::string prompt, full;
    try {
      prompt = data::render_prompt(chat, *msgs, nullptr);
      data::OrderedJson conv = *msgs;
      conv.push_back({{"role", "assistant"}, {"content", ref->get<std::string>()}});
      full = data::render_chat(chat, conv, nullptr);
    } catch (const data::ChatTemplateError& e) {
      throw InputError(fmt::format("{}: {}", reader.where(), e.what()));
    }
    if (!full.starts_with(prompt))
      throw Error(fmt::format("{}: the rendered conversation does not start with the rendered prompt and generation "
                              "prompt ({} chat template)",
                              reader.where(), chat.name()));
    TeacherForcedExample ex;
    ex.tokens = tok.encode(prompt);
    ex.prompt_tokens = static_cast<int64_t>(ex.tokens.size());
    const std::vector<int32_t> answer = tok.encode(std::string_view(full).substr(prompt.size()));
    ex.tokens.insert(ex.tokens.end(), answer.begin(), answer.end());
    if (static_cast<int64_t>(ex.tokens.size()) > max_tokens + 1 || answer.empty() || ex.prompt_tokens == 0) {
      ++left_out;
      continue;
    }
    out.push_back(std::move(ex));
  }
  if (skipped) *skipped = left_out;
  return out;
}

TeacherForcedAccuracy teacher_forced_accuracy(model::HybridModel& net, const std::vector<TeacherForcedExample>& examples,
                                              int64_t pack_size, int32_t pad_id,
                                              const parallel::ProcessGroups* groups) {
  TeacherForcedAccuracy acc;
  ContinuationScoring how{pack_size, 1, pad_id, true};
  how.groups = groups;
  for (const ContinuationScore& s : score_continuations(net, examples, how)) {
    acc.correct += s.greedy_tokens;
    acc.answer_tokens += s.tokens;
    ++acc.examples;
  }
  return acc;
}

}  // namespace nemotron::train
