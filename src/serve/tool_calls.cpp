#include "serve/tool_calls.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <random>

#include "core/json_limits.h"

namespace nemotron::serve {

namespace {

using OJson = nlohmann::ordered_json;

constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>", kFunction = "<function=",
                           kParameter = "<parameter=", kParameterEnd = "</parameter>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string rstrip(std::string s) {
  while (!s.empty() && is_space(s.back())) s.pop_back();
  return s;
}

// The schema type of `param` of function `name` in `tools` ("" when not given): the first
// non-null one of a type list.
std::string param_type(const OJson& tools, const std::string& name, const std::string& param) {
  if (!tools.is_array()) return "";
  for (const OJson& t : tools) {
    const OJson* fn = t.contains("function") ? &t["function"] : &t;
    if (!fn->is_object() || fn->value("name", "") != name) continue;
    const OJson* props = fn->contains("parameters") && (*fn)["parameters"].is_object() &&
                                 (*fn)["parameters"].contains("properties")
                             ? &(*fn)["parameters"]["properties"]
                             : nullptr;
    if (!props || !props->is_object() || !props->contains(param) || !(*props)[param].is_object()) return "";
    const OJson& type = (*props)[param].value("type", OJson());
    if (type.is_string()) return type.get<std::string>();
    if (type.is_array())
      for (const OJson& x : type)
        if (x.is_string() && x.get<std::string>() != "null") return x.get<std::string>();
    return "";
  }
  return "";
}

// A parameter's text as the JSON value its schema type says (vLLM qwen3_coder's conversion).
OJson convert(const std::string& value, const std::string& type) {
  if (type == "string" || type == "str" || type == "text" || type == "enum") return value;
  if (value == "null") return nullptr;
  OJson parsed;
  if (!parse_json_bounded(value, parsed)) {
    const bool number = parsed.is_number(), boolean = parsed.is_boolean();
    const bool container = parsed.is_object() || parsed.is_array();
    if ((type == "integer" || type == "int") && parsed.is_number_integer()) return parsed;
    if ((type == "number" || type == "float") && number) return parsed;
    if (type == "boolean" && boolean) return parsed;
    if ((type == "object" || type == "array") && container) return parsed;
    if (type.empty() && (number || boolean || container)) return parsed;
  }
  return value;
}

// One block's text after "<tool_call>" (up to its close, or the end): the call, or none without a
// complete "<function=NAME>".
std::optional<ToolCall> parse_block(std::string_view block, const OJson& tools) {
  const size_t f = block.find(kFunction);
  if (f == std::string_view::npos) return std::nullopt;
  const size_t name_end = block.find('>', f + kFunction.size());
  if (name_end == std::string_view::npos) return std::nullopt;
  ToolCall call;
  call.name = std::string(block.substr(f + kFunction.size(), name_end - f - kFunction.size()));
  while (!call.name.empty() && is_space(call.name.back())) call.name.pop_back();
  OJson args = OJson::object();
  size_t at = name_end + 1;
  while (true) {
    const size_t p = block.find(kParameter, at);
    if (p == std::string_view::npos) break;
    const size_t pname_end = block.find('>', p + kParameter.size());
    if (pname_end == std::string_view::npos) break;
    const size_t vend = block.find(kParameterEnd, pname_end + 1);
    if (vend == std::string_view::npos) break;  // an unfinished parameter is left out
    const std::string pname(block.substr(p + kParameter.size(), pname_end - p - kParameter.size()));
    std::string value(block.substr(pname_end + 1, vend - pname_end - 1));
    if (!value.empty() && value.front() == '\n') value.erase(0, 1);  // the template's own newlines
    if (!value.empty() && value.back() == '\n') value.pop_back();
    args[pname] = convert(value, param_type(tools, call.name, pname));
    at = vend + kParameterEnd.size();
  }
  call.arguments = args.dump(-1, ' ', false, OJson::error_handler_t::replace);
  return call;
}

// Length of the longest suffix of `text` that is a proper prefix of `tag`.
size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace

ParsedToolOutput parse_tool_calls(std::string_view text, const OJson& tools, bool final, size_t max_calls) {
  ParsedToolOutput out;
  const size_t first = text.find(kOpen);
  // Trailing whitespace is held back as well: before a call it is dropped, so a stream that sent
  // it would differ from the whole message.
  const size_t end = first != std::string_view::npos ? first
                     : final                          ? text.size()
                                                      : text.size() - partial_tag_suffix(text, kOpen);
  out.content = rstrip(std::string(text.substr(0, end)));
  out.content_ready = out.content.size();
  if (first == std::string_view::npos) return out;
  size_t at = first;
  while (at != std::string_view::npos && (max_calls == 0 || out.calls.size() < max_calls)) {
    const size_t body = at + kOpen.size();
    const size_t close = text.find(kClose, body);
    if (close == std::string_view::npos) {
      if (final)
        if (std::optional<ToolCall> c = parse_block(text.substr(body), tools)) out.calls.push_back(std::move(*c));
      break;
    }
    if (std::optional<ToolCall> c = parse_block(text.substr(body, close - body), tools))
      out.calls.push_back(std::move(*c));
    at = text.find(kOpen, close + kClose.size());
  }
  return out;
}

std::string forced_call_prefix(const ToolChoice& choice, const OJson& tools) {
  std::string name;
  if (choice.mode == ToolChoice::Mode::named) {
    name = choice.name;
  } else if (choice.mode == ToolChoice::Mode::required && tools.is_array() && tools.size() == 1) {
    const OJson& t = tools[0];
    name = (t.contains("function") ? t["function"] : t).value("name", "");
  } else if (choice.mode != ToolChoice::Mode::required) {
    return "";
  }
  return std::string(kOpen) + "\n" + std::string(kFunction) + (name.empty() ? "" : name + ">\n");
}

ToolCallStream::Delta ToolCallStream::update(const std::string& generated, size_t ready, bool final) {
  const std::string text = prefix_ + generated.substr(0, std::min(ready, generated.size()));
  const ParsedToolOutput p = parse_tool_calls(text, tools_, final, max_calls_);
  Delta d;
  // Content as it becomes certain; the final trim only affects what was never sent.
  if (p.content_ready > sent_content_) d.content = text.substr(sent_content_, p.content_ready - sent_content_);
  sent_content_ = std::max(sent_content_, p.content_ready);
  for (; sent_calls_ < p.calls.size(); ++sent_calls_) {
    nlohmann::json call = tool_call_json(p.calls[sent_calls_]);
    call["index"] = sent_calls_;
    d.tool_calls.push_back(std::move(call));
  }
  return d;
}

nlohmann::json tool_call_json(const ToolCall& c) {
  return {{"id", new_tool_call_id()},
          {"type", "function"},
          {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
}

std::string new_tool_call_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("call_{:016x}{:08x}", rng(), static_cast<uint32_t>(rng()));
}

}  // namespace nemotron::serve
