// Incremental decoding on CUDA (test_cuda; skipped without a GPU): the hybrid model on the GPU,
// fed prompts then single tokens (several slots of different lengths, prefill chunks beside decode
// steps, in one extend call), returns at every step the logits that the CPU float64 model's
// training-style forward gives over the whole sequence; float32 and bfloat16. It exercises the
// decode kernels (paged KV write and attention, conv window, SSM state) with the index tensors on
// the device. (tests/model/decode_test.cpp proves the same equality on the CPU, to 1e-10.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "block_configs.h"
#include "core/rng.h"
#include "harness.h"
#include "model/hybrid_model.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace nemotron::testing {
namespace {

#if NEMOTRON_CUDA
std::pair<double, double> decode_param_range(const std::string& name) {
  if (name.ends_with("norm.weight") || name.ends_with("norm_f.weight") || name.ends_with(".D")) return {0.5, 1.5};
  if (name.ends_with("A_log")) return {-1.0, 1.0};
  if (name.ends_with("dt_bias")) return {-3.0, -1.0};
  if (name.ends_with("e_score_correction_bias")) return {-0.3, 0.3};
  return {-0.5, 0.5};
}

// The same random parameters (by name) into a model on any backend and dtype: drawn in float64
// on the host, then rounded to each parameter's dtype.
void fill_params(model::HybridModel& net, uint64_t seed) {
  for (model::Param* p : net.params().all()) {
    auto [lo, hi] = decode_param_range(p->name);
    Tensor t = Tensor::empty(p->value.shape(), DType::f64);
    fill_uniform(t, Philox(seed, model::name_stream(p->name)), lo, hi);
    p->value.copy_from(t.to_host(p->value.dtype()));
  }
}

std::vector<int32_t> decode_tokens(int64_t n, int64_t V, uint64_t seed) {
  Tensor t = Tensor::empty({n}, DType::f64);
  fill_uniform(t, Philox(seed), 0, static_cast<double>(V));
  std::vector<int32_t> ids;
  for (double v : t.to_f64_vector()) ids.push_back(static_cast<int32_t>(v));
  return ids;
}

// Slots 3, 0, 2 advance together by `schedule` (tokens per slot per call): prompts of different
// lengths, then a chunk beside single-token steps; every returned row is compared with the CPU
// float64 full-sequence logits at that position. Returns the worst relative error of decoding and,
// as the yardstick of this dtype's rounding, of the same GPU model's training-style forward over
// the whole sequences against the same float64 logits.
struct DecodeErrors {
  double decode = 0, full = 0;
};

DecodeErrors decode_errors(const model::ModelConfig& cfg, DType dt, cuda::CudaBackend& gpu) {
  model::HybridModel ref(cfg, host_backend(), DType::f64), net(cfg, gpu, dt);
  fill_params(ref, 7);
  fill_params(net, 7);
  Context ref_ctx = cpu_context(DType::f64), ctx{&gpu, nullptr, dt};
  const std::vector<int64_t> slots{3, 0, 2};
  const std::vector<std::vector<int64_t>> schedule{{5, 1, 9}, {1, 3, 1}, {1, 1, 1}, {4, 1, 1}, {1, 6, 1}, {1, 1, 1}};
  std::vector<std::vector<int32_t>> seqs;
  for (size_t s = 0; s < slots.size(); ++s) {
    int64_t n = 0;
    for (const auto& step : schedule) n += step[s];
    seqs.push_back(decode_tokens(n, cfg.vocab_size, 11 + s));
  }
  std::vector<Tensor> want;
  DecodeErrors e;
  for (const auto& seq : seqs) {
    const int64_t T = static_cast<int64_t>(seq.size());
    const Tensor ids = Tensor::from_vector<int32_t>({1, T}, seq);
    want.push_back(ref.logits(ref_ctx, ids).view({T, cfg.vocab_size}));
    const Tensor full = net.logits(ctx, ids.to(gpu)).view({T, cfg.vocab_size});
    for (int64_t t = 0; t < T; ++t)
      e.full = std::max(e.full, relative_error(full.slice(t, t + 1), want.back().slice(t, t + 1)));
  }
  model::DecodeState st = net.make_decode_state({4, 40, 4});
  std::vector<int64_t> done(slots.size(), 0);
  for (const auto& step : schedule) {
    std::vector<std::vector<int32_t>> toks;
    for (size_t s = 0; s < slots.size(); ++s)
      toks.emplace_back(seqs[s].begin() + done[s], seqs[s].begin() + done[s] + step[s]);
    Tensor got = net.extend(ctx, st, slots, toks);
    EXPECT_TRUE(got.device().is_cuda());
    for (size_t s = 0; s < slots.size(); ++s) {
      done[s] += step[s];
      const double err = relative_error(got.slice(s, s + 1), want[s].slice(done[s] - 1, done[s]));
      e.decode = std::max(e.decode, err);
    }
  }
  return e;
}

// Every block kind (Mamba, attention with RoPE, MLP, MoE) in float32; in bfloat16 a stack without
// MoE, whose top-k choice can flip between float64 and bf16 router scores on a toy model. Decoding
// must be as close to float64 as the training forward in the same dtype (a wrong index, block or
// state gives errors of order 1); the fixed floors keep a lucky forward from making the bound tiny.
TEST(HybridDecodeCuda, slots_prefill_and_steps_match_cpu_full_logits) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::CudaBackend gpu(0);
  model::ModelConfig all = hybrid_config("M*-EM*E");
  all.position_embedding_type = "rope", all.rope_theta = 10000.0;
  const DecodeErrors f32 = decode_errors(all, DType::f32, gpu);
  EXPECT_LT(f32.decode, std::max(4 * f32.full, 1e-4)) << "float32, M*-EM*E with RoPE; training forward " << f32.full;
  model::ModelConfig dense = hybrid_config("M*-M*-");
  const DecodeErrors bf16 = decode_errors(dense, DType::bf16, gpu);
  EXPECT_LT(bf16.decode, std::max(4 * bf16.full, 2e-2)) << "bfloat16, M*-M*-; training forward " << bf16.full;
  std::printf("decode on CUDA against CPU float64 logits (training forward): float32 %.3g (%.3g), "
              "bfloat16 %.3g (%.3g)\n",
              f32.decode, f32.full, bf16.decode, bf16.full);
}

