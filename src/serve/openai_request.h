// The bodies of /v1/completions, /v1/chat/completions, /tokenize and /detokenize, parsed and
// validated as the OpenAI API (and vLLM, for its top_k, chat_template_kwargs and the tokenizer
// endpoints) defines them. A malformed body, a field of the wrong type or out of range is an
// ApiError 400 naming the field; so is a field this server does not implement (response_format
// other than text, best_of other than n, suffix) rather than ignoring it; unknown fields are
// ignored, as OpenAI's clients send some (user, ...). Chat messages pass the checks `data prep
// sft` makes (data/chat_messages.h). What needs the model (its name, the context length, the
// vocabulary) is checked by the routes.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "data/chat_template.h"
#include "serve/tool_calls.h"

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
  // OpenAI's logit adjustments (engine/sampler.h); logit_bias ids are checked against the vocabulary later.
  std::vector<std::pair<int32_t, float>> logit_bias;
  double presence_penalty = 0, frequency_penalty = 0;
};

// A prompt as text or as token ids (the API's [int] form, which lm-eval sends when it tokenizes).
using Prompt = std::variant<std::string, std::vector<int32_t>>;

struct CompletionRequest : SamplingFields {
  std::vector<Prompt> prompts;       // one choice group per prompt (n choices each)
  std::optional<int64_t> logprobs;   // top-k alternatives per token (0: only the chosen token's)
  bool echo = false;                 // the prompt's tokens (and log-probs) before the completion
};

struct ChatRequest : SamplingFields {
  data::OrderedJson messages, tools;  // messages: checked, tool-call arguments parsed into objects
  ToolChoice tool_choice;             // "auto" when tools are given, else "none"
  bool parallel_tool_calls = true;    // false: the first call only
  bool enable_thinking = data::ChatRenderOptions{}.enable_thinking;  // chat_template_kwargs; the template's default
  bool logprobs = false;
  int64_t top_logprobs = 0;
};

constexpr int64_t kMaxLogprobs = 20;  // as vLLM's default max_logprobs
constexpr int64_t kMaxN = 64;

CompletionRequest parse_completion_request(const std::string& body);
ChatRequest parse_chat_request(const std::string& body);

// vLLM's POST /tokenize: a prompt, or chat messages rendered as /v1/chat/completions renders them.
struct TokenizeRequest {
  std::string model;
  bool chat = false;
  std::string prompt;                 // !chat
  bool add_special_tokens = true;     // !chat: the prompt's BOS (data/prompt_encoding.h); chat: false
  data::OrderedJson messages, tools;  // chat
  bool add_generation_prompt = true;  // chat
  bool enable_thinking = data::ChatRenderOptions{}.enable_thinking;
  bool return_token_strs = false;
};
// vLLM's POST /detokenize: token ids back to text.
struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
};
TokenizeRequest parse_tokenize_request(const std::string& body);
DetokenizeRequest parse_detokenize_request(const std::string& body);

}  // namespace nemotron::serve
