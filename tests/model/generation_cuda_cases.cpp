// The generation engine on CUDA (test_cuda; skipped without a GPU): the same requests through
// engine::Engine over CachedStepModel on a GPU model and on a CPU model with the same float32 weights
// give the same greedy tokens (and log-probs to float32 rounding), and on the GPU batched
// generation (several slots, prefill beside decode, slots refilled) gives the same tokens as one
// request at a time, greedy and sampled. A model with every block kind (Mamba, attention with
// RoPE, MLP, MoE), and a DeciLM one (every sub-block kind). Decode steps as CUDA graphs
// (engine/decode_graphs.h) give the tokens of eager steps, batches padded to their bucket
// included, and the engine's async scheduling (a graph step launched, collected after the hooks)
// those of sync steps, log-probs to the bit. Compiled into test_model too, where it adds nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "block_configs.h"
#include "core/rng.h"
#include "harness.h"
#include "engine/cached_step_model.h"
#include "engine/engine.h"
#include "model/hybrid_model.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace nemotron::testing {
namespace {

#if NEMOTRON_CUDA
// Weights of unit-ish scale (well-separated logits, so float32 rounding cannot flip an argmax
// unless the code is wrong), the same by name on any backend.
void fill_generation_params(model::HybridModel& net, uint64_t seed) {
  for (model::Param* p : net.params().all()) {
    std::pair<double, double> range{-0.5, 0.5};
    if (p->name.ends_with("norm.weight") || p->name.ends_with("norm_f.weight") || p->name.ends_with(".D"))
      range = {0.5, 1.5};
    else if (p->name.ends_with("A_log")) range = {-1.0, 1.0};
    else if (p->name.ends_with("dt_bias")) range = {-3.0, -1.0};
    else if (p->name.ends_with("e_score_correction_bias")) range = {-0.3, 0.3};
    Tensor t = Tensor::empty(p->value.shape(), DType::f64);
    fill_uniform(t, Philox(seed, model::name_stream(p->name)), range.first, range.second);
    p->value.copy_from(t.to_host(p->value.dtype()));
  }
}

// `async`: with EngineOptions::async_scheduling and an on_token hook, which then runs while the
// next step (a graph replay) is in flight.
std::vector<engine::Result> generate(engine::StepModel& model, double temperature, bool async = false) {
  engine::EngineOptions o;
  o.async_scheduling = async;
  engine::Engine e(model, nullptr, o);
  for (int i = 0; i < 9; ++i) {
    engine::Request r;
    for (int t = 0; t < 3 + (i * 5) % 11; ++t) r.prompt.push_back((i * 13 + t * 7 + 2) % 61);
    r.params.temperature = temperature;
    r.params.max_new_tokens = 6 + (i * 7) % 11;
    r.params.seed = 3;
    e.add(r);
  }
  engine::RunHooks hooks;
  if (async) hooks.on_token = [](const engine::Result&, std::span<const float>) { return true; };
  return e.run({}, hooks);
}

void expect_same_tokens(const std::vector<engine::Result>& want, const std::vector<engine::Result>& got, const char* what,
                        double logprob_tol) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(want[i].tokens, got[i].tokens) << what << ": request " << i;
    if (want[i].tokens != got[i].tokens) continue;
    for (size_t t = 0; t < want[i].raw_logprobs.size(); ++t)
      EXPECT_NEAR(want[i].raw_logprobs[t], got[i].raw_logprobs[t], logprob_tol) << what << ": request " << i << " token " << t;
  }
}

