// Response shaping: the error body, the legacy completions logprobs object (echo's null first
// token, text offsets, partial characters as "bytes:"), chat's logprobs.content, SSE framing,
// finish reasons, the context-length check, sampling adjustments and forced tool calls reaching
// the jobs, and the token log-probs themselves against a hand computation.
#include <gtest/gtest.h>

#include <cmath>

#include "serve/job_builder.h"
#include "serve/openai_response.h"
#include "serve/token_logprobs.h"
#include "test_util.h"

namespace nemotron::serve {
namespace {

const data::Tokenizer& tok() {
  static const data::Tokenizer t =
      data::Tokenizer::load(nemotron::testing::source_root().string() + "/tests/fixtures/hf/dense/tokenizer.json");
  return t;
}

TEST(OpenAiResponse, ErrorBodyIsOpenAisShape) {
  const json b = error_body(ApiError(404, "no such model", "invalid_request_error", "model", "model_not_found"));
  EXPECT_EQ(b, json::parse(R"({"error": {"message": "no such model", "type": "invalid_request_error",
                                         "param": "model", "code": "model_not_found"}})"));
  const json n = error_body(bad_request("bad"));
  EXPECT_TRUE(n["error"]["param"].is_null());
  EXPECT_TRUE(n["error"]["code"].is_null());
}

TEST(OpenAiResponse, TokenLogprobIsTheLogSoftmaxAndTopKIsSorted) {
  const std::vector<float> z = {1.0f, 3.0f, 2.0f, 3.0f};
  double norm = 0;
  for (float v : z) norm += std::exp(static_cast<double>(v));
  const TokenLogprob t = token_logprob(z, 2, 3);
  EXPECT_NEAR(t.logprob, 2.0 - std::log(norm), 1e-6);
  ASSERT_EQ(t.top.size(), 3u);
  EXPECT_EQ(t.top[0].first, 1);  // a tie: the lower id first
  EXPECT_EQ(t.top[1].first, 3);
  EXPECT_EQ(t.top[2].first, 2);
  EXPECT_NEAR(t.top[2].second, t.logprob, 1e-12);
  EXPECT_TRUE(token_logprob(z, 0, 0).top.empty());
  EXPECT_EQ(token_logprob(z, 0, 99).top.size(), 4u);  // k beyond the vocabulary: all of it
}

TEST(OpenAiResponse, CompletionLogprobsWithAnEchoedPrompt) {
  const std::vector<int32_t> ids = tok().encode("hello world");
  ASSERT_GE(ids.size(), 2u);
  std::vector<TokenLogprob> prompt;
  for (size_t i = 0; i < ids.size(); ++i)
    prompt.push_back({ids[i], i == 0 ? std::nan("") : -1.5, i == 0 ? std::vector<std::pair<int32_t, double>>{}
                                                                   : std::vector<std::pair<int32_t, double>>{{ids[i], -1.5}}});
  json lp = completion_logprobs(prompt, tok(), 0);
  append_completion_logprobs(lp, {{ids[0], -0.25, {{ids[0], -0.25}}}}, tok());
  const json choice = completion_choice(0, "x", lp, "length");
  const json& l = choice["logprobs"];
  EXPECT_FALSE(l.contains("next_offset"));
  ASSERT_EQ(l["tokens"].size(), ids.size() + 1);
  EXPECT_TRUE(l["token_logprobs"][0].is_null());
  EXPECT_TRUE(l["top_logprobs"][0].is_null());
  EXPECT_EQ(l["token_logprobs"][1], -1.5);
  EXPECT_EQ(l["token_logprobs"].back(), -0.25);
  // Offsets are the running length of the token texts.
  int64_t off = 0;
  for (size_t i = 0; i < l["tokens"].size(); ++i) {
    EXPECT_EQ(l["text_offset"][i], off);
    off += static_cast<int64_t>(l["tokens"][i].get<std::string>().size());
  }
  EXPECT_EQ(l["top_logprobs"][1].size(), 1u);
  EXPECT_EQ(choice["finish_reason"], "length");
}

TEST(OpenAiResponse, ChatLogprobsAndChunks) {
  const std::vector<int32_t> ids = tok().encode("hi");
  const json c = chat_logprobs({{ids[0], -0.5, {{ids[0], -0.5}}}}, tok());
  const json& e = c["content"][0];
  EXPECT_EQ(e["logprob"], -0.5);
  const std::string s = e["token"];
  EXPECT_EQ(e["bytes"].size(), s.size());
  EXPECT_EQ(e["top_logprobs"][0]["token"], s);
  const ResponseHead h{"chatcmpl-1", "m", 5};
  const json first = chat_chunk(h, 0, {{"role", "assistant"}}, nullptr, nullptr);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  const std::string ev = sse_event(first);
  EXPECT_EQ(ev.rfind("data: {", 0), 0u);
  EXPECT_EQ(ev.substr(ev.size() - 2), "\n\n");
  // Invalid UTF-8 (a token that ends mid-character) is replaced, never an exception.
  EXPECT_NO_THROW(sse_event(completion_chunk(h, 0, "\xE2\x82", nullptr, nullptr)));
  EXPECT_EQ(usage_chunk(h, "text_completion", usage_json(3, 4))["usage"]["total_tokens"], 7);
}

TEST(OpenAiResponse, FinishReasons) {
  EXPECT_STREQ(openai_finish_reason(engine::FinishReason::stop_token), "stop");
  EXPECT_STREQ(openai_finish_reason(engine::FinishReason::stop_string), "stop");
  EXPECT_STREQ(openai_finish_reason(engine::FinishReason::length), "length");
  EXPECT_STREQ(openai_finish_reason(engine::FinishReason::max_seq_len), "length");
  // Never "abort": OpenAI's set has no such value (a shutdown answers 503 instead).
  EXPECT_STREQ(openai_finish_reason(engine::FinishReason::cancelled), "length");
}

// Tokens that are part of a character are listed as OpenAI's "bytes:\xHH" so that the listed
// tokens join back to the prompt's bytes; whole characters stay text.
TEST(OpenAiResponse, PartialCharacterTokensAreListedAsBytes) {
  const std::string text = "h\xC3\xA9llo \xE6\x9D\xB1\xE4\xBA\xAC \xF0\x9F\x99\x82!";  // héllo 東京 🙂!
  const std::vector<int32_t> ids = tok().encode(text);
  std::string joined;
  int as_bytes = 0;
  for (int32_t id : ids) {
    const std::string t = token_text(tok(), id);
    if (t.rfind("bytes:", 0) != 0) {
      joined += t;
      continue;
    }
    ++as_bytes;
    for (size_t i = 6; i < t.size(); i += 4) {
      ASSERT_EQ(t.substr(i, 2), "\\x") << t;
      joined += static_cast<char>(std::stoi(t.substr(i + 2, 2), nullptr, 16));
    }
  }
  EXPECT_EQ(joined, text);
  EXPECT_GT(as_bytes, 0) << "the fixture splits these characters into byte tokens";
  // The echoed prompt's offsets are byte offsets into it.
  std::vector<TokenLogprob> lp;
  for (int32_t id : ids) lp.push_back({id, -1.0, {}});
  const json j = completion_logprobs(lp, tok(), 0);
  EXPECT_EQ(j["next_offset"], static_cast<int64_t>(text.size()));
  // Chat lists text tokens, and their `bytes` join back (a partial character's token is U+FFFD).
  std::string chat_bytes;
  const json chat = chat_logprobs(lp, tok());
  for (const json& t : chat["content"])
    for (const json& b : t["bytes"]) chat_bytes += static_cast<char>(b.get<int>());
  EXPECT_EQ(chat_bytes, text);
}

// The fixture's tokenizer served as "tiny" with a context of `max_model_len`.
ServedModel tiny(int64_t max_model_len) {
  ServedModel m;
  m.name = "tiny";
  m.tok = &tok();
  m.max_model_len = max_model_len;
  m.vocab_size = tok().vocab_size();
  return m;
}

TEST(JobBuilder, ModelNameContextAndChoices) {
  ServedModel m = tiny(12);
  m.stop_token_ids = {2};
  CompletionRequest r = parse_completion_request(R"({"prompt": ["a b", [5, 6]], "n": 2, "max_tokens": 3, "seed": 9,
                                                     "stop": ["abc", "de"]})");
  PreparedRequest p = prepare_completion(m, r);
  ASSERT_EQ(p.choices.size(), 4u);
  EXPECT_EQ(p.choices[3].index, 3);
  EXPECT_EQ(p.choices[3].prompt_index, 1);
  EXPECT_EQ(p.choices[3].job.prompt, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(p.choices[3].job.stream_id, 1u);
  EXPECT_EQ(p.choices[3].job.params.seed, 9u);
  EXPECT_EQ(p.choices[3].job.params.stop_token_ids, std::vector<int32_t>{2});
  EXPECT_EQ(p.stop_holdback, 2u);
  EXPECT_EQ(p.prompt_tokens, static_cast<int64_t>(p.choices[0].job.prompt.size()) + 2);  // each prompt once

  r.model = "other";
  try {
    prepare_completion(m, r);
    ADD_FAILURE() << "another model's name was accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 404);
    EXPECT_EQ(e.code, "model_not_found");
  }
  CompletionRequest too_long = parse_completion_request(R"({"prompt": [1, 2, 3, 4, 5], "max_tokens": 8})");
  try {
    prepare_completion(m, too_long);
    ADD_FAILURE() << "5 + 8 tokens fit a context of 12";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.code, "context_length_exceeded");
    EXPECT_NE(std::string(e.what()).find("maximum context length is 12 tokens. However, you requested 13 tokens"),
              std::string::npos)
        << e.what();
  }
  too_long.max_tokens = 7;
  EXPECT_NO_THROW(prepare_completion(m, too_long));  // exactly the context
  CompletionRequest bad_id = parse_completion_request(R"({"prompt": [1, 999999], "max_tokens": 1})");
  EXPECT_THROW(prepare_completion(m, bad_id), ApiError);
  CompletionRequest eos = parse_completion_request(R"({"prompt": [1], "max_tokens": 1, "ignore_eos": true})");
  EXPECT_TRUE(prepare_completion(m, eos).choices[0].job.params.stop_token_ids.empty());
  // Sampling adjustments reach the engine's parameters; a logit_bias id past the vocabulary is a 400.
  CompletionRequest adj = parse_completion_request(R"({"prompt": [1], "max_tokens": 1, "logit_bias": {"3": -5},
                                                      "presence_penalty": 0.5, "frequency_penalty": 1})");
  const engine::SamplingParams sp = prepare_completion(m, adj).choices[0].job.params;
  EXPECT_EQ(sp.logit_bias, (std::vector<std::pair<int32_t, float>>{{3, -5.0f}}));
  EXPECT_EQ(sp.presence_penalty, 0.5);
  EXPECT_EQ(sp.frequency_penalty, 1.0);
  CompletionRequest far = parse_completion_request(R"({"prompt": [1], "max_tokens": 1, "logit_bias": {"999999": 1}})");
  try {
    prepare_completion(m, far);
    ADD_FAILURE() << "a logit_bias id outside the vocabulary was accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "logit_bias");
  }
}

