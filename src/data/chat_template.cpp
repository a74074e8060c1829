#include "data/chat_template.h"

#include <fmt/format.h>

namespace nemotron::data {

namespace {

constexpr std::string_view kToolInstructions =
    "\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n<tool_call>\n"
    "<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
    "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n"
    "</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified "
    "format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n"
    "- Required parameters MUST be specified\n- You may provide optional reasoning for your function call in "
    "natural language BEFORE the function call, but NOT after\n- If there is no function call available, answer "
    "the question like normal with your current knowledge and do not tell the user about function calls\n"
    "</IMPORTANT>";

// Jinja attribute access on a dict: the member or nothing (Undefined).
const OrderedJson* member(const OrderedJson& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}
// `x ~ ...` / `{{ x }}`: Undefined renders as "".
std::string str_or_empty(const OrderedJson* v) { return v ? python_str(*v) : std::string(); }
bool is_mapping(const OrderedJson* v) { return v && v->is_object(); }
// Jinja's `sequence` test minus strings: lists and dicts.
bool is_container(const OrderedJson& v) { return v.is_array() || v.is_object(); }
bool contains(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }
std::string after_last(const std::string& s, std::string_view sep) {
  const size_t p = s.rfind(sep);
  return p == std::string::npos ? s : s.substr(p + sep.size());
}
const std::string& role_of(const OrderedJson& m) {
  const OrderedJson* r = member(m, "role");
  if (!r || !r->is_string()) throw ChatTemplateError("a message has no string \"role\"");
  return r->get_ref<const std::string&>();
}

// render_extra_keys: the keys of `dict` a template does not handle, as "\n<key>value</key>".
void extra_keys(std::string& out, const OrderedJson* dict, std::initializer_list<std::string_view> handled) {
  if (!is_mapping(dict)) return;
  for (const auto& [key, value] : dict->items()) {
    bool skip = false;
    for (std::string_view h : handled) skip = skip || key == h;
    if (skip) continue;
    out += "\n<" + key + ">" + (is_container(value) ? python_json_dumps(value) : python_str(value)) + "</" + key + ">";
  }
}

void render_tools(std::string& out, const OrderedJson& tools) {
  out += "# Tools\n\nYou have access to the following functions:\n\n<tools>";
  for (const OrderedJson& entry : tools) {
    const OrderedJson* tool = member(entry, "function") ? member(entry, "function") : &entry;
    out += "\n<function>\n<name>" + str_or_empty(member(*tool, "name")) + "</name>";
    if (const OrderedJson* d = member(*tool, "description")) out += "\n<description>" + python_strip(python_str(*d)) + "</description>";
    out += "\n<parameters>";
    const OrderedJson* params = member(*tool, "parameters");
    const OrderedJson* props = params ? member(*params, "properties") : nullptr;
    if (is_mapping(params) && is_mapping(props)) {
      for (const auto& [name, fields] : props->items()) {
        out += "\n<parameter>\n<name>" + name + "</name>";
        if (const OrderedJson* t = member(fields, "type")) out += "\n<type>" + python_str(*t) + "</type>";
        if (const OrderedJson* d = member(fields, "description"))
          out += "\n<description>" + python_strip(python_str(*d)) + "</description>";
        if (const OrderedJson* e = member(fields, "enum")) out += "\n<enum>" + python_json_dumps(*e) + "</enum>";
        extra_keys(out, &fields, {"name", "type", "description", "enum"});
        out += "\n</parameter>";
      }
    }
    extra_keys(out, params, {"type", "properties", "required"});
    if (const OrderedJson* req = params ? member(*params, "required") : nullptr)
      out += "\n<required>" + python_json_dumps(*req) + "</required>";
    out += "\n</parameters>";
    extra_keys(out, tool, {"type", "name", "description", "parameters"});
    out += "\n</function>";
  }
  out += "\n</tools>";
  out += kToolInstructions;
}

void render_tool_calls(std::string& out, const OrderedJson& calls) {
  for (const OrderedJson& entry : calls) {
    const OrderedJson* call = member(entry, "function") ? member(entry, "function") : &entry;
    out += "<tool_call>\n<function=" + str_or_empty(member(*call, "name")) + ">\n";
    if (const OrderedJson* args = member(*call, "arguments")) {
      if (!args->is_object())
        throw ChatTemplateError(fmt::format("tool call arguments must be an object, got {}", python_json_dumps(*args)));
      for (const auto& [name, value] : args->items())
        out += "<parameter=" + name + ">\n" + (is_container(value) ? python_json_dumps(value) : python_str(value)) +
               "\n</parameter>\n";
    }
    out += "</function>\n</tool_call>\n";
  }
}

// The assistant body before trimming: "<think>\n{reasoning}\n</think>\n{content}" or
// "<think></think>{content}" (content left alone when it already has think tags).
std::string assistant_content(const OrderedJson& m) {
  const OrderedJson* c = member(m, "content");
  std::string content;
  if (c && python_truthy(*c)) {
    if (!c->is_string()) throw ChatTemplateError("assistant content must be a string");
    content = c->get<std::string>();
  }
  const OrderedJson* r = member(m, "reasoning_content");
  if (r && r->is_string() && !python_strip(r->get_ref<const std::string&>()).empty())
    return "<think>\n" + r->get<std::string>() + "\n</think>\n" + content;
  if (!contains(content, "<think>") && !contains(content, "</think>")) return "<think></think>" + content;
  return content;
}

void render_assistant(std::string& out, const OrderedJson& m, bool history) {
  const std::string content = assistant_content(m);
  const OrderedJson* calls = member(m, "tool_calls");
  if (calls && calls->is_array() && !calls->empty()) {
    out += "<|im_start|>assistant\n";
    if (!python_strip(content).empty()) {
      if (!history) {
        out += python_strip(content) + "\n";
      } else {
        std::string c = content;
        if (contains(c, "</think>")) c = after_last(c, "</think>");
        else if (contains(c, "<think>")) c = c.substr(0, c.find("<think>"));
        out += "<think></think>" + python_strip(c) + "\n";
      }
    } else {
      out += "<think></think>";
    }
    render_tool_calls(out, *calls);
    out += "<|im_end|>\n";
    return;
  }
  if (calls && !calls->is_null() && !calls->is_array()) throw ChatTemplateError("tool_calls must be a list");
  if (!history) {
    out += "<|im_start|>assistant\n" + python_strip(content) + "<|im_end|>\n";
    return;
  }
  std::string c = content;
  if (contains(c, "<think>") && contains(c, "</think>")) c = "<think></think>" + after_last(c, "</think>");
  out += "<|im_start|>assistant\n" + python_strip(c) + "<|im_end|>\n";
}

std::string render_nano3(const OrderedJson& messages, const OrderedJson& tools, const ChatRenderOptions& opt) {
  if (!messages.is_array() || messages.empty()) throw ChatTemplateError("no messages");
  size_t first = 0;
  std::string system;
  if (role_of(messages[0]) == "system") {
    const OrderedJson* c = member(messages[0], "content");
    if (!c || !c->is_string()) throw ChatTemplateError("the system message's content must be a string");
    system = c->get<std::string>();
    first = 1;
  }
  int64_t last_user = -1;
  for (size_t i = first; i < messages.size(); ++i)
    if (role_of(messages[i]) == "user") last_user = static_cast<int64_t>(i - first);
  const bool has_tools = tools.is_array() && !tools.empty();
  if (!tools.is_null() && !tools.is_array()) throw ChatTemplateError("tools must be a list");

  std::string out = "<|im_start|>system\n" + system;
  if (has_tools) {
    if (!system.empty()) out += "\n\n";
    render_tools(out, tools);
  }
  out += "<|im_end|>\n";

  const size_t n = messages.size() - first;
  for (size_t k = 0; k < n; ++k) {
    const OrderedJson& m = messages[first + k];
    const std::string& role = role_of(m);
    if (role == "assistant") {
      render_assistant(out, m, opt.truncate_history_thinking && static_cast<int64_t>(k) < last_user);
    } else if (role == "user" || role == "system") {
      out += "<|im_start|>" + role + "\n" + str_or_empty(member(m, "content"));
      if (role == "user" && static_cast<int64_t>(k) == last_user && opt.reasoning_budget)
        out += fmt::format("\n\n{{thinking token budget: {}}}", *opt.reasoning_budget);
      out += "<|im_end|>\n";
    } else if (role == "tool") {
      if (k > 0 && python_truthy(messages[first + k - 1]) && role_of(messages[first + k - 1]) != "tool")
        out += "<|im_start|>user\n";
      out += "<tool_response>\n" + str_or_empty(member(m, "content")) + "\n</tool_response>\n";
      if (k + 1 == n || role_of(messages[first + k + 1]) != "tool") out += "<|im_end|>\n";
    } else {
      const OrderedJson* c = member(m, "content");
      if (!c || !c->is_string()) throw ChatTemplateError(fmt::format("the {} message's content must be a string", role));
      out += "<|im_start|>" + role + "\n" + c->get<std::string>() + "<|im_end|>\n";
    }
  }
  if (opt.add_generation_prompt) out += chat_generation_prompt(ChatFormat::nano3, opt.enable_thinking);
  return out;
}

std::string replace_all(std::string s, std::string_view from) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p)) s.erase(p, from.size());
  return s;
}

