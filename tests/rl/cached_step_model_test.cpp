// The cached StepModel (HybridModel::extend over a DecodeState) against the exact reference
// (RecomputeStepModel): the same requests through the engine give the same tokens and, in
// float64, the same log-probs to rounding, with more requests than slots (slots released and
// reused, prefill beside decode in one step) on a model with every block kind.
#include <gtest/gtest.h>

#include <cmath>

#include "rl/engine/cached_step_model.h"
#include "rl/engine/engine.h"
#include "rl/engine/recompute_step_model.h"
#include "model/block_configs.h"
#include "test_util.h"

namespace nemotron::rl {
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

TEST(CachedStepModel, MatchesTheExactRecomputeModelThroughTheEngine) {
  for (const std::string pattern : {"M*-E", "*M-M*E"}) {
    model::ModelConfig cfg = testing::hybrid_config(pattern);
    cfg.vocab_size = 29;
    model::HybridModel net(cfg, host_backend(), DType::f64);
    net.init(5);
    const Context ctx{&host_backend(), nullptr, DType::f64};
    for (double temperature : {0.0, 0.9}) {
      RecomputeStepModel exact(net, ctx, 3, 40);
      CachedStepModel cached(net, ctx, 3, 40, 4);
      const std::vector<Result> a = generate(exact, 8, temperature), b = generate(cached, 8, temperature);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].tokens, b[i].tokens) << pattern << " request " << i << " temperature " << temperature;
        ASSERT_EQ(a[i].raw_logprobs.size(), b[i].raw_logprobs.size());
        for (size_t t = 0; t < a[i].raw_logprobs.size(); ++t)
          EXPECT_NEAR(a[i].raw_logprobs[t], b[i].raw_logprobs[t], 1e-9) << pattern << " request " << i << " token " << t;
      }
      EXPECT_EQ(cached.state().free_blocks(), cached.state().max_slots() * 10) << "every block back after the run";
    }
  }
}

}  // namespace
}  // namespace nemotron::rl