// `cfg` (vocabulary 61, the prompts' range) on the GPU against the CPU, and batched against one
// request at a time on the GPU. Returns the greedy tokens generated.
size_t check_generation(model::ModelConfig cfg, const char* name) {
  cuda::CudaBackend gpu(0);
  cfg.vocab_size = 61;
  model::HybridModel cpu_net(cfg, host_backend(), DType::f32), gpu_net(cfg, gpu, DType::f32);
  fill_generation_params(cpu_net, 21);
  fill_generation_params(gpu_net, 21);
  const Context cpu_ctx{&host_backend(), nullptr, DType::f32}, gpu_ctx{&gpu, nullptr, DType::f32};

  engine::CachedStepModel cpu_batched(cpu_net, cpu_ctx, 4, 40, 4);
  engine::CachedStepModel gpu_batched(gpu_net, gpu_ctx, 4, 40, 4), gpu_single(gpu_net, gpu_ctx, 1, 40, 4);
  const std::vector<engine::Result> cpu_greedy = generate(cpu_batched, 0.0);
  const std::vector<engine::Result> gpu_greedy = generate(gpu_batched, 0.0);
  const std::string what = std::string(name) + ": ";
  expect_same_tokens(cpu_greedy, gpu_greedy, (what + "greedy, CUDA float32 against the CPU").c_str(), 1e-3);
  expect_same_tokens(gpu_greedy, generate(gpu_single, 0.0), (what + "greedy on CUDA, one at a time against batched").c_str(),
                     1e-4);
  expect_same_tokens(generate(gpu_batched, 0.9), generate(gpu_single, 0.9),
                     (what + "temperature 0.9 on CUDA, one at a time against batched").c_str(), 1e-4);
  EXPECT_EQ(gpu_batched.state().free_blocks(), 4 * 10) << what << "every KV block back after the runs";

  size_t generated = 0;
  for (const engine::Result& r : gpu_greedy) generated += r.tokens.size();
  EXPECT_GT(generated, 50u) << what;
  return generated;
}

TEST(GenerationCuda, GreedyTokensMatchTheCpuAndBatchedMatchesOneAtATime) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  model::ModelConfig cfg = hybrid_config("M*-EM*E");
  cfg.position_embedding_type = "rope", cfg.rope_theta = 10000.0;
  const size_t generated = check_generation(cfg, "Nemotron-H");
  std::printf("generation on CUDA float32: %zu greedy tokens over 9 requests equal to the CPU's\n", generated);
}

// DeciLM (B.1): GQA with per-block KV heads and Llama-3 scaled RoPE at each sequence's positions,
// no-op and linear attention, no-op and linear FFN, SwiGLU of two widths.
TEST(GenerationCuda, DeciLmGreedyTokensMatchTheCpuAndBatchedMatchesOneAtATime) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const size_t generated = check_generation(decilm_config(), "DeciLM");
  std::printf("DeciLM generation on CUDA float32: %zu greedy tokens over 9 requests equal to the CPU's\n", generated);
}

// Prefix sharing on the GPU (the forks' copies of the partial KV block and the Mamba states run
// there, the draws of a shared row go through extend_and_sample's gather): 3 prompts x 4 requests,
// prompt lengths on and off the block size, through 6 slots, give the tokens of the engine without
// sharing (log-probs to float32 rounding: a prefill of one prompt and of four copies may sum in
// another order), greedy and sampled, and every KV block comes back.
TEST(GenerationCuda, PrefixSharingGivesTheTokensOfTheEngineWithout) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::CudaBackend gpu(0);
  model::ModelConfig cfg = hybrid_config("M*-EM*E");
  cfg.position_embedding_type = "rope", cfg.rope_theta = 10000.0;
  cfg.vocab_size = 61;
  model::HybridModel net(cfg, gpu, DType::f32);
  fill_generation_params(net, 21);
  const Context ctx{&gpu, nullptr, DType::f32};
  auto run = [&](bool sharing, double temperature, int64_t* shared) {
    engine::CachedStepModel step(net, ctx, 6, 40, 4);
    engine::Engine e(step, nullptr, engine::EngineOptions{sharing});
    for (int p = 0; p < 3; ++p)
      for (int g = 0; g < 4; ++g) {
        engine::Request r;
        for (int t = 0; t < (p == 1 ? 6 : 8); ++t) r.prompt.push_back((p * 13 + t * 7 + 2) % 61);
        r.params.temperature = temperature;
        r.params.max_new_tokens = 1 + ((p + g) * 5) % 12;
        r.params.seed = 3;
        e.add(r);
      }
    std::vector<engine::Result> out = e.run();
    EXPECT_EQ(step.state().free_blocks(), 6 * 10) << "every KV block back after the run";
    *shared = e.stats().shared_prefill_tokens;
    return out;
  };
  for (double temperature : {0.0, 0.9}) {
    int64_t shared_off = 0, shared_on = 0;
    const std::vector<engine::Result> off = run(false, temperature, &shared_off), on = run(true, temperature, &shared_on);
    expect_same_tokens(off, on, temperature > 0 ? "prefix sharing, temperature 0.9" : "prefix sharing, greedy", 1e-4);
    EXPECT_EQ(shared_off, 0);
    EXPECT_GT(shared_on, 0);
  }
}

