// Request parsing and validation: what each endpoint accepts, and that every malformed body or
// bad field is a 400 naming the field (never an exception of another kind, which would be a 500):
// sampling adjustments, fields refused until implemented, chat roles and content as data prep
// checks them, tools and tool_choice, the tokenizer endpoints.
#include <gtest/gtest.h>

#include "serve/api_error.h"
#include "serve/openai_request.h"

namespace nemotron::serve {
namespace {

// The ApiError a body raises: its status and param ("" if none was thrown: a failure).
template <class Parse>
ApiError error_of(Parse parse, const std::string& body) {
  try {
    parse(body);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << body;
  return ApiError(0, "", "");
}

TEST(OpenAiRequest, CompletionFieldsAndDefaults) {
  CompletionRequest r = parse_completion_request(
      R"({"model": "m", "prompt": "hi", "max_tokens": 7, "temperature": 0, "top_p": 0.5, "n": 3, "stop": "\n",
          "seed": 42, "logprobs": 2, "echo": true, "user": "ignored", "top_k": 5})");
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(std::get<std::string>(r.prompts[0]), "hi");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.temperature, 0);
  EXPECT_EQ(r.top_p, 0.5);
  EXPECT_EQ(r.top_k, 5);
  EXPECT_EQ(r.n, 3);
  EXPECT_EQ(r.stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(r.seed, 42u);
  EXPECT_EQ(r.logprobs, 2);
  EXPECT_TRUE(r.echo);
  EXPECT_FALSE(r.stream);

  CompletionRequest d = parse_completion_request(R"({"prompt": "x", "logprobs": null, "max_tokens": null})");
  EXPECT_EQ(d.model, "");
  EXPECT_FALSE(d.max_tokens.has_value());  // the route's default (16)
  EXPECT_FALSE(d.logprobs.has_value());    // null = not given, as OpenAI's clients send it
  EXPECT_EQ(d.temperature, 1.0);
  EXPECT_EQ(d.n, 1);
}

TEST(OpenAiRequest, PromptForms) {
  auto prompts = [](const std::string& p) { return parse_completion_request(R"({"prompt": )" + p + "}").prompts; };
  EXPECT_EQ(prompts(R"(["a", "b"])").size(), 2u);
  std::vector<Prompt> ids = prompts("[1, 2, 3]");
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(std::get<std::vector<int32_t>>(ids[0]), (std::vector<int32_t>{1, 2, 3}));
  std::vector<Prompt> two = prompts("[[1, 2], [3]]");
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(std::get<std::vector<int32_t>>(two[1]), std::vector<int32_t>{3});
  EXPECT_EQ(parse_completion_request(R"({"prompt": "x", "max_tokens": 4.0})").max_tokens, 4);  // 4.0 is an integer
}

TEST(OpenAiRequest, BadCompletionBodiesAre400sNamingTheField) {
  struct Case {
    const char* body;
    const char* param;
  } cases[] = {
      {R"({"prompt": "x")", ""},  // malformed JSON
      {R"([1, 2])", ""},          // not an object
      {R"({"max_tokens": 3})", "prompt"},
      {R"({"prompt": ""})", "prompt"},
      {R"({"prompt": []})", "prompt"},
      {R"({"prompt": 5})", "prompt"},
      {R"({"prompt": [1, -2]})", "prompt"},
      {R"({"prompt": ["a", 5]})", "prompt"},
      {R"({"prompt": "x", "model": 3})", "model"},
      {R"({"prompt": "x", "temperature": "hot"})", "temperature"},
      {R"({"prompt": "x", "temperature": 2.5})", "temperature"},
      {R"({"prompt": "x", "top_p": 0})", "top_p"},
      {R"({"prompt": "x", "max_tokens": -1})", "max_tokens"},
      {R"({"prompt": "x", "max_tokens": 1.5})", "max_tokens"},
      {R"({"prompt": "x", "max_tokens": 0})", "max_tokens"},  // 0 only with echo
      {R"({"prompt": "x", "n": 0})", "n"},
      {R"({"prompt": "x", "n": 1000})", "n"},
      {R"({"prompt": "x", "stop": 3})", "stop"},
      {R"({"prompt": "x", "stop": ["a", 1]})", "stop"},
      {R"({"prompt": "x", "stop": [""]})", "stop"},
      {R"({"prompt": "x", "seed": "s"})", "seed"},
      {R"({"prompt": "x", "logprobs": 21})", "logprobs"},
      {R"({"prompt": "x", "logprobs": true})", "logprobs"},
      {R"({"prompt": "x", "echo": 1})", "echo"},
      {R"({"prompt": "x", "stream": "yes"})", "stream"},
      {R"({"prompt": "x", "stream_options": {"include_usage": true}})", "stream_options"},
      {R"({"prompt": "x", "echo": true, "stream": true})", "echo"},
      {R"({"prompt": "x", "presence_penalty": 2.5})", "presence_penalty"},
      {R"({"prompt": "x", "frequency_penalty": "high"})", "frequency_penalty"},
      {R"({"prompt": "x", "logit_bias": [1]})", "logit_bias"},
      {R"({"prompt": "x", "logit_bias": {"abc": 1}})", "logit_bias"},
      {R"({"prompt": "x", "logit_bias": {"-1": 1}})", "logit_bias"},
      {R"({"prompt": "x", "logit_bias": {"5": 101}})", "logit_bias"},
      {R"({"prompt": "x", "logit_bias": {"5": "up"}})", "logit_bias"},
      // Not implemented: refused by name, never silently ignored.
      {R"({"prompt": "x", "suffix": "end"})", "suffix"},
      {R"({"prompt": "x", "best_of": 3})", "best_of"},
      {R"({"prompt": "x", "n": 2, "best_of": 3})", "best_of"},
      {R"({"prompt": "x", "response_format": {"type": "json_object"}})", "response_format"},
  };
  for (const Case& c : cases) {
    ApiError e = error_of(parse_completion_request, c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.type, "invalid_request_error") << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << ": " << e.what();
  }
  ApiError e = error_of(parse_completion_request, R"({"prompt": "x", "temperature": "hot"})");
  EXPECT_STREQ(e.what(), R"('temperature': expected a number, got string "hot")");
  EXPECT_NE(std::string(error_of(parse_completion_request, "{\"prompt\"").what()).find("malformed JSON body: parse error"),
            std::string::npos);
  // Their no-op values are accepted: best_of equal to n, an empty suffix, the text format.
  EXPECT_NO_THROW(parse_completion_request(R"({"prompt": "x", "n": 2, "best_of": 2, "suffix": "", "response_format": {"type": "text"}})"));
  // max_tokens 0 with echo scores the prompt (lm-eval's log-likelihood requests).
  EXPECT_EQ(parse_completion_request(R"({"prompt": "x", "max_tokens": 0, "echo": true, "logprobs": 1})").max_tokens, 0);
}

// 100,000 nested arrays (200 KB; they overflowed the stack: issue 24) in the body, in `stop`,
// in a message: a 400 naming the depth limit. A wide value is quoted in a short excerpt.
TEST(OpenAiRequest, DeepJsonIs400AndValuesAreQuotedShort) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  for (const std::string& body : {deep, R"({"prompt": "x", "stop": )" + deep + "}",
                                  R"({"messages": [{"role": "user", "content": )" + deep + "}]}"}) {
    ApiError e = error_of(parse_chat_request, body);
    EXPECT_EQ(e.status, 400);
    EXPECT_NE(std::string(e.what()).find("nested deeper than 256 levels"), std::string::npos) << e.what();
    e = error_of(parse_completion_request, body);
    EXPECT_EQ(e.status, 400);
  }
  const std::string wide = R"({"prompt": "x", "stop": [[")" + std::string(1'000'000, 'y') + R"("]]})";
  ApiError e = error_of(parse_completion_request, wide);
  EXPECT_EQ(e.param, "stop");
  EXPECT_LT(std::string(e.what()).size(), 200u) << std::string(e.what()).substr(0, 300);
}

TEST(OpenAiRequest, ChatFieldsAndErrors) {
  ChatRequest r = parse_chat_request(
      R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 9,
          "chat_template_kwargs": {"enable_thinking": false}, "logprobs": true, "top_logprobs": 3, "stream": true,
          "stream_options": {"include_usage": true}})");
  EXPECT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.max_tokens, 9);
  EXPECT_FALSE(r.enable_thinking);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_TRUE(r.stream && r.include_usage);
  EXPECT_TRUE(parse_chat_request(R"({"messages": [{"role": "user", "content": "hi"}]})").enable_thinking)
      << "the template's default";

  ChatRequest parts = parse_chat_request(
      R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]})");
  EXPECT_EQ(parts.messages[0]["content"], "a\nb");

  const char* bad[][2] = {
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})", "messages"},
      {R"({})", "messages"},
      {R"({"messages": []})", "messages"},
      {R"({"messages": "hi"})", "messages"},
      {R"({"messages": [{"content": "hi"}]})", "messages"},
      {R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0})", "max_tokens"},
      {R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": []})", "chat_template_kwargs"},
      {R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"enable_thinking": "no"}})",
       "enable_thinking"},
      {R"({"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 2})", "top_logprobs"},
      {R"({"messages": [{"role": "user", "content": "hi"}], "tools": {}})", "tools"},
      // Roles and content as data prep sft checks them.
      {R"({"messages": [{"role": "wizard", "content": "hi"}]})", "messages"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages"},
      {R"({"messages": [{"role": "user", "content": {"text": "hi"}}]})", "messages"},
      {R"({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{not json"}}]}]})",
       "messages"},
      {R"({"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_schema"}})", "response_format"},
      {R"({"messages": [{"role": "user", "content": "hi"}], "logit_bias": {"1": -200}})", "logit_bias"},
      // Tools and tool_choice.
      {R"({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {}}]})", "tools"},
      {R"({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "retrieval"}]})", "tools"},
      {R"({"messages": [{"role": "user", "content": "hi"}], "tool_choice": "auto"})", "tool_choice"},
      {R"({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "always"})",
       "tool_choice"},
      {R"({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "f"}}],
           "tool_choice": {"type": "function", "function": {"name": "g"}}})",
       "tool_choice"},
      {R"({"messages": [{"role": "user", "content": "hi"}], "parallel_tool_calls": "yes"})", "parallel_tool_calls"},
  };
  for (const auto& [body, param] : bad) {
    ApiError e = error_of(parse_chat_request, body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.param, param) << body << ": " << e.what();
  }
  EXPECT_STREQ(error_of(parse_chat_request, R"({"messages": [{"role": "wizard", "content": "hi"}]})").what(),
               R"('messages': message 0 has the unknown role "wizard" (expected system, user, assistant or tool))");
}

