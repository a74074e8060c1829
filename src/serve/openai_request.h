// The bodies of /v1/completions and /v1/chat/completions, parsed and validated as the OpenAI API
// defines them (plus vLLM's top_k and chat_template_kwargs, which lm-eval and NeMo RL send). A
// malformed body, a field of the wrong type or out of range is an ApiError 400 naming the field;
// unknown fields are ignored, as OpenAI's clients send some (user, ...). What needs the model
// (the model name, the context length) is checked by the routes.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "data/chat_template.h"

namespace nemotron::serve {

// Settings both endpoints share.
struct SamplingFields {
  std::string model;                 // "" when absent: the served model
  std::optional<int64_t> max_tokens;  // unset: 16 for completions, the rest of the context for chat
  double temperature = 1.0, top_p = 1.0;
  int64_t top_k = 0;  // vLLM's extension; 0 or -1 = off
  int64_t n = 1;
  std::vector<std::string> stop;
  std::optional<uint64_t> seed;
  bool stream = false, include_usage = false;  // include_usage: stream_options.include_usage
  bool ignore_eos = false;  // vLLM's extension: generate max_tokens whatever the model emits (benchmarks)
};

// A prompt as text or as token ids (the API's [int] form, which lm-eval sends when it tokenizes).
using Prompt = std::variant<std::string, std::vector<int32_t>>;

struct CompletionRequest : SamplingFields {
  std::vector<Prompt> prompts;       // one choice group per prompt (n choices each)
  std::optional<int64_t> logprobs;   // top-k alternatives per token (0: only the chosen token's)
  bool echo = false;                 // the prompt's tokens (and log-probs) before the completion
};

struct ChatRequest : SamplingFields {
  data::OrderedJson messages, tools;
  bool enable_thinking = data::ChatRenderOptions{}.enable_thinking;  // chat_template_kwargs; the template's default
  bool logprobs = false;
  int64_t top_logprobs = 0;
};

constexpr int64_t kMaxLogprobs = 20;  // as vLLM's default max_logprobs
constexpr int64_t kMaxN = 64;

CompletionRequest parse_completion_request(const std::string& body);
ChatRequest parse_chat_request(const std::string& body);

}  // namespace nemotron::serve
