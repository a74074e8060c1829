// The JSON the server answers with, shaped as the OpenAI API (and vLLM) shape it: completions
// with the legacy logprobs object, chat completions with logprobs.content, their streamed chunks
// as server-sent events, usage counts, the model list and the error body.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/tokenizer.h"
#include "engine/engine.h"
#include "serve/api_error.h"
#include "serve/token_logprobs.h"

namespace nemotron::serve {

using nlohmann::json;

json error_body(const ApiError& e);
// One server-sent event: "data: <json>\n\n" (invalid UTF-8 in generated text replaced by U+FFFD).
std::string sse_event(const json& j);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";
// The body as text (invalid UTF-8 replaced, never an exception).
std::string dump(const json& j);

// Only OpenAI's values: "stop" (a stop token or string), "length" (max_tokens or the context).
// A cancelled generation never reaches a client as a finish: a shutdown answers 503 (a stream ends
// with an error event), a client that left reads nothing; should one surface, it was cut short:
// "length".
const char* openai_finish_reason(engine::FinishReason r);
// A chat choice's: "tool_calls" when the model ended its turn (stop) after writing calls, unless
// tool_choice named the function (OpenAI then says "stop"); else openai_finish_reason.
const char* chat_finish_reason(engine::FinishReason r, bool tool_calls, bool named_tool);

// A token as the legacy completions API lists it: its text, or, when its bytes are not whole
// UTF-8 characters (part of a character), "bytes:\\xHH..." (OpenAI's form), so that the
// listed tokens join back to the prompt's bytes.
std::string token_text(const data::Tokenizer& tok, int32_t id);

json usage_json(int64_t prompt_tokens, int64_t completion_tokens);
json models_body(const std::string& model, int64_t created, int64_t max_model_len);

// The legacy completions logprobs object {tokens, token_logprobs, top_logprobs, text_offset} for
// `lp` (a prompt's first token: null log-prob and alternatives); offsets count from `offset`.
json completion_logprobs(const std::vector<TokenLogprob>& lp, const data::Tokenizer& tok, int64_t offset);
// Appends `more` to a completion_logprobs object (the generated tokens after the echoed prompt).
void append_completion_logprobs(json& into, const std::vector<TokenLogprob>& more, const data::Tokenizer& tok);

// Chat's logprobs {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}.
json chat_logprobs(const std::vector<TokenLogprob>& lp, const data::Tokenizer& tok);

struct ResponseHead {
  std::string id, model;
  int64_t created = 0;
};

json completion_body(const ResponseHead& h, json choices, const json& usage);
json completion_choice(int64_t index, const std::string& text, const json& logprobs, const char* finish_reason);
json completion_chunk(const ResponseHead& h, int64_t index, const std::string& text, const json& logprobs,
                      const char* finish_reason);

json chat_body(const ResponseHead& h, json choices, const json& usage);
// The message's content is null when it is empty and tool calls were made (as OpenAI sends it).
json chat_choice(int64_t index, const std::string& content, const json& logprobs, const char* finish_reason,
                 const json& tool_calls = json::array());
// delta: {"role": "assistant"} first, then {"content": ...}; finish_reason null until the last.
json chat_chunk(const ResponseHead& h, int64_t index, const json& delta, const json& logprobs, const char* finish_reason);
// The final streamed chunk with usage and no choices (stream_options.include_usage).
json usage_chunk(const ResponseHead& h, const char* object, const json& usage);

}  // namespace nemotron::serve