TEST(OpenAiRequest, SamplingAdjustments) {
  CompletionRequest r = parse_completion_request(
      R"({"prompt": "x", "logit_bias": {"7": -100, "12": 2.5}, "presence_penalty": -1.5, "frequency_penalty": 0.25})");
  EXPECT_EQ(r.logit_bias, (std::vector<std::pair<int32_t, float>>{{7, -100.0f}, {12, 2.5f}}));
  EXPECT_EQ(r.presence_penalty, -1.5);
  EXPECT_EQ(r.frequency_penalty, 0.25);
  ChatRequest c = parse_chat_request(R"({"messages": [{"role": "user", "content": "hi"}], "logit_bias": {"3": 1}})");
  EXPECT_EQ(c.logit_bias.size(), 1u);
}

TEST(OpenAiRequest, ToolsToolChoiceAndOpenAisAssistantMessages) {
  const std::string tools = R"("tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}])";
  // An assistant turn in OpenAI's own form: arguments as a JSON string (parsed for the template).
  ChatRequest r = parse_chat_request(R"({"messages": [{"role": "user", "content": "Paris?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
       "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}], )" + tools + "}");
  EXPECT_EQ(r.messages[1]["tool_calls"][0]["function"]["arguments"]["city"], "Paris");
  EXPECT_EQ(r.tool_choice.mode, ToolChoice::Mode::auto_);  // the default with tools
  // ... and as an object.
  r = parse_chat_request(R"({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "",
      "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]}]})");
  EXPECT_EQ(r.messages[1]["tool_calls"][0]["function"]["arguments"]["city"], "Oslo");
  EXPECT_EQ(r.tool_choice.mode, ToolChoice::Mode::none);  // no tools
  auto choice = [&](const std::string& c) {
    return parse_chat_request(R"({"messages": [{"role": "user", "content": "q"}], )" + tools + R"(, "tool_choice": )" + c + "}")
        .tool_choice;
  };
  EXPECT_EQ(choice(R"("none")").mode, ToolChoice::Mode::none);
  EXPECT_FALSE(parse_chat_request(R"({"messages": [{"role": "user", "content": "q"}], "parallel_tool_calls": false})")
                   .parallel_tool_calls);
  EXPECT_EQ(choice(R"("required")").mode, ToolChoice::Mode::required);
  ToolChoice named = choice(R"({"type": "function", "function": {"name": "get_weather"}})");
  EXPECT_EQ(named.mode, ToolChoice::Mode::named);
  EXPECT_EQ(named.name, "get_weather");
}

