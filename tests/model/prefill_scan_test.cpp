// A step of whole prompts prefilled through the chunked SSD scan (model/prefill_layout.h) equals
// the token-by-token prefill (HybridModel::set_prefill_by_scan(false)): the logits of the step,
// every slot's conv windows and SSM state, and the decode steps after it, including a forked
// (prefix-shared) continuation, on packed prompts of lengths that are and are not multiples of
// the chunk, in float64 (to 1e-10) and float32 (to rounding). Also the layout's own rules.
#include <gtest/gtest.h>

#include "block_configs.h"
#include "core/rng.h"
#include "harness.h"
#include "model/decode_state.h"
#include "model/hybrid_model.h"
#include "model/prefill_layout.h"

namespace nemotron::testing {
namespace {

std::unique_ptr<model::HybridModel> random_model(const model::ModelConfig& cfg, DType dtype) {
  auto net = std::make_unique<model::HybridModel>(cfg, host_backend(), dtype);
  for (model::Param* p : net->params().all()) {
    double lo = -0.5, hi = 0.5;
    if (p->name.ends_with("norm.weight") || p->name.ends_with("norm_f.weight") || p->name.ends_with(".D")) lo = 0.5, hi = 1.5;
    if (p->name.ends_with("A_log")) lo = -1.0, hi = 1.0;
    if (p->name.ends_with("dt_bias")) lo = -3.0, hi = -1.0;
    fill_uniform(p->value, Philox(5, model::name_stream(p->name)), lo, hi);
  }
  return net;
}

std::vector<int32_t> tokens(int64_t n, int64_t V, uint64_t seed) {
  Tensor t = Tensor::empty({n}, DType::f64);
  fill_uniform(t, Philox(seed), 0, static_cast<double>(V));
  std::vector<int32_t> ids;
  for (double v : t.to_f64_vector()) ids.push_back(static_cast<int32_t>(v));
  return ids;
}

// Worst relative error over every Mamba layer's per-slot state tensors.
double state_error(model::DecodeState& a, model::DecodeState& b) {
  double worst = 0;
  for (size_t l = 0; l < a.num_layers(); ++l) {
    if (!a.layer(l)) continue;
    const auto ta = a.layer(l)->slot_tensors(), tb = b.layer(l)->slot_tensors();
    EXPECT_EQ(ta.size(), tb.size());
    for (size_t i = 0; i < ta.size(); ++i) worst = std::max(worst, relative_error(ta[i], tb[i]));
  }
  return worst;
}

void scan_equals_decode(DType dt, double tol) {
  model::ModelConfig cfg = hybrid_config("M*-EM*E");  // chunk_size 4
  auto net = random_model(cfg, dt);
  Context ctx = cpu_context(dt);
  // Prompts of 9, 1, 4, 6 and 13 tokens in slots 4, 0, 2, 5, 1 (none of 3): lengths on and off
  // the chunk, a one-token prompt, the last one ragged.
  const std::vector<int64_t> slots{4, 0, 2, 5, 1}, lens{9, 1, 4, 6, 13};
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < lens.size(); ++i) prompts.push_back(tokens(lens[i], cfg.vocab_size, 30 + i));
  const model::DecodeConfig dc{6, 40, 4};
  net->set_prefill_by_scan(true);
  model::DecodeState scan = net->make_decode_state(dc);
  net->set_prefill_by_scan(false);
  model::DecodeState step = net->make_decode_state(dc);
  net->set_prefill_by_scan(true);
  {  // the layout really pads (the step's plan), so this compares the scan path
    model::DecodeBatch b = scan.begin_host(slots, lens);
    EXPECT_EQ(b.scan_chunk, 4);
    EXPECT_EQ(b.scan_tokens, 12 + 4 + 4 + 8 + 13);
    model::DecodeBatch d = step.begin_host(slots, lens);
    EXPECT_EQ(d.scan_chunk, 0);
    EXPECT_EQ(d.host_seq_idx.size(), 33u);  // the attention layout is there either way
  }
  const Tensor a = net->extend(ctx, scan, slots, prompts, dt), b = net->extend(ctx, step, slots, prompts, dt);
  EXPECT_LT(relative_error(a, b), tol) << "prefill logits";
  EXPECT_LT(state_error(scan, step), tol) << "conv windows and SSM states after the prefill";
  // A prefix-shared continuation: slot 3 forks slot 2 (4 tokens), then every slot decodes.
  scan.fork(ctx, {{2, 3}});
  step.fork(ctx, {{2, 3}});
  std::vector<int64_t> all = slots;
  all.push_back(3);
  for (int k = 0; k < 3; ++k) {
    std::vector<std::vector<int32_t>> next;
    for (size_t i = 0; i < all.size(); ++i) next.push_back({static_cast<int32_t>((7 * i + 3 * k) % cfg.vocab_size)});
    const Tensor x = net->extend(ctx, scan, all, next, dt), y = net->extend(ctx, step, all, next, dt);
    EXPECT_LT(relative_error(x, y), tol) << "decode step " << k;
  }
  EXPECT_LT(state_error(scan, step), tol) << "states after the decode steps";
}

TEST(PrefillScan, whole_prompts_through_the_scan_equal_token_by_token_f64) { scan_equals_decode(DType::f64, 1e-10); }
TEST(PrefillScan, whole_prompts_through_the_scan_equal_token_by_token_f32) { scan_equals_decode(DType::f32, 2e-5); }

// Only whole prompts take the scan: a step with a cached sequence (a prompt beside a running one)
// or of single tokens carries no layout.
TEST(PrefillScan, only_whole_prompt_steps_get_a_layout) {
  model::ModelConfig cfg = hybrid_config("M*-");
  auto net = random_model(cfg, DType::f64);
  Context ctx = cpu_context(DType::f64);
  model::DecodeState st = net->make_decode_state({3, 40, 4});
  EXPECT_EQ(st.begin_host({0, 1}, {1, 1}).scan_tokens, 0);
  net->extend(ctx, st, {0}, {{1, 2, 3}});
  const model::DecodeBatch mixed = st.begin_host({0, 1}, {1, 5});
  EXPECT_EQ(mixed.scan_tokens, 0);
  EXPECT_TRUE(mixed.host_seq_idx.empty());
}

// The chunk: the model's, halved (not below 16) while padding would exceed a quarter of the tokens.
TEST(PrefillScan, chunk_halves_while_padding_dominates) {
  EXPECT_EQ(model::prefill_scan_chunk({128, 128, 37}, 128), 128);  // no padding but the last
  EXPECT_EQ(model::prefill_scan_chunk({300}, 128), 128);           // one sequence: never padded
  EXPECT_EQ(model::prefill_scan_chunk({10, 10, 10, 10}, 128), 16); // short prompts
  EXPECT_EQ(model::prefill_scan_chunk({100, 100, 100}, 128), 128); // 56 of 300: under a quarter
  EXPECT_EQ(model::prefill_scan_chunk({100, 70, 100}, 128), 32);   // 86 pads at 128 and 64, 54 at 32
}

}  // namespace
}  // namespace nemotron::testing
