// Tool calls in the nano3 chat template's form (reference/data-formats.md §6.2), read back out of
// generated text into OpenAI's `tool_calls`:
//   <tool_call>\n<function=NAME>\n<parameter=ARG>\nVALUE\n</parameter>\n...</function>\n</tool_call>
// The content is the text before the first <tool_call>; each complete block is one call, its
// parameters converted by the type the request's tool schema gives them (as vLLM's qwen3_coder
// parser does: strings stay strings, numbers, booleans, null, objects and arrays are parsed, a
// value that does not parse stays a string), the arguments serialised as a JSON object.
// tool_choice "required" or a named function is honoured by prefixing the generation: the prompt
// ends with the opening of the call (forced_call_prefix), so the reply is a call whatever the
// model writes; with a named function (or "required" and one tool) the name is in the prefix; with
// "required" and several tools the server scores each listed name as the continuation and
// appends the likeliest (serve/job_builder.h, force_likeliest_tool). parallel_tool_calls false
// keeps the first call.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace nemotron::serve {

struct ToolChoice {
  enum class Mode { none, auto_, required, named };
  Mode mode = Mode::auto_;
  std::string name;  // Mode::named
};

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object, as text
};

struct ParsedToolOutput {
  std::string content;          // before the first <tool_call>, trailing whitespace trimmed
  size_t content_ready = 0;     // bytes of the text that are content for sure (streaming sends these)
  std::vector<ToolCall> calls;  // complete blocks; when final, an unclosed last block too
};

// `tools` is the request's tools array (OpenAI function schemas). With `final` false (streaming),
// text that may be the start of "<tool_call>" is not yet content, and an unclosed block is no call.
// `max_calls` > 0 keeps that many calls at most (parallel_tool_calls false: 1).
ParsedToolOutput parse_tool_calls(std::string_view text, const nlohmann::ordered_json& tools, bool final,
                                  size_t max_calls = 0);

// The text the prompt ends with to force a call: "<tool_call>\n<function=" and, for a named
// function (or "required" with one tool), "NAME>\n". Also the start of what parse_tool_calls reads.
std::string forced_call_prefix(const ToolChoice& choice, const nlohmann::ordered_json& tools);

// Streaming: turns the growing text into chat deltas. Each update() returns the content to send
// and the tool_calls deltas ({index, id, type, function: {name, arguments}}, one per call, whole
// as each block closes), so that the deltas joined equal the non-streamed message.
class ToolCallStream {
 public:
  ToolCallStream(const nlohmann::ordered_json& tools, std::string forced_prefix, size_t max_calls = 0)
      : tools_(tools), prefix_(std::move(forced_prefix)), max_calls_(max_calls) {}
  struct Delta {
    std::string content;
    nlohmann::json tool_calls = nlohmann::json::array();
  };
  // `generated` is the text so far; only its first `ready` bytes may be used (a stop string may
  // still cut the rest); `final` once generation ended.
  Delta update(const std::string& generated, size_t ready, bool final);
  bool called() const { return sent_calls_ > 0; }

 private:
  const nlohmann::ordered_json& tools_;
  std::string prefix_;
  size_t max_calls_;
  size_t sent_content_ = 0, sent_calls_ = 0;
};

// A fresh "call_..." id (24 random hex digits, as OpenAI's are opaque).
std::string new_tool_call_id();

// The call as OpenAI sends it, with a fresh id: {id, type: "function", function: {name, arguments}}.
nlohmann::json tool_call_json(const ToolCall& c);

}  // namespace nemotron::serve