TEST(OpenAiRequest, TokenizeAndDetokenize) {
  TokenizeRequest t = parse_tokenize_request(R"({"model": "m", "prompt": "hi", "add_special_tokens": false})");
  EXPECT_FALSE(t.chat);
  EXPECT_EQ(t.prompt, "hi");
  EXPECT_FALSE(t.add_special_tokens);
  EXPECT_TRUE(parse_tokenize_request(R"({"prompt": "hi"})").add_special_tokens);  // vLLM's default
  TokenizeRequest c = parse_tokenize_request(R"({"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": false})");
  EXPECT_TRUE(c.chat);
  EXPECT_FALSE(c.add_generation_prompt);
  EXPECT_EQ(parse_detokenize_request(R"({"tokens": [1, 2, 3]})").tokens, (std::vector<int32_t>{1, 2, 3}));
  const char* bad_tokenize[][2] = {
      {R"({})", "prompt"},
      {R"({"prompt": 5})", "prompt"},
      {R"({"messages": [{"role": "wizard", "content": "x"}]})", "messages"},
      {R"({"messages": [{"role": "user", "content": "x"}], "add_special_tokens": true})", "add_special_tokens"},
  };
  for (const auto& [body, param] : bad_tokenize) EXPECT_EQ(error_of(parse_tokenize_request, body).param, param) << body;
  for (const char* body : {R"({})", R"({"tokens": "1 2"})", R"({"tokens": [1, -1]})", R"({"tokens": [1.5]})"})
    EXPECT_EQ(error_of(parse_detokenize_request, body).param, "tokens") << body;
}

}  // namespace
}  // namespace nemotron::serve
