#include "cli/eval_generation.h"

#include <fmt/format.h>

#include "core/error.h"
#include "data/corpus_skills.h"
#include "data/prompt_encoding.h"
#include "engine/cached_step_model.h"
#include "engine/engine.h"
#include "rl/env/math_verifier.h"

namespace nemotron::cli {

eval::GenerateFn make_generate_fn(model::HybridModel& net, const data::Tokenizer& tok, const eval::TaskSpec& task,
                                  int64_t max_seq_len) {
  return [&net, &tok, task, max_seq_len](const std::vector<std::string>& prompts, int64_t samples) {
    const Context ctx{&net.params().backend(), nullptr, net.params().dtype()};
    engine::CachedStepModel step(net, ctx, 16, max_seq_len + task.max_new_tokens);
    engine::Engine engine(step, &tok);
    engine::SamplingParams p;
    p.temperature = task.temperature;
    p.top_p = task.top_p;
    p.max_new_tokens = task.max_new_tokens;
    if (std::optional<int32_t> eos = tok.eos_token_id()) p.stop_token_ids.push_back(*eos);
    if (task.chat)  // the chat templates end an assistant turn with <|im_end|>
      if (std::optional<int32_t> end = tok.token_to_id("<|im_end|>")) p.stop_token_ids.push_back(*end);
    for (size_t i = 0; i < prompts.size(); ++i) {
      engine::Request r;
      r.prompt = task.chat ? tok.encode(prompts[i]) : data::encode_prompt(tok, prompts[i]);
      if (r.prompt.empty()) throw InputError(fmt::format("{}: item {}: the prompt encodes to no tokens", task.name, i));
      if (static_cast<int64_t>(r.prompt.size()) > max_seq_len)  // keep the end, as lm-eval truncates
        r.prompt.erase(r.prompt.begin(), r.prompt.end() - max_seq_len);
      for (int64_t s = 0; s < samples; ++s) {
        r.params = p;
        r.params.seed = task.shots.seed + static_cast<uint64_t>(s);  // sample s of every item: its own stream
        engine.add(r);
      }
    }
    const std::vector<engine::Result> results = engine.run();
    std::vector<std::vector<std::string>> out(prompts.size());
    for (size_t k = 0; k < results.size(); ++k) out[k / static_cast<size_t>(samples)].push_back(results[k].text);
    return out;
  };
}

eval::VerifyFn answer_verifier(const std::string& name) {
  if (name == "math")
    return [](const std::string& completion, const eval::EvalItem& item) {
      return rl::env::verify_math_answer(completion, item.answer).reward > 0.5;
    };
  // final_answer: the tiny recipe's "The answer is N." (its last occurrence).
  return [](const std::string& completion, const eval::EvalItem& item) {
    const std::optional<int64_t> got = data::extract_final_answer(completion);
    return got && std::to_string(*got) == item.answer;
  };
}

}  // namespace nemotron::cli
