#include "serve/openai_request.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "core/json_limits.h"
#include "data/chat_messages.h"
#include "serve/api_error.h"

namespace nemotron::serve {

namespace {

using Json = data::OrderedJson;

Json parse_object(const std::string& body) {
  // Nested arrays and objects past kMaxJsonDepth are refused here: every later walk of the
  // value (copying the messages, rendering the template, quoting it in an error) recurses.
  Json j;
  if (std::optional<JsonError> e = parse_json_bounded(body, j))
    throw bad_request(fmt::format("malformed JSON body: parse error at {}: {}", e->where(), e->reason));
  if (!j.is_object()) throw bad_request(fmt::format("the body must be a JSON object, got {}", j.type_name()));
  return j;
}

// A field present and not null (OpenAI's clients send null for "not given").
const Json* field(const Json& j, const char* name) {
  auto it = j.find(name);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

[[noreturn]] void wrong_type(const char* name, const char* expected, const Json& v) {
  throw bad_request(fmt::format("'{}': expected {}, got {} {}", name, expected, v.type_name(), json_excerpt(v)), name);
}

bool get_bool(const Json& j, const char* name, bool fallback) {
  const Json* v = field(j, name);
  if (!v) return fallback;
  if (!v->is_boolean()) wrong_type(name, "a boolean", *v);
  return v->get<bool>();
}

double get_number(const Json& j, const char* name, double fallback, double lo, double hi, bool lo_open = false) {
  const Json* v = field(j, name);
  if (!v) return fallback;
  if (!v->is_number()) wrong_type(name, "a number", *v);
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi || (lo_open && x == lo))
    throw bad_request(fmt::format("'{}': expected a number in {}{}, {}], got {}", name, lo_open ? "(" : "[", lo, hi, json_excerpt(*v)),
                      name);
  return x;
}

std::optional<int64_t> get_int(const Json& j, const char* name, int64_t lo, int64_t hi) {
  const Json* v = field(j, name);
  if (!v) return std::nullopt;
  // 3.0 is an integer to JSON Schema (and Python's json sends 3.0 for float(3)).
  const bool integral_float =
      v->is_number_float() && std::floor(v->get<double>()) == v->get<double>() && std::abs(v->get<double>()) < 9e15;
  if (!v->is_number_integer() && !integral_float) wrong_type(name, "an integer", *v);
  const double x = v->get<double>();
  if (x < static_cast<double>(lo) || x > static_cast<double>(hi))
    throw bad_request(fmt::format("'{}': expected an integer in [{}, {}], got {}", name, lo, hi, json_excerpt(*v)), name);
  return v->is_number_float() ? static_cast<int64_t>(x) : v->get<int64_t>();
}

void parse_sampling(const Json& j, SamplingFields& s, const char* max_tokens_name, int64_t min_max_tokens) {
  if (const Json* v = field(j, "model")) {
    if (!v->is_string()) wrong_type("model", "a string", *v);
    s.model = v->get<std::string>();
  }
  s.max_tokens = get_int(j, max_tokens_name, min_max_tokens, std::numeric_limits<int32_t>::max());
  s.temperature = get_number(j, "temperature", 1.0, 0.0, 2.0);
  s.top_p = get_number(j, "top_p", 1.0, 0.0, 1.0, /*lo_open=*/true);
  s.top_k = get_int(j, "top_k", -1, std::numeric_limits<int32_t>::max()).value_or(0);
  s.n = get_int(j, "n", 1, kMaxN).value_or(1);
  if (const Json* v = field(j, "seed")) {
    if (!v->is_number_integer()) wrong_type("seed", "an integer", *v);
    s.seed = v->is_number_unsigned() ? v->get<uint64_t>() : static_cast<uint64_t>(v->get<int64_t>());
  }
  if (const Json* v = field(j, "stop")) {
    if (v->is_string()) {
      s.stop.push_back(v->get<std::string>());
    } else if (v->is_array()) {
      for (const Json& e : *v) {
        if (!e.is_string()) wrong_type("stop", "a string or an array of strings", *v);
        s.stop.push_back(e.get<std::string>());
      }
    } else {
      wrong_type("stop", "a string or an array of strings", *v);
    }
    for (const std::string& x : s.stop)
      if (x.empty()) throw bad_request("'stop': empty stop string", "stop");
  }
  s.stream = get_bool(j, "stream", false);
  s.ignore_eos = get_bool(j, "ignore_eos", false);
  s.presence_penalty = get_number(j, "presence_penalty", 0.0, -2.0, 2.0);
  s.frequency_penalty = get_number(j, "frequency_penalty", 0.0, -2.0, 2.0);
  if (const Json* v = field(j, "logit_bias")) {
    if (!v->is_object()) wrong_type("logit_bias", "an object mapping token ids to biases", *v);
    for (const auto& [key, bias] : v->items()) {
      const bool digits = !key.empty() && key.size() <= 10 && key.find_first_not_of("0123456789") == std::string::npos;
      if (!digits || std::stoll(key) > std::numeric_limits<int32_t>::max())
        throw bad_request(
            fmt::format("'logit_bias': keys must be token ids (non-negative integers as strings), got \"{}\"",
                        key.substr(0, 40)),
            "logit_bias");
      if (!bias.is_number() || !(bias.get<double>() >= -100 && bias.get<double>() <= 100))
        throw bad_request(fmt::format("'logit_bias': the bias of token {} must be a number in [-100, 100], got {}", key,
                                      json_excerpt(bias)),
                          "logit_bias");
      s.logit_bias.emplace_back(static_cast<int32_t>(std::stoll(key)), bias.get<float>());
    }
  }
  // Fields of the API this server does not implement: refused by name rather than ignored.
  if (const Json* v = field(j, "response_format"))
    if (!v->is_object() || v->value("type", "") != "text")
      throw bad_request(fmt::format("'response_format': only {{\"type\": \"text\"}} is supported (no structured "
                                    "output), got {}", json_excerpt(*v)),
                        "response_format");
  if (const Json* v = field(j, "suffix"))
    if (!v->is_string() || !v->get_ref<const std::string&>().empty())
      throw bad_request("'suffix' is not supported (no fill-in-the-middle)", "suffix");
  if (const std::optional<int64_t> best_of = get_int(j, "best_of", 1, kMaxN); best_of && *best_of != s.n)
    throw bad_request(fmt::format("'best_of' is not supported unless it equals n ({}), got {}", s.n, *best_of),
                      "best_of");
  if (const Json* v = field(j, "stream_options")) {
    if (!v->is_object()) wrong_type("stream_options", "an object", *v);
    if (!s.stream) throw bad_request("'stream_options': only allowed when 'stream' is true", "stream_options");
    s.include_usage = get_bool(*v, "include_usage", false);
  }
}

// A token-id prompt: integers >= 0 (the vocabulary bound is the model's: the routes check it).
std::vector<int32_t> token_prompt(const Json& a) {
  std::vector<int32_t> ids;
  for (const Json& t : a) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > std::numeric_limits<int32_t>::max())
      throw bad_request(fmt::format("'prompt': token ids must be non-negative integers, got {}", json_excerpt(t)), "prompt");
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

}  // namespace

CompletionRequest parse_completion_request(const std::string& body) {
  const Json j = parse_object(body);
  CompletionRequest r;
  parse_sampling(j, r, "max_tokens", 0);
  const Json* p = field(j, "prompt");
  if (!p) throw bad_request("'prompt' is required", "prompt");
  const char* expected = "a string, an array of strings, an array of token ids or an array of those";
  if (p->is_string()) {
    r.prompts.emplace_back(p->get<std::string>());
  } else if (p->is_array() && !p->empty() && p->front().is_number()) {
    r.prompts.emplace_back(token_prompt(*p));
  } else if (p->is_array() && !p->empty()) {
    for (const Json& e : *p) {
      if (e.is_string()) r.prompts.emplace_back(e.get<std::string>());
      else if (e.is_array()) r.prompts.emplace_back(token_prompt(e));
      else wrong_type("prompt", expected, *p);
    }
  } else {
    wrong_type("prompt", expected, *p);
  }
  for (const Prompt& x : r.prompts)
    if (std::visit([](const auto& v) { return v.empty(); }, x)) throw bad_request("'prompt': empty prompt", "prompt");
  r.logprobs = get_int(j, "logprobs", 0, kMaxLogprobs);
  r.echo = get_bool(j, "echo", false);
  if (r.max_tokens == 0 && !r.echo)
    throw bad_request("'max_tokens': 0 is only allowed with 'echo' (to score the prompt)", "max_tokens");
  if (r.echo && r.stream) throw bad_request("'echo' is not supported with 'stream'", "echo");
  return r;
}

namespace {

// The messages of a chat request: content given as parts (the newer form) joined into text, then
// the checks of data prep sft, tool-call arguments given as JSON text parsed.
Json parse_messages(const Json& j) {
  const Json* m = field(j, "messages");
  if (!m) throw bad_request("'messages' is required", "messages");
  if (!m->is_array() || m->empty()) wrong_type("messages", "a non-empty array of messages", *m);
  Json messages = *m;
  // Content given as parts: the text parts joined by newlines, as vLLM does.
  for (Json& msg : messages) {
    if (!msg.is_object()) continue;
    auto it = msg.find("content");
    if (it == msg.end() || !it->is_array()) continue;
    std::string text;
    for (const Json& part : *it) {
      if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
        throw bad_request(fmt::format("'messages': only text content parts are supported, got {}", json_excerpt(part)),
                          "messages");
      if (!text.empty()) text += '\n';
      text += part["text"].get<std::string>();
    }
    *it = text;
  }
  if (std::optional<data::MessageProblem> p = data::normalize_chat_messages(messages))
    throw bad_request(fmt::format("'messages': {}", p->detail), "messages");
  return messages;
}

constexpr const char* kFunctionTool = R"({"type": "function", "function": {"name": ...}})";

// OpenAI function tools: [{"type": "function", "function": {"name", "description", "parameters"}}].
Json parse_tools(const Json& j) {
  const Json* t = field(j, "tools");
  if (!t) return nullptr;
  if (!t->is_array()) wrong_type("tools", "an array of function tools", *t);
  for (size_t i = 0; i < t->size(); ++i) {
    const Json& tool = (*t)[i];
    const Json* fn = tool.is_object() ? field(tool, "function") : nullptr;
    if (!tool.is_object() || tool.value("type", "function") != "function" || !fn || !fn->is_object() ||
        !fn->contains("name") || !(*fn)["name"].is_string() || (*fn)["name"].get_ref<const std::string&>().empty())
      throw bad_request(fmt::format("'tools': tool {} must be {}, got {}", i, kFunctionTool, json_excerpt(tool)),
                        "tools");
    if (const Json* params = field(*fn, "parameters"); params && !params->is_object())
      throw bad_request(fmt::format("'tools': tool {}: parameters must be a JSON Schema object", i), "tools");
  }
  return t->empty() ? Json(nullptr) : *t;
}

// "none", "auto", "required" or {"type": "function", "function": {"name": NAME}} naming a tool.
ToolChoice parse_tool_choice(const Json& j, const Json& tools) {
  ToolChoice c;
  c.mode = tools.is_null() ? ToolChoice::Mode::none : ToolChoice::Mode::auto_;
  const Json* v = field(j, "tool_choice");
  if (!v) return c;
  if (v->is_string() && (*v == "none" || *v == "auto" || *v == "required")) {
    c.mode = *v == "none" ? ToolChoice::Mode::none : *v == "auto" ? ToolChoice::Mode::auto_ : ToolChoice::Mode::required;
  } else if (const Json* fn = v->is_object() && v->value("type", "") == "function" ? field(*v, "function") : nullptr;
             fn && fn->is_object() && fn->contains("name") && (*fn)["name"].is_string()) {
    c.mode = ToolChoice::Mode::named;
    c.name = (*fn)["name"].get<std::string>();
  } else {
    wrong_type("tool_choice", R"("none", "auto", "required" or {"type": "function", "function": {"name": ...}})", *v);
  }
  if (c.mode != ToolChoice::Mode::none && tools.is_null())
    throw bad_request("'tool_choice': only allowed when 'tools' are given", "tool_choice");
  if (c.mode == ToolChoice::Mode::named) {
    bool known = false;
    for (const Json& t : tools) known = known || t["function"]["name"] == c.name;
    if (!known) throw bad_request(fmt::format("'tool_choice': no tool named \"{}\" in 'tools'", c.name), "tool_choice");
  }
  return c;
}

bool parse_enable_thinking(const Json& j) {
  bool thinking = data::ChatRenderOptions{}.enable_thinking;
  if (const Json* k = field(j, "chat_template_kwargs")) {
    if (!k->is_object()) wrong_type("chat_template_kwargs", "an object", *k);
    thinking = get_bool(*k, "enable_thinking", thinking);
  }
  return thinking;
}

std::string get_model(const Json& j) {
  const Json* v = field(j, "model");
  if (!v) return "";
  if (!v->is_string()) wrong_type("model", "a string", *v);
  return v->get<std::string>();
}

}  // namespace

ChatRequest parse_chat_request(const std::string& body) {
  const Json j = parse_object(body);
  ChatRequest r;
  // max_completion_tokens is the newer name; max_tokens the older one.
  parse_sampling(j, r, field(j, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens", 1);
  r.messages = parse_messages(j);
  r.tools = parse_tools(j);
  r.tool_choice = parse_tool_choice(j, r.tools);
  r.parallel_tool_calls = get_bool(j, "parallel_tool_calls", true);
  r.enable_thinking = parse_enable_thinking(j);
  r.logprobs = get_bool(j, "logprobs", false);
  r.top_logprobs = get_int(j, "top_logprobs", 0, kMaxLogprobs).value_or(0);
  if (r.top_logprobs > 0 && !r.logprobs)
    throw bad_request("'top_logprobs': only allowed when 'logprobs' is true", "top_logprobs");
  return r;
}

TokenizeRequest parse_tokenize_request(const std::string& body) {
  const Json j = parse_object(body);
  TokenizeRequest r;
  r.model = get_model(j);
  r.return_token_strs = get_bool(j, "return_token_strs", false);
  if (field(j, "messages")) {
    r.chat = true;
    r.messages = parse_messages(j);
    r.tools = parse_tools(j);
    r.add_generation_prompt = get_bool(j, "add_generation_prompt", true);
    r.add_special_tokens = get_bool(j, "add_special_tokens", false);
    if (r.add_special_tokens)
      throw bad_request("'add_special_tokens': a chat template places its own special tokens; only false is supported",
                        "add_special_tokens");
    r.enable_thinking = parse_enable_thinking(j);
    return r;
  }
  const Json* p = field(j, "prompt");
  if (!p) throw bad_request("'prompt' or 'messages' is required", "prompt");
  if (!p->is_string()) wrong_type("prompt", "a string", *p);
  r.prompt = p->get<std::string>();
  r.add_special_tokens = get_bool(j, "add_special_tokens", true);
  return r;
}

DetokenizeRequest parse_detokenize_request(const std::string& body) {
  const Json j = parse_object(body);
  DetokenizeRequest r;
  r.model = get_model(j);
  const Json* t = field(j, "tokens");
  if (!t) throw bad_request("'tokens' is required", "tokens");
  if (!t->is_array()) wrong_type("tokens", "an array of token ids", *t);
  for (const Json& x : *t) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > std::numeric_limits<int32_t>::max())
      throw bad_request(fmt::format("'tokens': token ids must be non-negative integers, got {}", json_excerpt(x)),
                        "tokens");
    r.tokens.push_back(static_cast<int32_t>(x.get<int64_t>()));
  }
  return r;
}

}  // namespace nemotron::serve
