// The engine as the server drives it (engine::RunHooks) and the worker thread around it, over the exact
// RecomputeStepModel on a tiny random hybrid model: requests that arrive mid-run (before_step) get
// the tokens they get alone; a request cancelled from on_token stops at once and leaves the others'
// tokens unchanged; the worker serves jobs submitted from many threads, streams them, cancels one
// and scores prompts (echo) with the log-probs generation reports; penalties and logit bias apply
// to each step's logits; a shutdown ends running jobs with 503.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <thread>

#include "engine/engine.h"
#include "engine/recompute_step_model.h"
#include "model/block_configs.h"
#include "serve/engine_worker.h"
#include "test_util.h"

namespace nemotron::serve {
namespace {

struct Tiny {
  model::ModelConfig cfg;
  model::HybridModel net;
  Tiny()
      : cfg([] {
          model::ModelConfig c = testing::hybrid_config("M*-E");
          c.vocab_size = 23;
          return c;
        }()),
        net(cfg, host_backend(), DType::f32) {
    net.init(5);
  }
  Context ctx() { return Context{&host_backend(), nullptr, DType::f32}; }
};

engine::Request request(int i, int64_t max_new) {
  engine::Request r;
  for (int t = 0; t < 2 + i % 3; ++t) r.prompt.push_back((i * 5 + t * 3 + 1) % 23);
  r.params.temperature = 0.9;
  r.params.max_new_tokens = max_new;
  r.params.seed = 3;
  r.id = static_cast<uint64_t>(i);
  r.tag = static_cast<uint64_t>(100 + i);
  return r;
}

TEST(EngineHooks, RequestsAddedMidRunGetTheirOwnTokens) {
  Tiny m;
  std::vector<std::vector<int32_t>> alone;
  for (int i = 0; i < 4; ++i) {
    engine::RecomputeStepModel step(m.net, m.ctx(), 1, 32);
    engine::Engine e(step);
    e.add(request(i, 5 + i));
    alone.push_back(e.run().front().tokens);
  }
  engine::RecomputeStepModel step(m.net, m.ctx(), 2, 32);  // fewer slots than requests
  engine::Engine e(step);
  e.add(request(0, 5));
  int steps = 0;
  std::map<uint64_t, std::vector<int32_t>> got;
  engine::RunHooks hooks;
  hooks.keep_results = false;
  hooks.before_step = [&] {
    if (++steps == 3) e.add(request(1, 6));  // while request 0 runs
    if (steps == 4) {
      engine::Request r2 = request(2, 7);
      r2.wants_logits = true;
      e.add(r2);
      e.add(request(3, 8));
    }
  };
  int tokens_seen = 0;
  hooks.on_token = [&](const engine::Result& r, std::span<const float> logits) {
    EXPECT_EQ(logits.size(), r.tag == 102 ? 23u : 0u) << "the logits row only for the request that wants it";
    ++tokens_seen;
    return true;
  };
  std::vector<engine::Result> kept = e.run([&](const engine::Result& r, const engine::EngineStats&) { got[r.tag] = r.tokens; }, hooks);
  EXPECT_TRUE(kept.empty() || std::all_of(kept.begin(), kept.end(), [](const engine::Result& r) { return r.tokens.empty(); }));
  ASSERT_EQ(got.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got[100 + i], alone[static_cast<size_t>(i)]) << "request " << i;
  EXPECT_EQ(tokens_seen, 5 + 6 + 7 + 8);
}

TEST(EngineHooks, CancellingOneLeavesTheOthers) {
  Tiny m;
  auto run = [&](bool cancel) {
    engine::RecomputeStepModel step(m.net, m.ctx(), 3, 32);
    engine::Engine e(step);
    for (int i = 0; i < 3; ++i) e.add(request(i, 8));
    engine::RunHooks hooks;
    hooks.on_token = [&](const engine::Result& r, std::span<const float>) { return !(cancel && r.tag == 101 && r.tokens.size() == 2); };
    return e.run({}, hooks);
  };
  const std::vector<engine::Result> full = run(false), cut = run(true);
  EXPECT_EQ(cut[1].finish, engine::FinishReason::cancelled);
  EXPECT_EQ(cut[1].tokens.size(), 2u);
  EXPECT_EQ(std::vector<int32_t>(full[1].tokens.begin(), full[1].tokens.begin() + 2), cut[1].tokens);
  EXPECT_EQ(cut[0].tokens, full[0].tokens);
  EXPECT_EQ(cut[2].tokens, full[2].tokens);
  EXPECT_STREQ(engine::finish_reason_name(engine::FinishReason::cancelled), "cancelled");
}

// Penalties and logit bias in a running engine: each greedy token is the argmax of the logits the
// engine saw adjusted for the tokens generated before it (the raw row comes to on_token), and the
// adjustment changes what greedy decoding alone would pick.
TEST(EngineHooks, PenaltiesAndLogitBiasApplyToEachStepsLogits) {
  Tiny m;
  engine::RecomputeStepModel step(m.net, m.ctx(), 2, 64);
  engine::Engine e(step);
  engine::Request r = request(0, 24);
  r.params.temperature = 0;
  r.params.presence_penalty = 2;
  r.params.frequency_penalty = 1.5;
  r.params.logit_bias = {{4, -100.0f}, {9, 1.0f}};
  r.wants_logits = true;
  e.add(r);
  int checked = 0, changed = 0;
  engine::RunHooks hooks;
  hooks.on_token = [&](const engine::Result& res, std::span<const float> raw) {
    const std::span<const int32_t> before(res.tokens.data(), res.tokens.size() - 1);
    const std::vector<float> adj = engine::adjusted_logits(raw.data(), 23, r.params, before);
    const auto argmax = [](const auto& v) { return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin()); };
    EXPECT_EQ(res.tokens.back(), argmax(adj)) << "token " << res.tokens.size();
    EXPECT_NE(res.tokens.back(), 4);
    changed += res.tokens.back() != argmax(raw);
    ++checked;
    return true;
  };
  e.run({}, hooks);
  EXPECT_EQ(checked, 24);
  EXPECT_GT(changed, 0);
}

GenerationState wait_all(Generation& g) {
  GenerationState all;
  while (true) {
    GenerationState s = g.wait(all.tokens.size());
    all.tokens.insert(all.tokens.end(), s.tokens.begin(), s.tokens.end());
    all.logprobs.insert(all.logprobs.end(), s.logprobs.begin(), s.logprobs.end());
    if (!s.prompt_logprobs.empty()) all.prompt_logprobs = s.prompt_logprobs;
    all.finished = s.finished;
    all.finish = s.finish;
    all.error = s.error;
    all.error_status = s.error_status;
    if (s.finished) return all;
  }
}

TEST(EngineWorker, ServesManyThreadsCancelsAndScoresPrompts) {
  Tiny m;
  const data::Tokenizer tok = data::Tokenizer::load(nemotron::testing::source_root().string() + "/tests/fixtures/hf/dense/tokenizer.json");
  std::vector<std::vector<int32_t>> alone;
  for (int i = 0; i < 6; ++i) {
    engine::RecomputeStepModel step(m.net, m.ctx(), 1, 32);
    engine::Engine e(step);
    e.add(request(i, 6));
    alone.push_back(e.run().front().tokens);
  }
  engine::RecomputeStepModel step(m.net, m.ctx(), 3, 400);
  EngineWorker worker(step, m.net, tok);
  std::vector<GenerationState> got(6);
  std::vector<std::thread> clients;
  for (int i = 0; i < 6; ++i)
    clients.emplace_back([&, i] {
      engine::Request r = request(i, 6);
      GenerationJob job{r.prompt, r.params, *r.id, /*top_logprobs=*/2, /*score_prompt=*/false};
      got[static_cast<size_t>(i)] = wait_all(*worker.submit(job));
    });
  for (std::thread& t : clients) t.join();
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(got[static_cast<size_t>(i)].tokens, alone[static_cast<size_t>(i)]) << "job " << i;
    ASSERT_EQ(got[static_cast<size_t>(i)].logprobs.size(), 6u);
    EXPECT_EQ(got[static_cast<size_t>(i)].logprobs[0].top.size(), 2u);
  }

