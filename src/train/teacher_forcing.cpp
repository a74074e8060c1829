#include "train/teacher_forcing.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "data/jsonl.h"

namespace nemotron::train {

std::vector<TeacherForcedExample> load_teacher_forced_examples(const std::string& path, const data::Tokenizer& tok,
                                                               data::ChatFormat format, int64_t max_tokens,
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
      prompt = data::render_chat(format, *msgs, nullptr) + data::chat_generation_prompt(format, false);
      data::OrderedJson conv = *msgs;
      conv.push_back({{"role", "assistant"}, {"content", ref->get<std::string>()}});
      full = data::render_chat(format, conv, nullptr);
    } catch (const data::ChatTemplateError& e) {
      throw InputError(fmt::format("{}: {}", reader.where(), e.what()));
    }
    if (!full.starts_with(prompt))
      throw Error(fmt::format("{}: the rendered conversation does not start with the rendered prompt and generation "
                              "prompt ({} chat template)",
                              reader.where(), data::chat_format_name(format)));
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
                                              int64_t pack_size, int32_t pad_id) {
  TeacherForcedAccuracy acc;
  Backend& backend = net.params().backend();
  Context ctx{&backend, nullptr, net.params().dtype()};
  const int64_t V = net.config().vocab_size, T = pack_size;
  size_t next = 0;
  while (next < examples.size()) {
    // One packed row: whole examples while they fit (inputs are all tokens but the last).
    std::vector<int32_t> ids(static_cast<size_t>(T), pad_id), seq(static_cast<size_t>(T), 0), pos(static_cast<size_t>(T), 0);
    std::vector<std::pair<size_t, int64_t>> placed;  // example, start column
    int64_t t = 0, k = 0;
    while (next < examples.size()) {
      const TeacherForcedExample& ex = examples[next];
      const int64_t n = static_cast<int64_t>(ex.tokens.size()) - 1;
      if (t + n > T) break;
      for (int64_t j = 0; j < n; ++j) {
        ids[static_cast<size_t>(t + j)] = ex.tokens[static_cast<size_t>(j)];
        seq[static_cast<size_t>(t + j)] = static_cast<int32_t>(k);
        pos[static_cast<size_t>(t + j)] = static_cast<int32_t>(j);
      }
      placed.emplace_back(next++, t);
      t += n, ++k;
    }
    NM_CHECK(!placed.empty(), "teacher forcing: an example of {} tokens does not fit a row of {}",
             examples[next].tokens.size(), T);
    for (int64_t j = t; j < T; ++j) seq[static_cast<size_t>(j)] = static_cast<int32_t>(k);
    model::SequenceLayout layout{Tensor::from_vector<int32_t>({1, T}, seq).to(backend),
                                 Tensor::from_vector<int32_t>({1, T}, pos).to(backend)};
    const Tensor input = Tensor::from_vector<int32_t>({1, T}, ids).to(backend);
    const std::vector<double> logits = net.logits(ctx, input, layout).to_f64_vector();
    for (const auto& [e, start] : placed) {
      const TeacherForcedExample& ex = examples[e];
      const int64_t n = static_cast<int64_t>(ex.tokens.size()) - 1;
      for (int64_t j = ex.prompt_tokens - 1; j < n; ++j) {  // predicts tokens[j + 1], an answer token
        const double* z = logits.data() + (start + j) * V;
        const int64_t best = std::max_element(z, z + V) - z;
        acc.correct += best == ex.tokens[static_cast<size_t>(j + 1)];
        ++acc.answer_tokens;
      }
      ++acc.examples;
    }
  }
  return acc;
}

}  // namespace nemotron::train
