// Prefix sharing (EngineOptions::prefix_sharing, DecodeState::fork): the G requests of a prompt
// prefill it once and fork. A fork continues exactly as its source, bit for bit. The engine's
// results with sharing equal those without, token for token and in log-probs to float rounding
// (not to the bit: without sharing the G copies are G rows of one packed prefill, and OpenBLAS
// rounds a row by its position in the batch, so the copies already differ from each other), on
// hybrid stacks of Mamba, attention, MLP and MoE
// layers in float32 and float64, for G = 1, 2, 4, prompts whose length is and is not a multiple of
// the KV block size, sequences ending at different lengths (a leader done after one token
// releases its slot while its followers hold the shared blocks) and more requests than slots (a
// group split over two admission passes). The block accounting: shared blocks are held once,
// released when their last holder goes, and every block comes back.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/cached_step_model.h"
#include "engine/engine.h"
#include "engine/recompute_step_model.h"
#include "model/block_configs.h"
#include "test_util.h"

namespace nemotron::engine {
namespace {

constexpr int64_t kBlock = 4;

// `prompts` prompts of lengths 8 (two blocks) and 6 (one and a half), each asked G times in a row
// with distinct ids (distinct sampling streams) and max_new_tokens 1, 5, 3, 7, ...: the group's
// first request (its leader) may finish at its first token.
std::vector<Request> grouped_requests(int prompts, int G) {
  std::vector<Request> out;
  for (int p = 0; p < prompts; ++p) {
    const int len = p % 2 == 0 ? 8 : 6;
    for (int g = 0; g < G; ++g) {
      Request r;
      for (int t = 0; t < len; ++t) r.prompt.push_back((p * 11 + t * 5 + 3) % 29);
      r.params.temperature = 0.9;
      r.params.seed = 17;
      r.params.max_new_tokens = 1 + ((p + g) * 2) % 8;
      r.params.stop_token_ids = {28};
      out.push_back(r);
    }
  }
  return out;
}

struct Outcome {
  std::vector<Result> results;
  EngineStats stats;
};

Outcome run(StepModel& model, const std::vector<Request>& reqs, bool sharing) {
  Engine e(model, nullptr, EngineOptions{sharing});
  for (const Request& r : reqs) e.add(r);
  Outcome out;
  out.results = e.run();
  out.stats = e.stats();
  return out;
}

// Tokens and finish reasons equal; log-probs within `tol` (0: to the bit).
void expect_same(const Outcome& off, const Outcome& on, const std::string& what, double tol) {
  ASSERT_EQ(off.results.size(), on.results.size()) << what;
  for (size_t i = 0; i < off.results.size(); ++i) {
    const Result &a = off.results[i], &b = on.results[i];
    EXPECT_EQ(a.tokens, b.tokens) << what << " request " << i;
    EXPECT_EQ(a.finish, b.finish) << what << " request " << i;
    ASSERT_EQ(a.logprobs.size(), b.logprobs.size()) << what << " request " << i;
    for (size_t t = 0; t < a.logprobs.size(); ++t) {
      EXPECT_NEAR(a.logprobs[t], b.logprobs[t], tol) << what << " request " << i << " token " << t;
      EXPECT_NEAR(a.raw_logprobs[t], b.raw_logprobs[t], tol) << what << " request " << i << " token " << t;
    }
  }
}

TEST(PrefixSharing, CachedEngineGivesTheResultsWithout) {
  for (const std::string pattern : {"M*-E", "*M-M*E"}) {
    for (DType dt : {DType::f32, DType::f64}) {
      model::ModelConfig cfg = testing::hybrid_config(pattern);
      cfg.vocab_size = 29;
      model::HybridModel net(cfg, host_backend(), dt);
      net.init(5);
      const Context ctx{&host_backend(), nullptr, dt};
      for (int G : {1, 2, 4}) {
        for (int64_t slots : {int64_t{3} * G, int64_t{5}}) {  // whole groups per pass; groups split over passes
          const std::string what = fmt::format("{} {} G={} slots={}", pattern, dtype_name(dt), G, slots);
          const std::vector<Request> reqs = grouped_requests(3, G);
          CachedStepModel a(net, ctx, slots, 32, kBlock), b(net, ctx, slots, 32, kBlock);
          const Outcome off = run(a, reqs, false), on = run(b, reqs, true);
          expect_same(off, on, what, dt == DType::f64 ? 1e-12 : 2e-6);
          EXPECT_EQ(off.stats.shared_prefill_tokens, 0) << what;
          EXPECT_EQ(on.stats.prefill_tokens + on.stats.shared_prefill_tokens, off.stats.prefill_tokens) << what;
          if (G > 1 && slots == 3 * G) {
            EXPECT_EQ(on.stats.shared_prefill_tokens, (8 + 6 + 8) * (G - 1)) << what;
          } else if (G == 1) {
            EXPECT_EQ(on.stats.shared_prefill_tokens, 0) << what;
          }
          EXPECT_EQ(b.state().free_blocks(), slots * (32 / kBlock)) << what << ": every block back after the run";
        }
      }
    }
  }
}

TEST(PrefixSharing, RecomputeModelForksExactly) {
  model::ModelConfig cfg = testing::hybrid_config("M*-E");
  cfg.vocab_size = 29;
  model::HybridModel net(cfg, host_backend(), DType::f32);
  net.init(3);
  const Context ctx{&host_backend(), nullptr, DType::f32};
  const std::vector<Request> reqs = grouped_requests(2, 3);
  RecomputeStepModel a(net, ctx, 6, 32), b(net, ctx, 6, 32);
  const Outcome off = run(a, reqs, false), on = run(b, reqs, true);
  expect_same(off, on, "recompute", 0.0);  // each slot recomputed alone: exact
  EXPECT_EQ(on.stats.shared_prefill_tokens, (8 + 6) * 2);
}

// The block accounting under DecodeState::fork, driven directly.
TEST(PrefixSharing, ForkSharesFullBlocksAndCopiesThePartialOne) {
  model::ModelConfig cfg = testing::hybrid_config("M*-E");
  cfg.vocab_size = 29;
  model::HybridModel net(cfg, host_backend(), DType::f64);
  net.init(7);
  Context ctx{&host_backend(), nullptr, DType::f64};
  model::DecodeState st = net.make_decode_state({4, 32, kBlock, 0});
  const int64_t all = st.free_blocks();
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};  // 2 full blocks + 2 tokens
  net.extend(ctx, st, {0}, {prompt}, DType::f64);
  EXPECT_EQ(st.free_blocks(), all - 3);
  st.fork(ctx, {{0, 1}, {0, 2}});
  EXPECT_EQ(st.length(1), 10);
  EXPECT_EQ(st.blocks_held(1), 3);
  EXPECT_EQ(st.free_blocks(), all - 5) << "2 shared blocks held once, one partial block copied per fork";
  EXPECT_THROW(st.fork(ctx, {{0, 1}}), Error) << "onto a slot that holds a sequence";
  EXPECT_THROW(st.fork(ctx, {{3, 1}}), Error) << "from an empty slot";

