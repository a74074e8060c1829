// The cached StepModel (HybridModel::extend over a DecodeState) against the exact reference
// (RecomputeStepModel): the same requests through the engine give the same tokens and, in
// float64, the same log-probs to rounding, with more requests than slots (slots released and
// reused, prefill beside decode in one step) on a model with every block kind: two Nemotron-H
// patterns and a DeciLM stack (GQA with per-block KV heads and Llama-3 RoPE, no-op and linear
// attention, no-op and linear FFN, SwiGLU of two widths). On the DeciLM stack batched generation
// (more requests than slots) also gives each request the tokens it gets alone in one slot.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/cached_step_model.h"
#include "engine/engine.h"
#include "engine/recompute_step_model.h"
#include "model/block_configs.h"
#include "test_util.h"

namespace nemotron::engine {
namespace {

std::vector<Result> generate(StepModel& model, int n, double temperature) {
  Engine e(model);
  for (int i = 0; i < n; ++i) {
    Request r;
    for (int t = 0; t < 2 + (i * 3) % 9; ++t) r.prompt.push_back((i * 7 + t * 5 + 1) % 29);
    r.params.temperature = temperature;
    r.params.top_p = 0.95;
    r.params.max_new_tokens = 4 + (i * 5) % 9;
    r.params.seed = 7 + static_cast<uint64_t>(i);
    e.add(r);
  }
  return e.run();
}

// The stacks under test, each with vocabulary 29 (the prompts' token range).
std::vector<std::pair<std::string, model::ModelConfig>> stacks() {
  std::vector<std::pair<std::string, model::ModelConfig>> out;
  for (const std::string pattern : {"M*-E", "*M-M*E"}) out.emplace_back(pattern, testing::hybrid_config(pattern));
  out.emplace_back("decilm", testing::decilm_config());
  for (auto& [name, cfg] : out) cfg.vocab_size = 29;
  return out;
}

TEST(CachedStepModel, MatchesTheExactRecomputeModelThroughTheEngine) {
  for (const auto& [name, cfg] : stacks()) {
    model::HybridModel net(cfg, host_backend(), DType::f64);
    net.init(5);
    const Context ctx{&host_backend(), nullptr, DType::f64};
    for (double temperature : {0.0, 0.9}) {
      RecomputeStepModel exact(net, ctx, 3, 40);
      CachedStepModel cached(net, ctx, 3, 40, 4);
      const std::vector<Result> a = generate(exact, 8, temperature), b = generate(cached, 8, temperature);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].tokens, b[i].tokens) << name << " request " << i << " temperature " << temperature;
        ASSERT_EQ(a[i].raw_logprobs.size(), b[i].raw_logprobs.size());
        for (size_t t = 0; t < a[i].raw_logprobs.size(); ++t)
          EXPECT_NEAR(a[i].raw_logprobs[t], b[i].raw_logprobs[t], 1e-9) << name << " request " << i << " token " << t;
      }
      EXPECT_EQ(cached.state().free_blocks(), cached.state().max_slots() * 10) << "every block back after the run";
    }
  }
}

// DeciLM on the cached model in float32 (what `nemotron generate` and GRPO run): 8 requests
// through 3 slots equal each request alone in a 1-slot engine, token for token, with the same
// seeds; the log-probs to float32 rounding (a packed step sums in another order than a lone one).
TEST(CachedStepModel, DeciLmBatchedAndOneAtATimeGiveTheSameTokens) {
  model::ModelConfig cfg = testing::decilm_config();
  cfg.vocab_size = 29;
  model::HybridModel net(cfg, host_backend(), DType::f32);
  net.init(5);
  const Context ctx{&host_backend(), nullptr, DType::f32};
  CachedStepModel batched(net, ctx, 3, 40, 4);
  const std::vector<Result> all = generate(batched, 8, 0.9);
  ASSERT_EQ(all.size(), 8u);
  for (size_t i = 0; i < all.size(); ++i) {
    CachedStepModel alone_model(net, ctx, 1, 40, 4);
    Engine e(alone_model);
    Request r;
    r.prompt = all[i].prompt;
    r.params.temperature = 0.9;
    r.params.top_p = 0.95;
    r.params.max_new_tokens = 4 + (static_cast<int>(i) * 5) % 9;
    r.params.seed = 7 + i;
    r.id = i;
    e.add(r);
    const Result alone = e.run()[0];
    EXPECT_EQ(all[i].tokens, alone.tokens) << "request " << i;
    EXPECT_EQ(static_cast<int64_t>(all[i].tokens.size()), r.params.max_new_tokens) << "request " << i;
    ASSERT_EQ(all[i].raw_logprobs.size(), alone.raw_logprobs.size());
    for (size_t t = 0; t < alone.raw_logprobs.size(); ++t)
      EXPECT_NEAR(all[i].raw_logprobs[t], alone.raw_logprobs[t], 1e-5) << "request " << i << " token " << t;
  }
}

}  // namespace
}  // namespace nemotron::engine