// Prompts through the chunked scan (model/prefill_layout.h) on the GPU equal the token-by-token
// prefill on the GPU (set_prefill_by_scan(false)): the step's logits, every Mamba slot's conv
// windows and SSM state, and the steps after it. Whole prompts of 9, 1, 4, 6 and 13 tokens, chunk 4
// (rows padded to 13, a single token beside them); after a fork, a mixed step of continued
// sequences (one the fork), decodes and a new prompt; then decode steps. float32 to rounding,
// bfloat16 to its rounding of the scan's operands (the state stays float32 in both paths).
double worst_state_error(model::DecodeState& a, model::DecodeState& b) {
  double worst = 0;
  for (size_t l = 0; l < a.num_layers(); ++l) {
    if (!a.layer(l)) continue;
    const auto ta = a.layer(l)->slot_tensors(), tb = b.layer(l)->slot_tensors();
    for (size_t i = 0; i < ta.size(); ++i) worst = std::max(worst, relative_error(ta[i], tb[i]));
  }
  return worst;
}

TEST(HybridDecodeCuda, prompts_through_the_scan_equal_token_by_token) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::CudaBackend gpu(0);
  const model::ModelConfig cfg = hybrid_config("M*-M*-");
  for (DType dt : {DType::f32, DType::bf16}) {
    model::HybridModel net(cfg, gpu, dt);
    fill_params(net, 7);
    Context ctx{&gpu, nullptr, dt};
    const std::vector<int64_t> slots{4, 0, 2, 5, 1}, lens{9, 1, 4, 6, 13};
    std::vector<std::vector<int32_t>> prompts;
    for (size_t i = 0; i < lens.size(); ++i) prompts.push_back(decode_tokens(lens[i], cfg.vocab_size, 30 + i));
    net.set_prefill_by_scan(true);
    model::DecodeState scan = net.make_decode_state({8, 60, 4});
    net.set_prefill_by_scan(false);
    model::DecodeState step = net.make_decode_state({8, 60, 4});
    net.set_prefill_by_scan(true);
    const double tol = dt == DType::f32 ? 2e-5 : 3e-2;
    const Tensor a = net.extend(ctx, scan, slots, prompts), b = net.extend(ctx, step, slots, prompts);
    EXPECT_LT(relative_error(a, b), tol) << dtype_name(dt) << " prefill logits";
    const double states = worst_state_error(scan, step);
    EXPECT_LT(states, tol) << dtype_name(dt) << " states after the prefill";
    scan.fork(ctx, {{2, 3}});
    step.fork(ctx, {{2, 3}});
    const std::vector<int64_t> mixed_slots{0, 4, 3, 2, 6, 1}, mixed_lens{1, 5, 3, 1, 7, 2};
    std::vector<std::vector<int32_t>> mixed;
    for (size_t i = 0; i < mixed_lens.size(); ++i)
      mixed.push_back(decode_tokens(mixed_lens[i], cfg.vocab_size, 50 + i));
    const double mixed_err =
        relative_error(net.extend(ctx, scan, mixed_slots, mixed), net.extend(ctx, step, mixed_slots, mixed));
    EXPECT_LT(mixed_err, tol) << dtype_name(dt) << " mixed step logits";
    const double mixed_states = worst_state_error(scan, step);
    EXPECT_LT(mixed_states, tol) << dtype_name(dt) << " states after the mixed step";
    const std::vector<int64_t> all{0, 1, 2, 3, 4, 5, 6};
    double steps = 0;
    for (int k = 0; k < 3; ++k) {
      std::vector<std::vector<int32_t>> next;
      for (size_t i = 0; i < all.size(); ++i) next.push_back({static_cast<int32_t>((7 * i + 3 * k) % cfg.vocab_size)});
      steps = std::max(steps, relative_error(net.extend(ctx, scan, all, next), net.extend(ctx, step, all, next)));
    }
    EXPECT_LT(steps, tol) << dtype_name(dt) << " decode steps after a fork";
    std::printf("prefill by scan vs token by token on CUDA, %s: logits %.3g, states %.3g, mixed step %.3g "
                "(states %.3g), later steps %.3g\n",
                dtype_name(dt), relative_error(a, b), states, mixed_err, mixed_states, steps);
  }
}
#endif

}  // namespace
}  // namespace nemotron::testing