// Decode graphs against eager steps: 9 requests of different lengths through 4 slots (batches of
// 1 to 4 sequences, 3 padded to the bucket of 4, slots refilled between graph replays), greedy
// and sampled with a seed, give the same tokens and log-probs (float32: to rounding, a GEMM of 3
// rows and of 4 may round differently; bfloat16: the decode GEMMs are the skinny kernel, whose
// rows are batch-invariant). Graphs must really have replayed steps, and every KV block comes
// back (the padded rows' scratch block is not the engine's).
void check_graphs_match_eager(const std::string& pattern, DType dtype, double logprob_tol) {
  cuda::CudaBackend gpu(0);
  model::ModelConfig cfg = hybrid_config(pattern);
  cfg.position_embedding_type = "rope", cfg.rope_theta = 10000.0;
  cfg.vocab_size = 61;
  model::HybridModel net(cfg, gpu, dtype);
  fill_generation_params(net, 21);
  const Context ctx{&gpu, nullptr, dtype};
  const std::string what = pattern + (dtype == DType::bf16 ? " bfloat16" : " float32");
  for (double temperature : {0.0, 0.9}) {
    engine::set_decode_graphs_default(false);
    engine::CachedStepModel eager(net, ctx, 4, 40, 4);
    engine::set_decode_graphs_default(true);
    engine::CachedStepModel graphs(net, ctx, 4, 40, 4);
    EXPECT_FALSE(eager.uses_decode_graphs());
    const std::vector<engine::Result> want = generate(eager, temperature), got = generate(graphs, temperature);
    const std::string t = what + (temperature > 0 ? ", temperature 0.9" : ", greedy");
    expect_same_tokens(want, got, (t + ": decode graphs against eager steps").c_str(), logprob_tol);
    const int64_t replays = graphs.graph_replays();
    expect_same_tokens(got, generate(graphs, temperature, /*async=*/true),
                       (t + ": async scheduling against sync, both with graphs").c_str(), 0.0);
    EXPECT_GT(graphs.graph_replays(), replays + 10) << t << ": async scheduling replays the graphs";
    EXPECT_TRUE(graphs.uses_decode_graphs()) << t << ": a capture failed and turned graphs off";
    EXPECT_GT(graphs.graph_replays(), 10) << t;  // 19 on an H100: all but each bucket's first step
    EXPECT_EQ(eager.graph_replays(), 0) << t;
    EXPECT_EQ(graphs.state().free_blocks(), eager.state().free_blocks()) << t << ": every KV block back";
    EXPECT_EQ(graphs.max_slots(), eager.max_slots()) << t;
  }
}

