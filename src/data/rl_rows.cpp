#include "data/rl_rows.h"

#include <array>
#include <string_view>

#include <fmt/format.h>

#include "core/json_limits.h"

namespace nemotron::data {

namespace {

// NeMoGymResponseCreateParamsNonStreaming's keys (reference/pipeline-and-rl.md §3.5); Gym rejects others.
constexpr std::array<std::string_view, 23> kCreateParamsKeys = {
    "input", "instructions", "max_output_tokens", "max_tool_calls", "metadata", "model", "parallel_tool_calls",
    "reasoning", "temperature", "text", "tool_choice", "tools", "top_logprobs", "top_p", "truncation", "user",
    "stream", "background", "include", "previous_response_id", "prompt", "service_tier", "store"};
constexpr std::array<std::string_view, 4> kInputRoles = {"user", "assistant", "system", "developer"};
constexpr std::array<std::string_view, 4> kItemTypes = {"message", "function_call", "function_call_output", "reasoning"};

template <size_t N>
bool one_of(const std::array<std::string_view, N>& list, const std::string& s) {
  for (std::string_view v : list)
    if (v == s) return true;
  return false;
}

RlRowResult drop(const char* reason, std::string detail) {
  RlRowResult r;
  r.drop_reason = reason;
  r.detail = std::move(detail);
  return r;
}

// "" when `p` is a valid create-params object, else what is wrong with it.
std::string check_create_params(const OrderedJson& p) {
  if (!p.is_object()) return "responses_create_params: expected an object, got " + std::string(p.type_name());
  for (const auto& [key, v] : p.items())
    if (!one_of(kCreateParamsKeys, key))
      return fmt::format("responses_create_params: unknown key \"{}\" (NeMo Gym accepts only the Responses API's)", key);
  if (!p.contains("input")) return "responses_create_params: missing \"input\"";
  const OrderedJson& in = p["input"];
  if (in.is_string()) return in.get<std::string>().empty() ? "responses_create_params.input: empty" : "";
  if (!in.is_array() || in.empty()) return "responses_create_params.input: expected a string or a non-empty list of items";
  for (size_t i = 0; i < in.size(); ++i) {
    const OrderedJson& item = in[i];
    const std::string at = fmt::format("responses_create_params.input[{}]", i);
    if (!item.is_object()) return at + ": expected an object";
    const std::string type = item.contains("type") && item["type"].is_string() ? item["type"].get<std::string>() : "message";
    if (!one_of(kItemTypes, type)) return fmt::format("{}: unknown item type \"{}\"", at, type);
    if (type != "message") continue;
    if (!item.contains("role") || !item["role"].is_string() || !one_of(kInputRoles, item["role"].get<std::string>()))
      return at + ": role must be user, assistant, system or developer";
    if (!item.contains("content") || !(item["content"].is_string() || item["content"].is_array()))
      return at + ": content must be a string or a list of parts";
  }
  return "";
}

std::optional<std::string> text_field(const OrderedJson& row, const std::string& key) {
  if (!row.contains(key)) return std::nullopt;
  const OrderedJson& v = row[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number()) return v.dump();
  return std::nullopt;
}

// Nemotron stores some answers JSON-encoded ("\"32\""); decoded when it is a JSON string.
std::string decode_answer(const std::string& a) {
  if (a.size() < 2 || a.front() != '"') return a;
  const OrderedJson v = parse_json_or_discarded<OrderedJson>(a);
  return v.is_string() ? v.get<std::string>() : a;
}

OrderedJson message(const char* role, const std::string& content) { return {{"role", role}, {"content", content}}; }

void add_defaults(OrderedJson& row, const RlRowOptions& opts) {
  if (!opts.task_name.empty() && !row.contains("task_name")) row["task_name"] = opts.task_name;
  if (!opts.agent_name.empty() && !row.contains("agent_ref"))
    row["agent_ref"] = {{"type", "responses_api_agents"}, {"name", opts.agent_name}};
}

}  // namespace

RlRowResult convert_rl_row(OrderedJson row, const RlRowOptions& opts) {
  RlRowResult r;
  if (row.contains("_hf_placeholder")) {
    r.kind = "placeholder";
    const OrderedJson& ph = row["_hf_placeholder"];
    if (!ph.is_object()) return drop("bad _hf_placeholder", "_hf_placeholder: expected an object {row, question_template}");
    std::optional<std::string> question = text_field(row, "question");
    if (!question) question = text_field(row, "problem");
    std::optional<std::string> answer = text_field(row, "expected_answer");
    if (!answer) answer = text_field(row, "answer");
    if (!question || !answer)
      return drop("placeholder without its data",
                  fmt::format("_hf_placeholder: row {} of {} is not in the row (no question/expected_answer); resolve "
                              "it from the external dataset first",
                              ph.contains("row") ? json_excerpt(ph["row"]) : "?",
                              row.contains("dataset") ? json_excerpt(row["dataset"]) : "the external dataset"));
    std::string full = *question;
    if (ph.contains("question_template") && ph["question_template"].is_string()) {
      std::string t = ph["question_template"].get<std::string>();
      size_t at = t.find("{question}");
      size_t len = 10;
      if (at == std::string::npos) at = t.find("{}"), len = 2;
      full = at == std::string::npos ? t + *question : t.substr(0, at) + *question + t.substr(at + len);
    }
    row.erase("_hf_placeholder");
    row["question"] = *question;
    row["expected_answer"] = decode_answer(*answer);
    row["responses_create_params"] = {{"input", OrderedJson::array({message("user", full)})}};
    add_defaults(row, opts);
    r.row = std::move(row);
    return r;
  }
  if (row.contains("responses_create_params")) {
    r.kind = "gym";
    const std::string problem = check_create_params(row["responses_create_params"]);
    if (!problem.empty()) return drop("bad responses_create_params", problem);
    if (row.contains("expected_answer") && row["expected_answer"].is_string())
      row["expected_answer"] = decode_answer(row["expected_answer"].get<std::string>());
    add_defaults(row, opts);
    r.row = std::move(row);
    return r;
  }
  OrderedJson input = OrderedJson::array();
  std::string question, answer;
  if (opts.input_key != "messages" && row.contains("messages")) {
    r.kind = "messages";
    const OrderedJson& m = row["messages"];
    if (!m.is_array()) return drop("bad messages", "messages: expected a list of {role, content}");
    size_t i = 0;
    for (; i < m.size(); ++i) {
      if (!m[i].is_object() || !m[i].contains("role") || !m[i]["role"].is_string() || !m[i].contains("content") ||
          !m[i]["content"].is_string())
        return drop("bad messages", fmt::format("messages[{}]: expected {{role, content}} with string values", i));
      const std::string role = m[i]["role"].get<std::string>();
      if (role == "assistant") break;
      if (!one_of(kInputRoles, role)) return drop("bad messages", fmt::format("messages[{}]: unknown role \"{}\"", i, role));
      if (role == "user" && question.empty()) question = m[i]["content"].get<std::string>();
      input.push_back(message(role.c_str(), m[i]["content"].get<std::string>()));
    }
    if (question.empty()) return drop("no prompt", "messages: no user turn before the first assistant turn");
    if (i == m.size()) return drop("no expected answer", "messages: no assistant turn to take the expected answer from");
    answer = m[i]["content"].get<std::string>();
    row.erase("messages");
  } else if (row.contains(opts.input_key)) {
    r.kind = "plain";
    std::optional<std::string> in = text_field(row, opts.input_key), out = text_field(row, opts.output_key);
    if (!in || in->empty()) return drop("no prompt", fmt::format("{}: expected a non-empty string", opts.input_key));
    if (!out) return drop("no expected answer", fmt::format("{}: missing (the expected answer)", opts.output_key));
    question = *in, answer = *out;
    std::string user = question;
    if (!opts.prompt_template.empty()) {
      const size_t at = opts.prompt_template.find("{}");
      user = at == std::string::npos ? opts.prompt_template + question
                                     : opts.prompt_template.substr(0, at) + question + opts.prompt_template.substr(at + 2);
    }
    if (!opts.system_prompt.empty()) input.push_back(message("system", opts.system_prompt));
    input.push_back(message("user", user));
    row.erase(opts.input_key);
    row.erase(opts.output_key);
  } else {
    std::string keys;
    for (const auto& [k, v] : row.items()) keys += (keys.empty() ? "" : ", ") + k;
    return drop("unknown row format",
                fmt::format("expected responses_create_params (NeMo Gym), {} / {} or messages (NeMo RL); the row has: {}",
                            opts.input_key, opts.output_key, keys.empty() ? "no fields" : keys));
  }
  OrderedJson out;
  out["responses_create_params"] = {{"input", std::move(input)}};
  out["question"] = question;
  out["expected_answer"] = answer;
  for (auto& [k, v] : row.items())
    if (!out.contains(k)) out[k] = std::move(v);
  add_defaults(out, opts);
  r.row = std::move(out);
  return r;
}

}  // namespace nemotron::data