TEST(JobBuilder, ForcedToolCallsEndThePromptWithTheCallsOpening) {
  ServedModel m = tiny(4096);
  const std::string tools = R"("tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "g"}}])";
  auto prompt_text = [&](const std::string& extra) {
    const ChatRequest r = parse_chat_request(R"({"messages": [{"role": "user", "content": "q"}], )" + tools + extra + "}");
    const PreparedRequest p = prepare_chat(m, r);
    return std::make_pair(tok().decode(p.choices[0].job.prompt), p);
  };
  auto [auto_text, auto_p] = prompt_text("");
  EXPECT_TRUE(auto_p.parse_tool_calls);
  EXPECT_EQ(auto_p.forced_prefix, "");
  EXPECT_TRUE(auto_text.ends_with("<|im_start|>assistant\n<think>\n")) << auto_text;
  auto [named_text, named_p] = prompt_text(R"(, "tool_choice": {"type": "function", "function": {"name": "g"}})");
  EXPECT_TRUE(named_p.named_tool);
  EXPECT_TRUE(named_text.ends_with("<think>\n</think>\n<tool_call>\n<function=g>\n")) << named_text;
  auto [none_text, none_p] = prompt_text(R"(, "tool_choice": "none", "chat_template_kwargs": {"enable_thinking": false})");
  EXPECT_FALSE(none_p.parse_tool_calls);
  EXPECT_NE(none_text.find("<function>\n<name>g</name>"), std::string::npos) << "tools are still shown, as vLLM does";
  auto [req_text, req_p] = prompt_text(R"(, "tool_choice": "required", "chat_template_kwargs": {"enable_thinking": false})");
  EXPECT_TRUE(req_text.ends_with("<think></think><tool_call>\n<function=")) << req_text;
  EXPECT_EQ(req_p.tool_names_to_choose, (std::vector<std::string>{"f", "g"}));  // the server picks the likeliest
  EXPECT_TRUE(named_p.tool_names_to_choose.empty());
  m.chat_format = data::ChatFormat::nano_v2;
  try {
    prompt_text(R"(, "tool_choice": "required")");
    ADD_FAILURE() << "a format without tool calls forced one";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "tool_choice") << e.what();
  }
}

}  // namespace
}  // namespace nemotron::serve