// A batch of whole prompts prefills through the packed training kernel (flash in bf16, the simt
// one in float32; model/attention_mixer.cpp), any other through the paged decode kernel: prompts
// prefilled whole give the last-token logits of the same prompts fed one token each, then the
// rest (both paged), to the dtype's rounding (bf16: the flash kernel rounds the probabilities to
// bf16 before P V, and two layers of bf16 activations carry the difference to the logits; a
// token attending across sequences would be off by the logits' own scale). Lengths on and off the
// block size of 4; head_dim 16 for the flash kernel.
TEST(GenerationCuda, WholePromptPrefillGivesThePagedKernelsLogits) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::CudaBackend gpu(0);
  model::ModelConfig cfg = hybrid_config("*-*-");
  cfg.position_embedding_type = "rope", cfg.rope_theta = 10000.0;
  cfg.vocab_size = 61, cfg.head_dim = 16;
  const std::vector<std::vector<int32_t>> prompts = {{3, 7}, {1, 2, 3}, {9, 8, 7, 6}, {5, 4, 3, 2, 1, 0, 11, 12, 13},
                                                     {2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34}};
  const std::vector<int64_t> slots = {0, 1, 2, 3, 4};
  std::vector<std::vector<int32_t>> first, rest;
  for (const auto& p : prompts) first.push_back({p[0]}), rest.emplace_back(p.begin() + 1, p.end());
  for (DType dtype : {DType::f32, DType::bf16}) {
    model::HybridModel net(cfg, gpu, dtype);
    fill_generation_params(net, 5);
    const Context ctx{&gpu, nullptr, dtype};
    engine::CachedStepModel whole(net, ctx, 5, 40, 4), parts(net, ctx, 5, 40, 4);
    const std::vector<float> want = whole.extend(slots, prompts);
    parts.extend(slots, first);
    const std::vector<float> got = parts.extend(slots, rest);
    ASSERT_EQ(want.size(), got.size());
    const double tol = dtype == DType::bf16 ? 5e-2 : 1e-4;  // measured on an H100: 2.9e-2 and 7.3e-7
    double worst = 0, scale = 0;
    for (size_t i = 0; i < want.size(); ++i)
      worst = std::max(worst, std::abs(double(want[i]) - got[i]) / (1.0 + std::abs(double(got[i])))),
      scale = std::max(scale, std::abs(double(got[i])));
    EXPECT_LE(worst, tol) << dtype_name(dtype) << ": whole-prompt prefill against the paged kernel";
    EXPECT_GT(scale, 1.0) << dtype_name(dtype) << ": logits of unit scale at least";
    std::printf("whole-prompt prefill against paged, %s: worst difference %.2e (logits up to %.1f)\n", dtype_name(dtype),
                worst, scale);
  }
}

TEST(GenerationCuda, DecodeGraphsGiveTheTokensOfEagerStepsFloat32) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  check_graphs_match_eager("M*-M*-", DType::f32, 1e-4);
}

// With MoE: the expert GEMM reads its counts on the device (the bfloat16 grouped GEMM), so the
// step has nothing to wait for and captures whole.
TEST(GenerationCuda, DecodeGraphsGiveTheTokensOfEagerStepsBfloat16WithMoe) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  check_graphs_match_eager("M*-EM*E", DType::bf16, 2e-2);
}

// A step that cannot be captured (float32 MoE: the expert counts come to the host) runs eagerly,
// with the tokens of eager steps, and turns graphs off for that model.
TEST(GenerationCuda, DecodeGraphsFallBackToEagerStepsWhenAStepCannotBeCaptured) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::CudaBackend gpu(0);
  model::ModelConfig cfg = hybrid_config("M*-EM*E");
  cfg.vocab_size = 61;
  model::HybridModel net(cfg, gpu, DType::f32);
  fill_generation_params(net, 21);
  const Context ctx{&gpu, nullptr, DType::f32};
  engine::set_decode_graphs_default(false);
  engine::CachedStepModel eager(net, ctx, 4, 40, 4);
  engine::set_decode_graphs_default(true);
  engine::CachedStepModel graphs(net, ctx, 4, 40, 4);
  expect_same_tokens(generate(eager, 0.0), generate(graphs, 0.0), "float32 MoE, graphs off after a failed capture", 1e-4);
  EXPECT_FALSE(graphs.uses_decode_graphs());
  EXPECT_EQ(graphs.graph_replays(), 0);
}
#endif

}  // namespace
}  // namespace nemotron::testing
