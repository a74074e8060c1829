// The messages rank 0 of a tensor-parallel server (and generate) hands the other ranks
// (serve/step_message.h, engine/request_codec.h): every field of a request, its sampling
// parameters and the step's admissions, cancellations and stop come back exactly, including
// doubles that have no short decimal form, full 64-bit seeds and stop strings of any bytes (not
// UTF-8 too: a --stop argument).
#include <gtest/gtest.h>

#include <limits>

#include "engine/request_codec.h"
#include "serve/step_message.h"
#include "serve/step_report.h"

namespace nemotron::serve {
namespace {

engine::Request every_field_set() {
  engine::Request r;
  r.prompt = {5, 0, 2147483647, 17};
  r.id = std::numeric_limits<uint64_t>::max() - 3;
  r.tag = 42;
  r.wants_logits = true;
  engine::SamplingParams& p = r.params;
  p.temperature = 0.1 + 0.2;  // 0.30000000000000004
  p.top_p = 0.9;
  p.top_k = 7;
  p.max_new_tokens = 33;
  p.stop_token_ids = {3, 9};
  p.stop = {"\n\n", "END\x01", std::string("a\0b", 3), "\xff\xfe not UTF-8"};
  p.seed = std::numeric_limits<uint64_t>::max();
  p.logit_bias = {{4, -100.0f}, {11, 0.1f}};
  p.presence_penalty = -1.5;
  p.frequency_penalty = 1.0 / 3.0;
  return r;
}

void expect_same(const engine::Request& a, const engine::Request& b) {
  EXPECT_EQ(a.prompt, b.prompt);
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.tag, b.tag);
  EXPECT_EQ(a.wants_logits, b.wants_logits);
  EXPECT_EQ(a.params.temperature, b.params.temperature);
  EXPECT_EQ(a.params.top_p, b.params.top_p);
  EXPECT_EQ(a.params.top_k, b.params.top_k);
  EXPECT_EQ(a.params.max_new_tokens, b.params.max_new_tokens);
  EXPECT_EQ(a.params.stop_token_ids, b.params.stop_token_ids);
  EXPECT_EQ(a.params.stop, b.params.stop);
  EXPECT_EQ(a.params.seed, b.params.seed);
  EXPECT_EQ(a.params.logit_bias, b.params.logit_bias);
  EXPECT_EQ(a.params.presence_penalty, b.params.presence_penalty);
  EXPECT_EQ(a.params.frequency_penalty, b.params.frequency_penalty);
}

TEST(RequestCodec, every_field_round_trips_exactly) {
  const engine::Request r = every_field_set();
  expect_same(engine::request_from_json(nlohmann::json::parse(engine::request_to_json(r).dump())), r);
  engine::Request no_id = r;
  no_id.id.reset();
  EXPECT_FALSE(engine::request_from_json(engine::request_to_json(no_id)).id.has_value());
}

TEST(StepMessage, admissions_cancellations_and_stop_round_trip) {
  StepMessage m;
  m.admitted.push_back({every_field_set(), true, 5, false});
  m.admitted.push_back({engine::Request{}, false, 0, true, 3});
  m.cancelled = {7, std::numeric_limits<uint64_t>::max()};
  const StepMessage back = decode_step_message(encode(m));
  EXPECT_FALSE(back.stop);
  ASSERT_EQ(back.admitted.size(), 2u);
  expect_same(back.admitted[0].request, m.admitted[0].request);
  EXPECT_TRUE(back.admitted[0].score_prompt);
  EXPECT_EQ(back.admitted[0].top_logprobs, 5);
  EXPECT_FALSE(back.admitted[0].generates);
  EXPECT_TRUE(back.admitted[1].generates);
  EXPECT_EQ(back.admitted[0].data_rank, 0);
  EXPECT_EQ(back.admitted[1].data_rank, 3);
  EXPECT_EQ(back.cancelled, m.cancelled);
  StepMessage stop;
  stop.stop = true;
  EXPECT_TRUE(decode_step_message(encode(stop)).stop);
}

// The way back under expert parallelism (serve/step_report.h): a data rank's tokens, log-prob
// entries (an infinite one too), text changes of any bytes, finishes and refusals come to rank 0
// exactly.
TEST(StepReport, events_round_trip_exactly) {
  StepReport r;
  r.queued = 3;
  RequestEvent token;
  token.tag = std::numeric_limits<uint64_t>::max();
  token.token = 2147483647;
  token.logprob = TokenLogprob{7, 0.1 + 0.2, {{7, -1.0 / 3.0}, {0, -std::numeric_limits<double>::infinity()}}};
  token.text_at = 5;
  token.text = std::string("\xe4\xb8\0", 3);  // a character cut short, a NUL
  RequestEvent finished;
  finished.tag = 1;
  finished.finished = true;
  finished.finish = engine::FinishReason::stop_string;
  RequestEvent refused;
  refused.tag = 2;
  refused.finished = true;
  refused.finish = engine::FinishReason::cancelled;
  refused.error = "request 2: prompt of 9 tokens leaves no room";
  r.events = {token, finished, refused};
  const StepReport back = decode_step_report(encode(r));
  EXPECT_EQ(back.queued, 3);
  ASSERT_EQ(back.events.size(), 3u);
  const RequestEvent& t = back.events[0];
  EXPECT_EQ(t.tag, token.tag);
  EXPECT_EQ(t.token, token.token);
  ASSERT_TRUE(t.logprob.has_value());
  EXPECT_EQ(t.logprob->token, 7);
  EXPECT_EQ(t.logprob->logprob, 0.1 + 0.2);
  EXPECT_EQ(t.logprob->top, token.logprob->top);
  EXPECT_EQ(t.text_at, 5u);
  EXPECT_EQ(t.text, token.text);
  EXPECT_FALSE(t.finished);
  EXPECT_FALSE(back.events[1].token.has_value());
  EXPECT_FALSE(back.events[1].logprob.has_value());
  EXPECT_TRUE(back.events[1].finished);
  EXPECT_EQ(back.events[1].finish, engine::FinishReason::stop_string);
  EXPECT_EQ(back.events[2].error, refused.error);
}

// A text change is what follows the bytes both texts share: growing, cut back by a stop string,
// or rewritten whole; applied to what rank 0 holds it gives the data rank's text.
TEST(StepReport, text_changes_rebuild_the_text) {
  for (const auto& [sent, now] : std::vector<std::pair<std::string, std::string>>{
           {"", "Hello"}, {"Hello", "Hello, wor"}, {"Hello, wor", "Hello"}, {"abc", "xyz"}, {"same", "same"}}) {
    RequestEvent e;
    set_text_change(e, sent, now);
    std::string held = sent;
    apply_text_change(held, e);
    EXPECT_EQ(held, now) << sent << " -> " << now;
    EXPECT_LE(e.text.size(), now.size());
  }
  RequestEvent grow;
  set_text_change(grow, "Hello", "Hello, wor");
  EXPECT_EQ(grow.text_at, 5u);
  EXPECT_EQ(grow.text, ", wor");
}

}  // namespace
}  // namespace nemotron::serve
