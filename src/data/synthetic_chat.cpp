#include "data/synthetic_chat.h"

#include <array>

#include <fmt/format.h>

#include "core/json_limits.h"
#include "core/rng.h"

namespace nemotron::data {

namespace {

constexpr uint64_t kChatStream = 0x63686174ull;  // "chat"
constexpr std::array<const char*, 3> kSystemPrompts = {
    "You are a careful math tutor. Work step by step and end with \"The answer is N.\"",
    "You solve arithmetic problems. Show your work.",
    "Answer the question. Finish with the final number."};

const OrderedJson& calculator_tool() {
  static const OrderedJson tool = parse_json<OrderedJson>(R"({"type": "function", "function": {
      "name": "calculator",
      "description": "Evaluate an arithmetic expression of integers with +, - and *.",
      "parameters": {"type": "object",
                     "properties": {"expression": {"type": "string", "description": "The expression, e.g. \"17 + 25\"."}},
                     "required": ["expression"]}}})",
                                                          "the calculator tool");
  return tool;
}

OrderedJson msg(const char* role, const std::string& content) { return {{"role", role}, {"content", content}}; }

// "17 + 25" for "What is 17 + 25?", empty for word problems.
std::string expression_of(const Problem& p) {
  if (p.skill == Skill::word_problem || !p.question.starts_with("What is ") || !p.question.ends_with("?")) return "";
  return p.question.substr(8, p.question.size() - 9);
}

OrderedJson tool_call(const std::string& expression) {
  return {{"type", "function"},
          {"function", {{"name", "calculator"}, {"arguments", OrderedJson({{"expression", expression}}).dump()}}}};
}

// The tool schema with the template's fixed call instructions is over a thousand tokens for a
// tokenizer trained on arithmetic alone, so only one tool row in ten carries `tools`; the others
// show the call format by example (the template renders calls and results without a schema).
bool with_schema(int64_t row) { return row % 10 == 0; }

// The worked steps without the final "The answer is N." line.
std::string steps_of(const Problem& p) {
  const size_t at = p.solution.rfind('\n');
  return at == std::string::npos ? p.solution : p.solution.substr(0, at);
}

}  // namespace

std::vector<OrderedJson> generate_chat_rows(const CorpusConfig& cfg) {
  cfg.validate("generator");
  const Philox rng(cfg.seed, kChatStream);
  std::vector<OrderedJson> rows;
  rows.reserve(static_cast<size_t>(cfg.num_examples));
  for (int64_t i = 0; i < cfg.num_examples; ++i) {
    const Problem a = make_problem(cfg.seed, cfg.first_problem + 2 * i, cfg.knobs);
    const Problem b = make_problem(cfg.seed, cfg.first_problem + 2 * i + 1, cfg.knobs);
    const double kind = rng.uniform(static_cast<uint64_t>(3 * i));
    const double sys = rng.uniform(static_cast<uint64_t>(3 * i + 1));
    const double tag = rng.uniform(static_cast<uint64_t>(3 * i + 2));
    OrderedJson messages = OrderedJson::array();
    if (sys < 0.25) messages.push_back(msg("system", kSystemPrompts[static_cast<size_t>(sys * 12) % kSystemPrompts.size()]));
    OrderedJson row;
    const std::string ea = expression_of(a), eb = expression_of(b);
    if (kind < 0.10) {  // reasoning: the steps as reasoning_content, the answer line as content
      messages.push_back(msg("user", a.question));
      OrderedJson reply = msg("assistant", fmt::format("{}{}.", kAnswerPrefix, a.answer));
      reply["reasoning_content"] = steps_of(a);
      messages.push_back(reply);
    } else if (kind < 0.18 && !ea.empty()) {  // one calculator call
      if (with_schema(i)) row["tools"] = OrderedJson::array({calculator_tool()});
      messages.push_back(msg("user", a.question));
      OrderedJson call = msg("assistant", "");
      call["tool_calls"] = OrderedJson::array({tool_call(ea)});
      messages.push_back(call);
      messages.push_back(msg("tool", std::to_string(a.answer)));
      messages.push_back(msg("assistant", fmt::format("{} = {}.\n{}{}.", ea, a.answer, kAnswerPrefix, a.answer)));
    } else if (kind < 0.22 && !ea.empty() && !eb.empty()) {  // two parallel calls, then their sum
      if (with_schema(i)) row["tools"] = OrderedJson::array({calculator_tool()});
      const int64_t sum = a.answer + b.answer;
      messages.push_back(msg("user", fmt::format("What is ({}) + ({})?", ea, eb)));
      OrderedJson call = msg("assistant", "I will compute both parts first.");
      call["tool_calls"] = OrderedJson::array({tool_call(ea), tool_call(eb)});
      messages.push_back(call);
      messages.push_back(msg("tool", std::to_string(a.answer)));
      messages.push_back(msg("tool", std::to_string(b.answer)));
      messages.push_back(msg("assistant", fmt::format("{} + {} = {}.\n{}{}.", a.answer, b.answer, sum, kAnswerPrefix, sum)));
    } else if (kind < 0.40) {  // two turns
      messages.push_back(msg("user", a.question));
      messages.push_back(msg("assistant", a.solution));
      messages.push_back(msg("user", b.question));
      messages.push_back(msg("assistant", b.solution));
    } else {
      messages.push_back(msg("user", a.question));
      messages.push_back(msg("assistant", a.solution));
    }
    OrderedJson out;
    out["messages"] = std::move(messages);
    if (row.contains("tools")) out["tools"] = row["tools"];
    out["used_in"] = tag < 0.02 ? "nano_v2" : kChatUsedIn;
    rows.push_back(std::move(out));
  }
  return rows;
}

std::vector<OrderedJson> generate_chat_heldout(const CorpusConfig& cfg, int64_t count) {
  cfg.validate("generator");
  std::vector<OrderedJson> rows;
  for (int64_t i = 0; i < count; ++i) {
    const Problem p = make_problem(cfg.seed, cfg.first_problem + 2 * cfg.num_examples + i, cfg.knobs);
    OrderedJson row;
    row["messages"] = OrderedJson::array({msg("user", p.question)});
    row["answer"] = std::to_string(p.answer);
    row["reference"] = p.solution;
    row["skill"] = skill_name(p.skill);
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace nemotron::data
