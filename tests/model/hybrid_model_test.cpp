// Whole-model float64 gradient checks: every parameter of a hybrid stack holding all four layer
// kinds (M, *, -, E), through embedding, pre-norms, residuals, final norm, LM head (untied and
// tied) and the masked cross-entropy. MoE expert choices are computed once from the unperturbed
// inputs and held fixed while differencing (top-k is piecewise constant; a choice flipping
// between the +h and -h evaluations would make finite differences meaningless).
#include <gtest/gtest.h>

#include <optional>
#include <tuple>

#include "harness.h"
#include "model/hybrid_model.h"
#include "model/moe_mixer.h"

namespace nemotron::testing {
namespace {

model::ModelConfig base_config(const std::string& pattern) {
  model::ModelConfig c;
  c.vocab_size = 23;
  c.hidden_size = 16;
  c.hybrid_override_pattern = pattern;
  c.num_attention_heads = 4, c.num_key_value_heads = 2, c.head_dim = 6;
  c.intermediate_size = 12;
  c.mamba_num_heads = 4, c.mamba_head_dim = 4, c.n_groups = 2, c.ssm_state_size = 4, c.conv_kernel = 3;
  c.chunk_size = 4;
  c.n_routed_experts = 4, c.num_experts_per_tok = 2, c.moe_intermediate_size = 8;
  c.moe_shared_expert_intermediate_size = 6, c.n_shared_experts = 1;
  c.n_group = 2, c.topk_group = 1, c.routed_scaling_factor = 1.5;
  return c;
}

std::pair<double, double> param_range(const std::string& name, const Shape&) {
  auto ends = [&](const char* s) { return name.size() >= strlen(s) && name.compare(name.size() - strlen(s), strlen(s), s) == 0; };
  if (ends("norm.weight") || ends("norm_f.weight")) return {0.5, 1.5};
  if (ends("A_log")) return {-1.0, 1.0};
  if (ends("dt_bias")) return {-3.0, -1.0};
  if (ends("e_score_correction_bias")) return {-0.3, 0.3};
  return {-0.5, 0.5};
}

class HybridModelCase : public OpCase {
 public:
  HybridModelCase(std::string label, model::ModelConfig cfg, int64_t B, int64_t T, bool masked)
      : label_(std::move(label)), cfg_(std::move(cfg)), B_(B), T_(T), masked_(masked) {
    model::HybridModel probe(cfg_, host_backend(), DType::f64);
    for (const model::Param* p : probe.params().all()) params_.push_back({p->name, p->value.shape(), p->trainable});
  }
  std::string op() const override { return "hybrid_model"; }
  std::string params() const override {
    return fmt::format("{},pattern={},B={},T={},chunk={},G={},tied={},mask={}", label_, cfg_.hybrid_override_pattern,
                       B_, T_, cfg_.chunk_size, cfg_.n_groups, cfg_.tie_word_embeddings, masked_);
  }
  int64_t grad_max_elements() const override { return 12; }
  // A whole stack in float32 accumulates more rounding than one op (sums over B*T in dD, dA).
  double tolerance(DType dtype) const override { return dtype == DType::f32 ? 2e-4 : OpCase::tolerance(dtype); }
  std::vector<InputSpec> inputs() const override {
    double V = static_cast<double>(cfg_.vocab_size);
    std::vector<InputSpec> in{{"input_ids", {B_, T_}, DType::i32, false, 0, V},
                              {"labels", {B_, T_}, DType::i32, false, -1, V},  // -1: some ignored
                              {"loss_mask", {B_, T_}, DType::f64, false, 0.0, 1.0}};
    for (const auto& [name, shape, trainable] : params_) {
      auto [lo, hi] = param_range(name, shape);
      in.push_back({name, shape, DType::f64, trainable, lo, hi});  // buffers get no gradient
    }
    return in;
  }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    auto net = build(ctx, in);
    model::LossSum l = net->loss(ctx, batch(in));
    return {Tensor::from_vector<double>({1}, {l.loss_sum}).to_host(in[3].dtype())};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    auto net = build(ctx, in);
    double scale = douts[0].to_f64_vector()[0];
    net->forward_backward(ctx, batch(in), scale);
    std::vector<Tensor> g{Tensor(), Tensor(), Tensor()};
    for (const model::Param* p : net->params().all()) g.push_back(p->trainable ? p->grad : Tensor());
    return g;
  }

 private:
  model::Batch batch(const std::vector<Tensor>& in) const {
    return {in[0], in[1], masked_ ? in[2] : Tensor()};
  }
  std::unique_ptr<model::HybridModel> build(Context& ctx, const std::vector<Tensor>& in) const {
    auto net = std::make_unique<model::HybridModel>(cfg_, *ctx.backend, in[3].dtype());
    const auto& all = net->params().all();
    for (size_t k = 0; k < all.size(); ++k) all[k]->value.copy_from(in[k + 3]);
    if (!pinned_) {  // first call: the unperturbed float64 inputs; record every MoE layer's choice
      net->loss(ctx, batch(in));
      pinned_.emplace();
      for (const auto& m : net->mixers())
        if (auto* moe = dynamic_cast<model::MoeMixer*>(m.get())) {
          for (int64_t n : moe->last_tokens_per_expert()) EXPECT_GT(n, 0) << "an expert got no token";
          pinned_->push_back(moe->last_selection().clone());
        }
    }
    size_t k = 0;
    for (const auto& m : net->mixers())
      if (auto* moe = dynamic_cast<model::MoeMixer*>(m.get())) moe->force_selection((*pinned_)[k++]);
    return net;
  }

