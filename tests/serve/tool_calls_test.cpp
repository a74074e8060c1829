// Tool calls read out of nano3-format text: the content before the first call, each call's name
// and arguments typed by the request's schema, unclosed blocks, the prefix that forces a call,
// and the streamed deltas joining to exactly the non-streamed message at every split of the text.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "data/chat_template.h"
#include "serve/openai_response.h"
#include "serve/tool_calls.h"

namespace nemotron::serve {
namespace {

using OJson = nlohmann::ordered_json;

const OJson kTools = OJson::parse(R"([{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"},
    "where": {"type": "object"}, "zip": {"type": ["string", "null"]}, "scale": {"type": "number"}}}}},
    {"type": "function", "function": {"name": "noop"}}])");

const std::string kTwoCalls =
    "I will look.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n"
    "<parameter=days>\n3\n</parameter>\n<parameter=metric>\ntrue\n</parameter>\n<parameter=where>\n{\"lat\": 1.5}\n"
    "</parameter>\n<parameter=zip>\n10001\n</parameter>\n<parameter=scale>\n2.5\n</parameter>\n<parameter=extra>\n"
    "[1]\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=noop>\n</function>\n</tool_call>\n";

TEST(ToolCalls, ParsesContentAndCallsTypedByTheSchema) {
  ParsedToolOutput p = parse_tool_calls(kTwoCalls, kTools, true);
  EXPECT_EQ(p.content, "I will look.");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  // A string stays a string even when it looks like a number ("10001"); a parameter the schema
  // does not list is parsed as JSON when it is JSON.
  EXPECT_EQ(OJson::parse(p.calls[0].arguments),
            OJson::parse(R"({"city": "New York", "days": 3, "metric": true, "where": {"lat": 1.5}, "zip": "10001",
                             "scale": 2.5, "extra": [1]})"));
  EXPECT_EQ(p.calls[1].name, "noop");
  EXPECT_EQ(p.calls[1].arguments, "{}");
  // parallel_tool_calls false: the first call only.
  ASSERT_EQ(parse_tool_calls(kTwoCalls, kTools, true, 1).calls.size(), 1u);
  ToolCallStream one(kTools, "", 1);
  EXPECT_EQ(one.update(kTwoCalls, kTwoCalls.size(), true).tool_calls.size(), 1u);
  // A value that does not parse as its type stays text.
  ParsedToolOutput bad = parse_tool_calls(
      "<tool_call>\n<function=get_weather>\n<parameter=days>\nthree\n</parameter>\n</function>\n</tool_call>", kTools, true);
  EXPECT_EQ(bad.calls[0].arguments, R"({"days":"three"})");
}

