// Response shaping: the error body, the legacy completions logprobs object (echo's null first
// token, text offsets), chat's logprobs.content, SSE framing, finish reasons, the
// context-length check and the token log-probs themselves against a hand computation.
#include <gtest/gtest.h>

#include <cmath>

#include "serve/job_builder.h"
#include "serve/openai_response.h"
#include "serve/token_logprobs.h"

namespace nemotron::serve {
namespace {

const data::Tokenizer& tok() {
  static const data::Tokenizer t =
      data::Tokenizer::load(std::string(NEMOTRON_SOURCE_DIR) + "/tests/fixtures/hf/dense/tokenizer.json");
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
  EXPECT_STREQ(openai_finish_reason(engine::FinishReason::cancelled), "abort");
}

TEST(JobBuilder, ModelNameContextAndChoices) {
  ServedModel m;
  m.name = "tiny";
  m.tok = &tok();
  m.max_model_len = 12;
  m.vocab_size = tok().vocab_size();
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
}

}  // namespace
}  // namespace nemotron::serve
