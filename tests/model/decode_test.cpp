// Incremental decoding of the hybrid model (HybridModel::extend with a DecodeState), on stacks
// holding every block kind (Mamba, attention with and without RoPE, MLP, MoE):
//   * a prompt prefilled, then token-by-token steps, give at every position the logits of
//     HybridModel::logits over the whole sequence (float64 to 1e-10, float32 to rounding);
//   * several slots of different lengths and chunk sizes in one call equal each slot alone;
//   * release + reuse of a slot starts clean;
//   * running out of KV blocks is refused by can_admit and by extend, changing nothing;
//   * a frozen model (generation's) fuses q/k/v_proj and SwiGLU's gate/up_proj into one weight
//     each (model/fused_linears.h) and decodes as the trainable model with the same values.
#include <gtest/gtest.h>

#include <chrono>

#include "block_configs.h"
#include "core/rng.h"
#include "harness.h"
#include "model/hybrid_model.h"

namespace nemotron::testing {
namespace {

std::pair<double, double> range_of(const std::string& name) {
  if (name.ends_with("norm.weight") || name.ends_with("norm_f.weight") || name.ends_with(".D")) return {0.5, 1.5};
  if (name.ends_with("A_log")) return {-1.0, 1.0};
  if (name.ends_with("dt_bias")) return {-3.0, -1.0};
  if (name.ends_with("e_score_correction_bias")) return {-0.3, 0.3};
  return {-0.5, 0.5};
}

// A model whose parameters are random non-zero values that depend on (seed, name) only, so the
// float32 and float64 models hold the same numbers up to rounding.
std::unique_ptr<model::HybridModel> random_model(const model::ModelConfig& cfg, DType dtype, uint64_t seed = 7) {
  auto net = std::make_unique<model::HybridModel>(cfg, host_backend(), dtype);
  for (model::Param* p : net->params().all()) {
    auto [lo, hi] = range_of(p->name);
    fill_uniform(p->value, Philox(seed, model::name_stream(p->name)), lo, hi);
  }
  return net;
}

model::ModelConfig every_kind(bool rope) {
  model::ModelConfig c = hybrid_config("M*-EM*E");
  if (rope) c.position_embedding_type = "rope", c.rope_theta = 10000.0;
  return c;
}

std::vector<int32_t> random_tokens(int64_t n, int64_t V, uint64_t seed) {
  Tensor t = Tensor::empty({n}, DType::f64);
  fill_uniform(t, Philox(seed), 0, static_cast<double>(V));
  std::vector<int32_t> ids;
  for (double v : t.to_f64_vector()) ids.push_back(static_cast<int32_t>(v));
  return ids;
}

// Logits [T, V] of the whole sequence through the training-style forward.
Tensor full_logits(model::HybridModel& net, Context& ctx, const std::vector<int32_t>& seq) {
  const int64_t T = static_cast<int64_t>(seq.size());
  return net.logits(ctx, Tensor::from_vector<int32_t>({1, T}, seq)).view({T, net.config().vocab_size});
}

Tensor row(const Tensor& t, int64_t r) { return t.slice(r, r + 1); }

double tolerance(DType dt) { return dt == DType::f64 ? 1e-10 : 2e-5; }

void prefill_then_steps(DType dt, bool rope, const model::ModelConfig* given = nullptr) {
  model::ModelConfig cfg = given ? *given : every_kind(rope);
  auto net = random_model(cfg, dt);
  Context ctx = cpu_context(dt);
  const std::vector<int32_t> seq = random_tokens(19, cfg.vocab_size, 3);
  const int64_t prompt = 7;
  Tensor want = full_logits(*net, ctx, seq);
  model::DecodeState st = net->make_decode_state({2, 32, 4});
  const int64_t slot = 1;
  Tensor got = net->extend(ctx, st, {slot}, {std::vector<int32_t>(seq.begin(), seq.begin() + prompt)}, dt);
  ASSERT_EQ(got.shape(), Shape({1, cfg.vocab_size}));
  EXPECT_LT(relative_error(got, row(want, prompt - 1)), tolerance(dt)) << "after the prompt";
  for (int64_t t = prompt; t < static_cast<int64_t>(seq.size()); ++t) {
    got = net->extend(ctx, st, {slot}, {{seq[t]}}, dt);
    EXPECT_LT(relative_error(got, row(want, t)), tolerance(dt)) << "position " << t;
  }
  EXPECT_EQ(st.length(slot), static_cast<int64_t>(seq.size()));
  EXPECT_EQ(st.length(0), 0);
}

TEST(HybridDecode, prefill_then_steps_match_full_logits_f64) { prefill_then_steps(DType::f64, false); }
TEST(HybridDecode, prefill_then_steps_match_full_logits_f32) { prefill_then_steps(DType::f32, false); }
TEST(HybridDecode, prefill_then_steps_match_full_logits_with_rope_f64) { prefill_then_steps(DType::f64, true); }
TEST(HybridDecode, prefill_then_steps_match_full_logits_with_rope_f32) { prefill_then_steps(DType::f32, true); }

// Parameter values written after construction (as loads and refits write them, in place) land in
// the fused weights: q/k/v_proj and gate/up_proj sit back to back, and prefill plus steps give the
// trainable model's logits.
TEST(HybridDecode, frozen_model_fuses_projections_and_decodes_as_trainable) {
  for (const model::ModelConfig& cfg : {decilm_config(), every_kind(true)})
  for (DType dt : {DType::f64, DType::f32}) {
    auto net = random_model(cfg, dt);
    model::HybridModel frozen(cfg, host_backend(), dt, {}, /*trainable=*/false);
    for (model::Param* p : frozen.params().all()) {
      auto [lo, hi] = range_of(p->name);
      fill_uniform(p->value, Philox(7, model::name_stream(p->name)), lo, hi);
    }
    auto adjacent = [&](const std::string& a, const std::string& b) {
      const model::Param *pa = frozen.params().find(a), *pb = frozen.params().find(b);
      return pa && pb && static_cast<const char*>(pa->value.raw()) + pa->value.nbytes() == pb->value.raw();
    };
    const std::string attn = cfg.model_type == "nemotron-nas" ? "model.layers.0.self_attn." : "backbone.layers.1.mixer.";
    EXPECT_TRUE(adjacent(attn + "q_proj.weight", attn + "k_proj.weight")) << attn;
    EXPECT_TRUE(adjacent(attn + "k_proj.weight", attn + "v_proj.weight")) << attn;
    if (cfg.model_type == "nemotron-nas")
      EXPECT_TRUE(adjacent("model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight"));
    Context ctx = cpu_context(dt);
    const std::vector<int32_t> seq = random_tokens(13, cfg.vocab_size, 5);
    const int64_t prompt = 6;
    model::DecodeState sa = net->make_decode_state({2, 32, 4}), sb = frozen.make_decode_state({2, 32, 4});
    const std::vector<int32_t> head(seq.begin(), seq.begin() + prompt);
    Tensor want = net->extend(ctx, sa, {1}, {head}, dt), got = frozen.extend(ctx, sb, {1}, {head}, dt);
    EXPECT_LT(relative_error(got, want), dt == DType::f64 ? 1e-14 : 1e-6) << cfg.model_type << " prompt";
    for (int64_t t = prompt; t < static_cast<int64_t>(seq.size()); ++t) {
      want = net->extend(ctx, sa, {1}, {{seq[t]}}, dt), got = frozen.extend(ctx, sb, {1}, {{seq[t]}}, dt);
      EXPECT_LT(relative_error(got, want), dt == DType::f64 ? 1e-14 : 1e-6) << cfg.model_type << " position " << t;
    }
  }
}

// A writer that replaces a fused part's value instead of writing it in place (none does today)
// must not leave the fused weight stale: the parts then run one by one with the new values.
TEST(HybridDecode, frozen_model_with_a_replaced_value_runs_its_linears_apart) {
  const model::ModelConfig cfg = decilm_config();
  const DType dt = DType::f64;
  auto net = random_model(cfg, dt);
  model::HybridModel frozen(cfg, host_backend(), dt, {}, /*trainable=*/false);
  for (model::Param* p : frozen.params().all()) {
    auto [lo, hi] = range_of(p->name);
    fill_uniform(p->value, Philox(7, model::name_stream(p->name)), lo, hi);
  }
  const std::string name = "model.layers.0.self_attn.k_proj.weight";
  auto by_name = [&](model::HybridModel& m) -> model::Param* {
    for (model::Param* p : m.params().all())
      if (p->name == name) return p;
    return nullptr;
  };
  model::Param* replaced = by_name(frozen);
  ASSERT_NE(replaced, nullptr);
  Tensor fresh = Tensor::zeros(replaced->value.shape(), dt, host_backend());
  fill_uniform(fresh, Philox(8, model::name_stream(name)), -0.5, 0.5);
  replaced->value = fresh;
  by_name(*net)->value.copy_from(fresh);
  Context ctx = cpu_context(dt);
  const std::vector<int32_t> seq = random_tokens(9, cfg.vocab_size, 3);
  model::DecodeState sa = net->make_decode_state({1, 16, 4}), sb = frozen.make_decode_state({1, 16, 4});
  EXPECT_LT(relative_error(frozen.extend(ctx, sb, {0}, {seq}, dt), net->extend(ctx, sa, {0}, {seq}, dt)), 1e-14);
}

// DeciLM (B.1): per-layer KV heads, no-op and linear sub-blocks, Llama-3 scaled RoPE, decoded
// token by token as the full forward computes them.
TEST(HybridDecode, decilm_prefill_then_steps_match_full_logits_f64) {
  const model::ModelConfig c = decilm_config();
  prefill_then_steps(DType::f64, true, &c);
}
TEST(HybridDecode, decilm_prefill_then_steps_match_full_logits_f32) {
  const model::ModelConfig c = decilm_config();
  prefill_then_steps(DType::f32, true, &c);
}

// KV bytes per sequence follow each layer's own KV-head count: blocks 0 (2 heads) and 3 (1).
TEST(HybridDecode, decilm_bytes_count_each_layers_kv_heads) {
  const model::ModelConfig c = decilm_config();
  EXPECT_EQ(model::DecodeState::bytes_per_sequence(c, 16, DType::f32), 4 * 2 * 16 * (2 + 1) * 4);
}

TEST(HybridDecode, default_logits_are_float32) {
  model::ModelConfig cfg = every_kind(false);
  auto net = random_model(cfg, DType::f64);
  Context ctx = cpu_context(DType::f64);
  model::DecodeState st = net->make_decode_state({1, 8});
  Tensor got = net->extend(ctx, st, {0}, {{1, 2, 3}});
  EXPECT_EQ(got.dtype(), DType::f32);
  Tensor want = full_logits(*net, ctx, {1, 2, 3});
  EXPECT_LT(relative_error(got.to_host(DType::f64), row(want, 2)), 1e-6);
}

// Three sequences in slots 3, 0, 2 advance together with different chunk sizes per call (prefills
// of different lengths, a later chunk of several tokens beside single-token steps); every
// returned row equals the same sequence decoded alone, and the full-sequence logits. On the
// Nemotron-H stack with every block kind and on the DeciLM one (per-block KV heads, RoPE at each
// sequence's own positions, no-op and linear sub-blocks).
TEST(HybridDecode, several_slots_in_one_call_equal_each_alone) {
  for (const model::ModelConfig& cfg : {every_kind(true), decilm_config()})
  for (DType dt : {DType::f64, DType::f32}) {
    auto net = random_model(cfg, dt);
    Context ctx = cpu_context(dt);
    const std::vector<int64_t> slots{3, 0, 2};
    const std::vector<std::vector<int64_t>> schedule{{5, 1, 9}, {1, 3, 1}, {1, 1, 1}, {4, 1, 1}, {1, 6, 1}};
    std::vector<std::vector<int32_t>> seqs;
    for (size_t s = 0; s < slots.size(); ++s) {
      int64_t n = 0;
      for (const auto& step : schedule) n += step[s];
      seqs.push_back(random_tokens(n, cfg.vocab_size, 11 + s));
    }
    model::DecodeState together = net->make_decode_state({4, 32, 4});
    std::vector<model::DecodeState> alone;
    for (size_t s = 0; s < slots.size(); ++s) alone.push_back(net->make_decode_state({1, 32, 4}));
    std::vector<int64_t> done(slots.size(), 0);
    for (const auto& step : schedule) {
      std::vector<std::vector<int32_t>> toks;
      for (size_t s = 0; s < slots.size(); ++s)
        toks.emplace_back(seqs[s].begin() + done[s], seqs[s].begin() + done[s] + step[s]);
      Tensor got = net->extend(ctx, together, slots, toks, dt);
      ASSERT_EQ(got.shape(), Shape({3, cfg.vocab_size}));
      for (size_t s = 0; s < slots.size(); ++s) {
        Tensor one = net->extend(ctx, alone[s], {0}, {toks[s]}, dt);
        done[s] += step[s];
        EXPECT_LT(relative_error(row(got, s), one), dt == DType::f64 ? 1e-12 : 1e-5)
            << cfg.model_type << " " << dtype_name(dt) << " slot " << slots[s] << " at length " << done[s];
        Tensor want = full_logits(*net, ctx, std::vector<int32_t>(seqs[s].begin(), seqs[s].begin() + done[s]));
        EXPECT_LT(relative_error(row(got, s), row(want, done[s] - 1)), tolerance(dt))
            << cfg.model_type << " " << dtype_name(dt) << " slot " << slots[s] << " at length " << done[s];
      }
    }
    for (size_t s = 0; s < slots.size(); ++s) EXPECT_EQ(together.length(slots[s]), done[s]);
  }
}

// A slot that held a long sequence (KV blocks, Mamba states) is released and reused: the new
// sequence gives what it gives in a fresh state, and its blocks came back.
TEST(HybridDecode, release_and_reuse_of_a_slot_starts_clean) {
  model::ModelConfig cfg = every_kind(false);
  auto net = random_model(cfg, DType::f64);
  Context ctx = cpu_context(DType::f64);
  model::DecodeState st = net->make_decode_state({2, 24, 4});
  const int64_t all = st.free_blocks();
  net->extend(ctx, st, {1}, {random_tokens(13, cfg.vocab_size, 1)}, DType::f64);
  net->extend(ctx, st, {1}, {{4}}, DType::f64);
  EXPECT_EQ(st.free_blocks(), all - 4);
  st.release(1);
  EXPECT_EQ(st.length(1), 0);
  EXPECT_EQ(st.free_blocks(), all);
  const std::vector<int32_t> b = random_tokens(6, cfg.vocab_size, 2);
  Tensor got = net->extend(ctx, st, {1}, {b}, DType::f64);
  Tensor step = net->extend(ctx, st, {1}, {{9}}, DType::f64);
  std::vector<int32_t> b2 = b;
  b2.push_back(9);
  Tensor want = full_logits(*net, ctx, b2);
  EXPECT_LT(relative_error(got, row(want, 5)), 1e-10);
  EXPECT_LT(relative_error(step, row(want, 6)), 1e-10);
}

TEST(HybridDecode, running_out_of_blocks_is_refused) {
  model::ModelConfig cfg = every_kind(false);
  auto net = random_model(cfg, DType::f64);
  Context ctx = cpu_context(DType::f64);
  model::DecodeState st = net->make_decode_state({3, 16, 4, 5});  // 5 blocks of 4 tokens
  EXPECT_EQ(st.free_blocks(), 5);
  EXPECT_TRUE(st.can_admit(16));
  EXPECT_FALSE(st.can_admit(17));  // over max_seq_len
  net->extend(ctx, st, {0}, {random_tokens(9, cfg.vocab_size, 1)}, DType::f64);  // 3 blocks
  EXPECT_EQ(st.free_blocks(), 2);
  EXPECT_EQ(st.blocks_held(0), 3);
  EXPECT_EQ(st.blocks_held(1), 0);
  EXPECT_EQ(st.blocks_for(9), 3);
  EXPECT_TRUE(st.can_admit(8));
  EXPECT_FALSE(st.can_admit(9));
  // A prompt needing 3 blocks is refused, and nothing changes.
  EXPECT_THROW(net->extend(ctx, st, {1}, {random_tokens(9, cfg.vocab_size, 2)}, DType::f64), Error);
  EXPECT_EQ(st.free_blocks(), 2);
  EXPECT_EQ(st.length(1), 0);
  // Growing across a block boundary takes a block: 9 -> 12 tokens fits block 3, the 13th opens block 4.
  net->extend(ctx, st, {0}, {{1, 2, 3}}, DType::f64);
  EXPECT_EQ(st.free_blocks(), 2);
  net->extend(ctx, st, {0}, {{4}}, DType::f64);
  EXPECT_EQ(st.free_blocks(), 1);
  st.release(0);
  EXPECT_EQ(st.free_blocks(), 5);
  EXPECT_TRUE(st.can_admit(16));
  // Bad calls name what is wrong.
  EXPECT_THROW(net->extend(ctx, st, {0}, {{cfg.vocab_size}}, DType::f64), InputError);
  EXPECT_THROW(net->extend(ctx, st, {0, 0}, {{1}, {2}}, DType::f64), Error);
  EXPECT_THROW(net->extend(ctx, st, {3}, {{1}}, DType::f64), Error);
  EXPECT_THROW(net->extend(ctx, st, {1}, {{}}, DType::f64), Error);
  EXPECT_THROW(net->extend(ctx, st, {1}, {random_tokens(17, cfg.vocab_size, 3)}, DType::f64), Error);
}

// A rollout between training forwards is harmless: the mixers keep no per-call record (MoE
// statistics go only to the caller's ForwardStats), so a training forward reports the same
// log-probs and expert counts before and after extend calls, with the sequence aux loss on.
TEST(HybridDecode, extend_between_training_forwards_changes_nothing) {
  model::ModelConfig cfg = every_kind(false);
  auto net = random_model(cfg, DType::f64);
  for (const auto& m : net->mixers())
    if (auto* moe = dynamic_cast<model::MoeMixer*>(m.get())) moe->set_seq_aux_loss(0.01, 1.0);
  Context ctx = cpu_context(DType::f64);
  Tensor ids = Tensor::from_vector<int32_t>({2, 5}, random_tokens(10, cfg.vocab_size, 5));
  Tensor targets = Tensor::from_vector<int32_t>({2, 5}, random_tokens(10, cfg.vocab_size, 6));
  model::ForwardStats before, after;
  std::vector<double> lp_before = net->token_logprobs(ctx, ids, targets, &before).to_f64_vector();
  model::DecodeState st = net->make_decode_state({2, 16, 4});
  net->extend(ctx, st, {0, 1}, {random_tokens(7, cfg.vocab_size, 7), {3}}, DType::f64);
  net->extend(ctx, st, {0, 1}, {{1}, {2}}, DType::f64);
  std::vector<double> lp_after = net->token_logprobs(ctx, ids, targets, &after).to_f64_vector();
  EXPECT_EQ(lp_before, lp_after);
  ASSERT_EQ(before.moe.size(), after.moe.size());
  ASSERT_EQ(before.moe.size(), 2u);
  for (size_t l = 0; l < before.moe.size(); ++l) {
    EXPECT_EQ(before.moe[l].tokens_per_expert, after.moe[l].tokens_per_expert);
    EXPECT_EQ(before.moe[l].aux_loss, after.moe[l].aux_loss);
  }
}

TEST(HybridDecode, bytes_count_kv_conv_and_ssm_state) {
  model::ModelConfig cfg = every_kind(false);
  model::HybridModel net(cfg, host_backend(), DType::f32);
  model::DecodeState st = net.make_decode_state({3, 16, 4});
  EXPECT_EQ(st.bytes(), 3 * model::DecodeState::bytes_per_sequence(cfg, 16, DType::f32));
  // Per sequence by hand: 2 attention layers of K and V (nkv 2, hd 6), 2 Mamba layers of a
  // window (K-1 = 2) over conv_dim = 16 + 2*8 and a state 4*4*4, all 4 bytes.
  EXPECT_EQ(model::DecodeState::bytes_per_sequence(cfg, 16, DType::f32), 4 * (2 * 2 * 16 * 2 * 6 + 2 * (2 * 32 + 64)));
}

}  // namespace
}  // namespace nemotron::testing
