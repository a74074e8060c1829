// Prompts prefilled through the chunked SSD scan (model/prefill_layout.h) equal the token-by-token
// prefill (HybridModel::set_prefill_by_scan(false)): the logits of the step, every slot's conv
// windows and SSM state, and the decode steps after it, for a step of whole prompts (lengths on
// and off the chunk, a one-token prompt), then a step that mixes continued sequences, a forked
// (prefix-shared) one, decodes and a new prompt, in float64 (to 1e-10) and float32 (to rounding).
// Also the layout's own rules.
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

// One step on both states; the logits' error.
double step_both(model::HybridModel& net, Context& ctx, model::DecodeState& scan, model::DecodeState& step,
                 const std::vector<int64_t>& slots, const std::vector<std::vector<int32_t>>& toks, DType dt) {
  return relative_error(net.extend(ctx, scan, slots, toks, dt), net.extend(ctx, step, slots, toks, dt));
}

void scan_equals_decode(DType dt, double tol) {
  model::ModelConfig cfg = hybrid_config("M*-EM*E");  // chunk_size 4
  auto net = random_model(cfg, dt);
  Context ctx = cpu_context(dt);
  // Prompts of 9, 1, 4, 6 and 13 tokens in slots 4, 0, 2, 5, 1 (none of 3, 6, 7): lengths on and
  // off the chunk, a one-token prompt (a single token: ssd_decode), rows padded to 13.
  const std::vector<int64_t> slots{4, 0, 2, 5, 1}, lens{9, 1, 4, 6, 13};
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < lens.size(); ++i) prompts.push_back(tokens(lens[i], cfg.vocab_size, 30 + i));
  const model::DecodeConfig dc{8, 60, 4};
  net->set_prefill_by_scan(true);
  model::DecodeState scan = net->make_decode_state(dc);
  net->set_prefill_by_scan(false);
  model::DecodeState step = net->make_decode_state(dc);
  net->set_prefill_by_scan(true);
  {  // the layout really pads (the step's plan), so this compares the scan path
    model::DecodeBatch b = scan.begin_host(slots, lens);
    EXPECT_EQ(b.scan_chunk, 4);
    EXPECT_EQ(b.scan_seqs, 4);
    EXPECT_EQ(b.scan_tokens, 4 * 13);
    EXPECT_TRUE(b.host_scan_init_slots.empty());  // every slot starts empty
    EXPECT_EQ(b.host_decode_slot_ids, std::vector<int32_t>{0});
    // Rows of 13 at chunk 4: 4 chunks each, the slot at the last.
    EXPECT_EQ(b.host_scan_chunk_slots,
              (std::vector<int32_t>{-1, -1, -1, 4, -1, -1, -1, 2, -1, -1, -1, 5, -1, -1, -1, 1}));
    model::DecodeBatch d = step.begin_host(slots, lens);
    EXPECT_EQ(d.scan_chunk, 0);
    EXPECT_EQ(d.host_seq_idx.size(), 33u);  // the attention layout is there either way
  }
  EXPECT_LT(step_both(*net, ctx, scan, step, slots, prompts, dt), tol) << "prefill logits";
  EXPECT_LT(state_error(scan, step), tol) << "conv windows and SSM states after the prefill";
  // A prefix-shared continuation: slot 3 forks slot 2 (4 tokens). Then a mixed step: slots 4 and 1
  // continue with 5 and 2 tokens, the fork 3 with its own 3, slots 0 and 2 decode, a new prompt of
  // 7 tokens in slot 6 (slot 5 sits out).
  scan.fork(ctx, {{2, 3}});
  step.fork(ctx, {{2, 3}});
  const std::vector<int64_t> mixed_slots{0, 4, 3, 2, 6, 1}, mixed_lens{1, 5, 3, 1, 7, 2};
  std::vector<std::vector<int32_t>> mixed;
  for (size_t i = 0; i < mixed_lens.size(); ++i) mixed.push_back(tokens(mixed_lens[i], cfg.vocab_size, 50 + i));
  {
    model::DecodeBatch b = scan.begin_host(mixed_slots, mixed_lens);
    EXPECT_EQ(b.scan_seqs, 4);
    EXPECT_EQ(b.scan_len, 7);
    EXPECT_EQ(b.host_scan_init_slots, (std::vector<int32_t>{4, 3, 6, 1}));
    EXPECT_EQ(b.host_decode_slot_ids, (std::vector<int32_t>{0, 2}));
    EXPECT_EQ(b.host_decode_cu, (std::vector<int32_t>{0, 1, 2}));
    EXPECT_TRUE(b.host_seq_idx.empty());  // attention: not whole prompts
  }
  EXPECT_LT(step_both(*net, ctx, scan, step, mixed_slots, mixed, dt), tol) << "mixed step logits";
  EXPECT_LT(state_error(scan, step), tol) << "states after the mixed step";
  std::vector<int64_t> all{0, 1, 2, 3, 4, 5, 6};
  for (int k = 0; k < 3; ++k) {
    std::vector<std::vector<int32_t>> next;
    for (size_t i = 0; i < all.size(); ++i) next.push_back({static_cast<int32_t>((7 * i + 3 * k) % cfg.vocab_size)});
    EXPECT_LT(step_both(*net, ctx, scan, step, all, next, dt), tol) << "decode step " << k;
  }
  EXPECT_LT(state_error(scan, step), tol) << "states after the decode steps";
}

TEST(PrefillScan, prompts_through_the_scan_equal_token_by_token_f64) { scan_equals_decode(DType::f64, 1e-10); }
TEST(PrefillScan, prompts_through_the_scan_equal_token_by_token_f32) { scan_equals_decode(DType::f32, 2e-5); }

// A decode step carries no layout; a prompt beside a running sequence does (the scan's rows and
// the decode's), but not attention's whole-prompt ids; equal prompts alone are taken as they are.
TEST(PrefillScan, which_steps_get_a_layout) {
  model::ModelConfig cfg = hybrid_config("M*-");
  auto net = random_model(cfg, DType::f64);
  Context ctx = cpu_context(DType::f64);
  model::DecodeState st = net->make_decode_state({3, 40, 4});
  EXPECT_EQ(st.begin_host({0, 1}, {1, 1}).scan_tokens, 0);
  const model::DecodeBatch equal = st.begin_host({0, 1}, {6, 6});
  EXPECT_EQ(equal.scan_tokens, 12);
  EXPECT_TRUE(equal.host_scan_rows.empty());
  EXPECT_EQ(equal.host_seq_idx.size(), 12u);
  net->extend(ctx, st, {0}, {{1, 2, 3}});
  const model::DecodeBatch mixed = st.begin_host({0, 1}, {1, 5});
  EXPECT_EQ(mixed.scan_tokens, 5);
  EXPECT_EQ(mixed.host_scan_rows, (std::vector<int32_t>{1, 2, 3, 4, 5, 0}));
  EXPECT_EQ(mixed.host_scan_unpad, (std::vector<int32_t>{5, 0, 1, 2, 3, 4}));
  EXPECT_TRUE(mixed.host_scan_init_slots.empty());  // the prompt starts empty; the decode reads its slot itself
  EXPECT_TRUE(mixed.host_seq_idx.empty());
}

}  // namespace
}  // namespace nemotron::testing