  // A job cancelled at its first token ends "cancelled" long before its 390 tokens (the exact
  // model recomputes the whole sequence at each step: hundreds of steps take far longer than the
  // cancel takes to arrive).
  engine::Request long_one = request(1, 390);
  std::shared_ptr<Generation> g = worker.submit({long_one.prompt, long_one.params, 1, -1, false});
  g->wait(0);
  g->cancel();
  GenerationState c = wait_all(*g);
  EXPECT_EQ(c.finish, engine::FinishReason::cancelled);
  EXPECT_LT(c.tokens.size(), 390u);

  // Echo: scoring prompt + the greedy token gives that token the log-prob generation reported.
  engine::Request greedy = request(2, 1);
  greedy.params.temperature = 0;
  GenerationState gen = wait_all(*worker.submit({greedy.prompt, greedy.params, 2, 0, false}));
  std::vector<int32_t> scored = greedy.prompt;
  scored.push_back(gen.tokens[0]);
  engine::SamplingParams none = greedy.params;
  none.max_new_tokens = 0;
  GenerationState echo = wait_all(*worker.submit({scored, none, 3, 1, true}));
  ASSERT_EQ(echo.prompt_logprobs.size(), scored.size());
  EXPECT_TRUE(std::isnan(echo.prompt_logprobs[0].logprob));
  EXPECT_TRUE(echo.tokens.empty());
  EXPECT_NEAR(echo.prompt_logprobs.back().logprob, gen.logprobs[0].logprob, 1e-4);
  EXPECT_EQ(echo.prompt_logprobs.back().top[0].first, gen.tokens[0]);  // greedy: the argmax

  // A shutdown ends a running job with 503 (no finish_reason outside OpenAI's set), and refuses later ones.
  std::shared_ptr<Generation> running = worker.submit({long_one.prompt, long_one.params, 5, -1, false});
  running->wait(0);
  worker.stop();
  GenerationState ended = wait_all(*running);
  EXPECT_EQ(ended.error, "the server is shutting down");
  EXPECT_EQ(ended.error_status, 503);
  EXPECT_LT(ended.tokens.size(), 390u);
  GenerationState late = wait_all(*worker.submit({greedy.prompt, greedy.params, 4, -1, false}));
  EXPECT_EQ(late.error, "the server is shutting down");
  EXPECT_EQ(late.error_status, 503);
  EXPECT_GE(worker.stats().cancelled, 1);
}

}  // namespace
}  // namespace nemotron::serve