TEST(ToolCalls, RendersBackToTheTemplatesOwnText) {
  // The calls, given back as an assistant message, render as the model wrote them.
  ParsedToolOutput p = parse_tool_calls(kTwoCalls, kTools, true);
  OJson calls = OJson::array();
  for (const ToolCall& c : p.calls) calls.push_back({{"type", "function"}, {"function", {{"name", c.name}, {"arguments", OJson::parse(c.arguments)}}}});
  OJson messages = OJson::array({{{"role", "user"}, {"content", "q"}}, {{"role", "assistant"}, {"content", p.content}, {"tool_calls", calls}}});
  const std::string text = data::render_chat(data::ChatFormat::nano3, messages, kTools);
  const std::string noop_block = "<tool_call>\n<function=noop>\n</function>\n</tool_call>\n";
  EXPECT_NE(text.find("I will look.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find(noop_block), std::string::npos) << text;
}

TEST(ToolCalls, NoCallAndUnclosedBlocks) {
  ParsedToolOutput none = parse_tool_calls("Just an answer.\n", kTools, true);
  EXPECT_EQ(none.content, "Just an answer.");
  EXPECT_TRUE(none.calls.empty());
  const std::string open = "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n<parameter=days>\n4";
  EXPECT_TRUE(parse_tool_calls(open, kTools, false).calls.empty()) << "streaming: not closed yet";
  ParsedToolOutput last = parse_tool_calls(open, kTools, true);
  ASSERT_EQ(last.calls.size(), 1u);  // at the end: the call, without its unfinished parameter
  EXPECT_EQ(last.calls[0].arguments, R"({"city":"Oslo"})");
  EXPECT_TRUE(parse_tool_calls("<tool_call>\n<function=get_wea", kTools, true).calls.empty());
  // Streaming holds back what may start a call: "<tool_" could be one.
  EXPECT_EQ(parse_tool_calls("Hi <tool_", kTools, false).content_ready, 2u);  // "Hi" (the space too is held)
  EXPECT_EQ(parse_tool_calls("Hi <tool_", kTools, true).content, "Hi <tool_");
}

TEST(ToolCalls, ForcedPrefixes) {
  ToolChoice named{ToolChoice::Mode::named, "noop"};
  EXPECT_EQ(forced_call_prefix(named, kTools), "<tool_call>\n<function=noop>\n");
  EXPECT_EQ(forced_call_prefix({ToolChoice::Mode::required, ""}, kTools), "<tool_call>\n<function=");
  const OJson one = OJson::array({kTools[1]});
  EXPECT_EQ(forced_call_prefix({ToolChoice::Mode::required, ""}, one), "<tool_call>\n<function=noop>\n");
  EXPECT_EQ(forced_call_prefix({ToolChoice::Mode::auto_, ""}, kTools), "");
  EXPECT_EQ(forced_call_prefix({ToolChoice::Mode::none, ""}, kTools), "");
  // What the model writes after a forced named prefix parses as that function's call.
  ParsedToolOutput p = parse_tool_calls(forced_call_prefix(named, kTools) + "</function>\n</tool_call>\n", kTools, true);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "noop");
  EXPECT_EQ(p.content, "");
}

TEST(ToolCalls, StreamedDeltasJoinToTheWholeMessageAtEverySplit) {
  const ParsedToolOutput whole = parse_tool_calls(kTwoCalls, kTools, true);
  for (size_t step : {1, 2, 3, 7, 13}) {
    ToolCallStream s(kTools, "");
    std::string content;
    std::vector<OJson> calls;
    for (size_t n = 0;; n = std::min(n + step, kTwoCalls.size())) {
      const bool final = n == kTwoCalls.size();
      ToolCallStream::Delta d = s.update(kTwoCalls.substr(0, n), n, final);
      content += d.content;
      for (const auto& c : d.tool_calls) {
        EXPECT_EQ(c["index"], calls.size());
        EXPECT_EQ(c["id"].get<std::string>().rfind("call_", 0), 0u);
        calls.push_back(c);
      }
      // A call's text is never sent as content.
      EXPECT_EQ(content.find('<'), std::string::npos) << "step " << step << " at " << n;
      if (final) break;
    }
    EXPECT_EQ(content, whole.content) << "step " << step;
    ASSERT_EQ(calls.size(), whole.calls.size()) << "step " << step;
    for (size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(calls[i]["function"]["name"], whole.calls[i].name);
      EXPECT_EQ(calls[i]["function"]["arguments"], whole.calls[i].arguments);
    }
    EXPECT_TRUE(s.called());
  }
  // Only `ready` bytes count (a stop string may still cut the rest).
  ToolCallStream held(kTools, "");
  EXPECT_EQ(held.update("abc def", 3, false).content, "abc");
}

TEST(ToolCalls, FinishReasons) {
  EXPECT_STREQ(chat_finish_reason(engine::FinishReason::stop_token, true, false), "tool_calls");
  EXPECT_STREQ(chat_finish_reason(engine::FinishReason::stop_token, true, true), "stop");  // named, as OpenAI
  EXPECT_STREQ(chat_finish_reason(engine::FinishReason::length, true, false), "length");
  EXPECT_STREQ(chat_finish_reason(engine::FinishReason::stop_string, false, false), "stop");
}

}  // namespace
}  // namespace nemotron::serve