// Megatron's two <SPECIAL_n> formats: one line per turn, texts stripped; no tools.
std::string render_special(ChatFormat f, const OrderedJson& messages, const ChatRenderOptions& opt) {
  if (!messages.is_array() || messages.empty()) throw ChatTemplateError("no messages");
  std::string out;
  for (const OrderedJson& m : messages) {
    const std::string& role = role_of(m);
    if (role != "system" && role != "user" && role != "assistant")
      throw ChatTemplateError(fmt::format("the {} format has no \"{}\" role", chat_format_name(f), role));
    if (const OrderedJson* calls = member(m, "tool_calls"); calls && python_truthy(*calls))
      throw ChatTemplateError(fmt::format("the {} format has no tool calls", chat_format_name(f)));
    const OrderedJson* c = member(m, "content");
    if (!c || !c->is_string()) throw ChatTemplateError(fmt::format("the {} message's content must be a string", role));
    std::string text = c->get<std::string>();
    if (f == ChatFormat::nano_v2 && role != "assistant") text = replace_all(replace_all(text, "/think"), "/no_think");
    text = python_strip(text);
    if (role == "system") out += "<SPECIAL_10>System\n" + text + "\n";
    else if (role == "user")
      out += "<SPECIAL_11>User\n" + text + (f == ChatFormat::nemotron_h ? "\n<SPECIAL_11>Assistant\n" : "\n");
    else out += f == ChatFormat::nano_v2 ? "<SPECIAL_11>Assistant\n" + text + "\n<SPECIAL_12>\n" : text + "\n";
  }
  if (opt.add_generation_prompt) out += chat_generation_prompt(f, opt.enable_thinking);
  return out;
}

}  // namespace

