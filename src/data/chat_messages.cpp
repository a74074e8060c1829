#include "data/chat_messages.h"

#include <fmt/format.h>

#include "core/json_limits.h"

namespace nemotron::data {

namespace {

constexpr const char* kRoles = "system, user, assistant or tool";

MessageProblem problem(DropReason r, std::string detail) { return {r, std::move(detail)}; }

// An assistant message's tool calls, arguments parsed (replace_json_args of Nemotron's data prep).
std::optional<MessageProblem> normalize_tool_calls(OrderedJson& calls, size_t i) {
  if (!calls.is_array())
    return problem(DropReason::bad_tool_call, fmt::format("message {}: tool_calls is not a list", i));
  for (size_t j = 0; j < calls.size(); ++j) {
    OrderedJson& call = calls[j];
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object() ||
        !call["function"].contains("arguments"))
      return problem(DropReason::bad_tool_call,
                     fmt::format("message {}: tool call {} has no function.arguments", i, j));
    OrderedJson& args = call["function"]["arguments"];
    if (args.is_string()) {
      OrderedJson parsed;
      if (std::optional<JsonError> e = parse_json_bounded(args.get_ref<const std::string&>(), parsed))
        return problem(DropReason::bad_tool_call, fmt::format("message {}: tool call {}: arguments are not valid JSON "
                                                              "({}: {})", i, j, e->where(), e->reason));
      args = std::move(parsed);  // not an object: the template refuses it (as Python's does)
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<MessageProblem> normalize_chat_messages(OrderedJson& messages) {
  if (!messages.is_array()) return problem(DropReason::bad_message, "messages is not a list");
  for (size_t i = 0; i < messages.size(); ++i) {
    OrderedJson& m = messages[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      return problem(DropReason::bad_message, fmt::format("message {} is not an object with a string \"role\"", i));
    const std::string& r = m["role"].get_ref<const std::string&>();
    if (r != "system" && r != "user" && r != "assistant" && r != "tool")
      return problem(DropReason::unknown_role,
                     fmt::format("message {} has the unknown role \"{}\" (expected {})", i, r, kRoles));
    auto content = m.find("content");
    if (content != m.end() && !content->is_string() && !content->is_null())
      return problem(DropReason::bad_message,
                     fmt::format("message {}: content must be a string or null, got {}", i, content->type_name()));
  }
  // Every role first, then the tool calls: data prep reports an unknown role before a bad call.
  for (size_t i = 0; i < messages.size(); ++i) {
    OrderedJson& m = messages[i];
    auto calls = m.find("tool_calls");
    if (m["role"] != "assistant" || calls == m.end() || !python_truthy(*calls)) continue;
    if (std::optional<MessageProblem> p = normalize_tool_calls(*calls, i)) return p;
  }
  return std::nullopt;
}

}  // namespace nemotron::data
