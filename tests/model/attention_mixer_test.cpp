// The attention mixer: float64 gradient checks of the whole block (du and every parameter) for
// GQA ratios 2 and 4, with and without RoPE, head_dim != H / nq, with and without biases; plus
// Hub names, init scales, the FLOP formula and where RoPE acts.
#include <gtest/gtest.h>

#include <cmath>

#include "core/rng.h"
#include "mixer_case.h"
#include "model/attention_mixer.h"

namespace nemotron::testing {
namespace {

using model::AttentionMixer;
using model::ModelConfig;

ModelConfig attention_config(int64_t H, int64_t nq, int64_t nkv, int64_t hd, bool rope, bool bias) {
  ModelConfig c;
  c.hidden_size = H;
  c.hybrid_override_pattern = "M*M*";
  c.num_attention_heads = nq;
  c.num_key_value_heads = nkv;
  c.head_dim = hd;
  c.attention_bias = bias;
  c.position_embedding_type = rope ? "rope" : "none";
  c.rope_theta = 10000.0;
  return c;
}

std::unique_ptr<model::Mixer> make_attention(const ModelConfig& c, model::ParamStore& s) {
  return std::make_unique<AttentionMixer>(c, s, "backbone.layers.1.mixer.", 1);
}

bool is_k_bias(const std::string& name) { return name.ends_with("k_proj.bias"); }

// Without RoPE the k_proj bias adds q.b_k to every score of a query row, which the softmax
// ignores: its exact gradient is zero, so a relative comparison would only compare rounding
// noise. It is left out of those checks and asserted to vanish in its own test below. (With
// RoPE the bias rotates with the position, its gradient is not zero, and it is checked.)
class AttentionMixerCase : public MixerCase {
 public:
  AttentionMixerCase(ModelConfig cfg, int64_t B, int64_t T) : MixerCase("attention_mixer", cfg, B, T, make_attention) {}
  std::vector<InputSpec> inputs() const override {
    std::vector<InputSpec> in = MixerCase::inputs();
    for (InputSpec& spec : in)
      if (skip(spec.name)) spec.differentiable = false;
    return in;
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    std::vector<Tensor> grads = MixerCase::backward(ctx, in, douts);
    std::vector<InputSpec> specs = inputs();
    for (size_t i = 0; i < specs.size(); ++i)
      if (skip(specs[i].name)) grads[i] = Tensor();
    return grads;
  }