std::optional<ChatFormat> chat_format_from_name(std::string_view name) {
  if (name == "nano3") return ChatFormat::nano3;
  if (name == "nemotron-h" || name == "nemotron-h-aligned") return ChatFormat::nemotron_h;
  if (name == "nano-v2" || name == "nemotron-nano-v2") return ChatFormat::nano_v2;
  return std::nullopt;
}

const char* chat_format_name(ChatFormat f) {
  switch (f) {
    case ChatFormat::nano3: return "nano3";
    case ChatFormat::nemotron_h: return "nemotron-h";
    case ChatFormat::nano_v2: return "nano-v2";
  }
  return "?";
}

std::string render_chat(ChatFormat f, const OrderedJson& messages, const OrderedJson& tools, const ChatRenderOptions& opt) {
  if (f == ChatFormat::nano3) return render_nano3(messages, tools, opt);
  if (tools.is_array() && !tools.empty())
    throw ChatTemplateError(fmt::format("the {} format has no tools", chat_format_name(f)));
  return render_special(f, messages, opt);
}

std::string chat_generation_prompt(ChatFormat f, bool enable_thinking) {
  switch (f) {
    case ChatFormat::nano3: return enable_thinking ? "<|im_start|>assistant\n<think>\n" : "<|im_start|>assistant\n<think></think>";
    case ChatFormat::nano_v2: return "<SPECIAL_11>Assistant\n";
    case ChatFormat::nemotron_h: return "";
  }
  return "";
}

}  // namespace nemotron::data
