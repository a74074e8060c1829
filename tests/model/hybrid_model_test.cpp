// The hybrid model beyond its harness cases (hybrid_model_cases.cpp): Hub parameter names, the
// logits against the loss path, and full recomputation giving identical gradients.
#include <gtest/gtest.h>

#include <cmath>

#include "block_configs.h"
#include "harness.h"
#include "model/hybrid_model.h"
#include "train/train_step.h"

namespace nemotron::testing {
namespace {

TEST(HybridModel, registers_hub_parameter_names) {
  model::HybridModel net(hybrid_config("M*-E"), host_backend(), DType::f32);
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
  model::ModelConfig cfg = hybrid_config("M*-E");
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
  train::LossSum l = train::cross_entropy_loss(ctx, net, {ids, labels, {}});
  EXPECT_NEAR(l.loss_sum, want, 1e-10);
  EXPECT_EQ(l.token_count, 3);
  // A freshly initialised model predicts close to uniform: loss near log V per token.
  EXPECT_NEAR(l.mean(), std::log(static_cast<double>(cfg.vocab_size)), 0.2);
}

// model.recompute_granularity: full gives the same loss and the same gradients, bit for bit (the
// recomputed forward is the same computation), with the MoE choice recomputed too.
TEST(HybridModel, full_recompute_gives_identical_gradients) {
  model::ModelConfig cfg = hybrid_config("M*-E");
  Tensor ids = Tensor::from_vector<int32_t>({2, 5}, {1, 7, 3, 22, 4, 9, 0, 13, 5, 2});
  Tensor labels = Tensor::from_vector<int32_t>({2, 5}, {7, 3, 22, 4, -100, 0, 13, 5, 2, 6});
  std::vector<std::vector<double>> grads[2];
  double loss[2];
  for (int r = 0; r < 2; ++r) {
    cfg.recompute_granularity = r ? "full" : "";
    model::HybridModel net(cfg, host_backend(), DType::f64);
    net.init(5);
    Context ctx = cpu_context(DType::f64);
    loss[r] = train::cross_entropy_backward(ctx, net, {ids, labels, {}}, 0.1).loss_sum;
    for (const model::Param* p : net.params().all())
      grads[r].push_back(p->grad.defined() ? p->grad.to_f64_vector() : std::vector<double>());
  }
  EXPECT_EQ(loss[0], loss[1]);
  ASSERT_EQ(grads[0].size(), grads[1].size());
  for (size_t k = 0; k < grads[0].size(); ++k) EXPECT_EQ(grads[0][k], grads[1][k]) << "parameter " << k;
}

}  // namespace
}  // namespace nemotron::testing