  // Each fork continues like its source: the same next token gives the same logits, bit for bit
  // (each slot alone: in one packed call a row's position can change a GEMM's rounding).
  const int64_t V = cfg.vocab_size;
  const Tensor z0 = net.extend(ctx, st, {0}, {{11}}, DType::f64);
  for (int64_t slot : {1, 2}) {
    const Tensor z = net.extend(ctx, st, {slot}, {{11}}, DType::f64);
    for (int64_t v = 0; v < V; ++v) EXPECT_EQ(z0.data<double>()[v], z.data<double>()[v]) << "slot " << slot << ", logit " << v;
  }
  // The source goes first: the shared blocks stay with the forks until the last one goes.
  st.release(0);
  EXPECT_EQ(st.free_blocks(), all - 4);
  const Tensor z1 = net.extend(ctx, st, {1}, {{12}}, DType::f64);
  st.release(1);
  EXPECT_EQ(st.free_blocks(), all - 3);
  const Tensor z2 = net.extend(ctx, st, {2}, {{12}}, DType::f64);
  for (int64_t v = 0; v < V; ++v) EXPECT_EQ(z1.data<double>()[v], z2.data<double>()[v]) << "logit " << v;
  st.release(2);
  EXPECT_EQ(st.free_blocks(), all);
}

}  // namespace
}  // namespace nemotron::engine
