// The checks `data prep sft` makes of a conversation's messages before templating, shared with the
// OpenAI server so that both accept the same conversations: every message an object with a known
// role (system, user, assistant, tool) and content that is a string or null (Python's template
// would render a number or a list as its repr); an assistant's tool_calls a list of
// {function: {arguments}} whose arguments, given as JSON text (OpenAI's own form), are parsed into
// the value the chat template renders (which refuses one that is not an object).
#pragma once
#include <optional>
#include <string>

#include "data/python_format.h"
#include "data/sft_conversation.h"

namespace nemotron::data {

struct MessageProblem {
  DropReason reason;   // bad_message, unknown_role or bad_tool_call
  std::string detail;  // "message 2 has the unknown role \"wizard\""
};

// Checks `messages` (a JSON array) and parses tool-call arguments given as strings, in place.
// Returns the first problem, or nothing when the conversation can be templated.
std::optional<MessageProblem> normalize_chat_messages(OrderedJson& messages);

}  // namespace nemotron::data