  std::string label_;
  model::ModelConfig cfg_;
  int64_t B_, T_;
  bool masked_;
  std::vector<std::tuple<std::string, Shape, bool>> params_;
  mutable std::optional<std::vector<Tensor>> pinned_;
};

NM_OP_CASES(hybrid_model_cases) {
  CaseList c;
  model::ModelConfig a = base_config("M*-EM");
  c.push_back(std::make_unique<HybridModelCase>("untied", a, 2, 11, true));
  model::ModelConfig b = base_config("E*MM-");
  b.tie_word_embeddings = true;
  b.moe_latent_size = 10;
  b.norm_topk_prob = false;
  b.chunk_size = 5;
  b.n_groups = 4, b.mamba_num_heads = 8, b.mamba_head_dim = 3;
  c.push_back(std::make_unique<HybridModelCase>("tied_latent", b, 3, 7, false));
  return c;
}

TEST(HybridModel, registers_hub_parameter_names) {
  model::HybridModel net(base_config("M*-E"), host_backend(), DType::f32);
  const auto& ps = net.params();
  EXPECT_NE(ps.find("backbone.embeddings.weight"), nullptr);
  EXPECT_NE(ps.find("backbone.layers.0.mixer.in_proj.weight"), nullptr);
  EXPECT_NE(ps.find("backbone.layers.1.mixer.q_proj.weight"), nullptr);
  EXPECT_NE(ps.find("backbone.layers.2.mixer.up_proj.weight"), nullptr);
  EXPECT_NE(ps.find("backbone.layers.3.mixer.experts.3.down_proj.weight"), nullptr);
  EXPECT_NE(ps.find("backbone.layers.3.norm.weight"), nullptr);
  EXPECT_NE(ps.find("backbone.norm_f.weight"), nullptr);
  EXPECT_NE(ps.find("lm_head.weight"), nullptr);
}

TEST(HybridModel, logits_match_the_loss_path) {
  model::ModelConfig cfg = base_config("M*-E");
  model::HybridModel net(cfg, host_backend(), DType::f64);
  net.init(5);
  Context ctx = cpu_context(DType::f64);
  Tensor ids = Tensor::from_vector<int32_t>({1, 4}, {1, 7, 3, 22});
  Tensor labels = Tensor::from_vector<int32_t>({1, 4}, {7, 3, 22, -100});
  Tensor logits = net.logits(ctx, ids);
  ASSERT_EQ(logits.shape(), Shape({1, 4, cfg.vocab_size}));
  double want = 0;
  const double* z = logits.data<double>();
  for (int t = 0; t < 3; ++t) {
    double mx = -1e300, s = 0;
    for (int v = 0; v < cfg.vocab_size; ++v) mx = std::max(mx, z[t * cfg.vocab_size + v]);
    for (int v = 0; v < cfg.vocab_size; ++v) s += std::exp(z[t * cfg.vocab_size + v] - mx);
    want += mx + std::log(s) - z[t * cfg.vocab_size + labels.data<int32_t>()[t]];
  }
  model::LossSum l = net.loss(ctx, {ids, labels, {}});
  EXPECT_NEAR(l.loss_sum, want, 1e-10);
  EXPECT_EQ(l.token_count, 3);
  // A freshly initialised model predicts close to uniform: loss near log V per token.
  EXPECT_NEAR(l.mean(), std::log(static_cast<double>(cfg.vocab_size)), 0.2);
}

// model.recompute_granularity: full gives the same loss and the same gradients, bit for bit (the
// recomputed forward is the same computation), with the MoE choice recomputed too.
TEST(HybridModel, full_recompute_gives_identical_gradients) {
  model::ModelConfig cfg = base_config("M*-E");
  Tensor ids = Tensor::from_vector<int32_t>({2, 5}, {1, 7, 3, 22, 4, 9, 0, 13, 5, 2});
  Tensor labels = Tensor::from_vector<int32_t>({2, 5}, {7, 3, 22, 4, -100, 0, 13, 5, 2, 6});
  std::vector<std::vector<double>> grads[2];
  double loss[2];
  for (int r = 0; r < 2; ++r) {
    cfg.recompute_granularity = r ? "full" : "";
    model::HybridModel net(cfg, host_backend(), DType::f64);
    net.init(5);
    Context ctx = cpu_context(DType::f64);
    loss[r] = net.forward_backward(ctx, {ids, labels, {}}, 0.1).loss_sum;
    for (const model::Param* p : net.params().all()) grads[r].push_back(p->grad.to_f64_vector());
  }
  EXPECT_EQ(loss[0], loss[1]);
  ASSERT_EQ(grads[0].size(), grads[1].size());
  for (size_t k = 0; k < grads[0].size(); ++k) EXPECT_EQ(grads[0][k], grads[1][k]) << "parameter " << k;
}

}  // namespace
}  // namespace nemotron::testing