 private:
  bool skip(const std::string& name) const { return config().position_embedding_type != "rope" && is_k_bias(name); }
  std::string extra_params() const override {
    const ModelConfig& c = config();
    return fmt::format("H={},nq={},nkv={},hd={},rope={},bias={}", c.hidden_size, c.num_attention_heads,
                       c.num_key_value_heads, c.head_dim, c.position_embedding_type == "rope" ? 1 : 0,
                       c.attention_bias ? 1 : 0);
  }
};

NM_OP_CASES(attention_mixer_cases) {
  CaseList c;
  c.push_back(std::make_unique<AttentionMixerCase>(attention_config(12, 4, 2, 5, false, false), 2, 5));
  c.push_back(std::make_unique<AttentionMixerCase>(attention_config(10, 4, 1, 6, true, true), 3, 7));
  c.push_back(std::make_unique<AttentionMixerCase>(attention_config(9, 2, 1, 4, true, false), 2, 9));
  c.push_back(std::make_unique<AttentionMixerCase>(attention_config(8, 8, 2, 3, false, true), 2, 3));
  return c;
}

TEST(AttentionMixer, registers_hub_names_and_shapes) {
  model::ParamStore store(host_backend(), DType::f64);
  AttentionMixer m(attention_config(12, 4, 2, 5, false, true), store, "backbone.layers.1.mixer.", 1);
  auto shape = [&](const std::string& n) { return store.get("backbone.layers.1.mixer." + n).value.shape(); };
  EXPECT_EQ(shape("q_proj.weight"), Shape({20, 12}));
  EXPECT_EQ(shape("k_proj.weight"), Shape({10, 12}));
  EXPECT_EQ(shape("v_proj.weight"), Shape({10, 12}));
  EXPECT_EQ(shape("o_proj.weight"), Shape({12, 20}));
  EXPECT_EQ(shape("q_proj.bias"), Shape({20}));
  EXPECT_EQ(shape("o_proj.bias"), Shape({12}));
  EXPECT_EQ(store.all().size(), 8u);
  model::ParamStore plain(host_backend(), DType::f64);
  AttentionMixer p(attention_config(12, 4, 2, 5, false, false), plain, "x.", 0);
  EXPECT_EQ(plain.all().size(), 4u);
}

TEST(AttentionMixer, without_rope_k_bias_gradient_vanishes_and_v_bias_gradient_does_not) {
  Context ctx = cpu_context(DType::f64);
  model::ParamStore store(host_backend(), DType::f64);
  ModelConfig cfg = attention_config(8, 4, 2, 4, false, true);
  cfg.initializer_range = 0.5;
  AttentionMixer m(cfg, store, "", 0);
  m.init(2);
  Tensor u = Tensor::empty({2, 5, 8}, DType::f64), dy = Tensor::empty({2, 5, 8}, DType::f64);
  fill_uniform(u, Philox(4), -1, 1);
  fill_uniform(dy, Philox(5), -1, 1);
  std::unique_ptr<model::MixerSaved> saved;
  m.forward(ctx, u, &saved);
  m.backward(ctx, *saved, dy);
  Tensor zero = Tensor::zeros({8}, DType::f64);  // nkv * hd
  double k_norm = relative_error(store.get("k_proj.bias").grad, zero);
  double v_norm = relative_error(store.get("v_proj.bias").grad, zero);
  EXPECT_LT(k_norm, 1e-14 * v_norm + 1e-14);
  EXPECT_GT(v_norm, 1e-3);
}

TEST(AttentionMixer, init_scales_and_flops) {
  ModelConfig cfg = attention_config(64, 4, 2, 32, false, false);
  cfg.hybrid_override_pattern = std::string(16, '*');
  model::ParamStore store(host_backend(), DType::f64);
  AttentionMixer m(cfg, store, "", 0);
  m.init(7);
  auto stddev = [&](const std::string& n) {
    std::vector<double> v = store.get(n).value.to_f64_vector();
    double ss = 0;
    for (double x : v) ss += x * x;
    return std::sqrt(ss / double(v.size()));
  };
  EXPECT_NEAR(stddev("q_proj.weight"), 0.02, 0.002);
  EXPECT_NEAR(stddev("k_proj.weight"), 0.02, 0.002);
  EXPECT_NEAR(stddev("o_proj.weight"), 0.02 / 4.0, 0.0005);  // sqrt(16 layers)
  // 2 H hd (2 nq + 2 nkv) + 4 nq hd (T + 1) / 2 at T = 9.
  EXPECT_DOUBLE_EQ(m.forward_flops_per_token(9), 2.0 * 64 * 32 * (8 + 4) + 4.0 * 4 * 32 * 5);
}

TEST(AttentionMixer, rope_leaves_position_zero_and_moves_later_positions) {
  Context ctx = cpu_context(DType::f64);
  Tensor u = Tensor::empty({2, 4, 8}, DType::f64);
  fill_uniform(u, Philox(5), -1, 1);
  auto run = [&](bool rope) {
    model::ParamStore store(host_backend(), DType::f64);
    ModelConfig cfg = attention_config(8, 2, 1, 4, rope, false);
    cfg.initializer_range = 0.5;
    AttentionMixer m(cfg, store, "", 0);
    m.init(3);
    return m.forward(ctx, u, nullptr);
  };
  Tensor a = run(false), b = run(true);
  // Token 0 attends only to itself: both q and k rotate by 0. Token 1 sees a relative angle.
  EXPECT_LT(relative_error(a.select(0).slice(0, 1), b.select(0).slice(0, 1)), 1e-14);
  EXPECT_GT(relative_error(a.select(0).slice(1, 2), b.select(0).slice(1, 2)), 1e-6);
}

}  // namespace
}  // namespace nemotron::testing
