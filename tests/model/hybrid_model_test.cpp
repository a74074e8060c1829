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

// Multi-token prediction (reference/architectures.md A.8.2): the HF names of one "*E" block.
TEST(HybridModel, registers_the_mtp_block_under_its_hf_names) {
  model::ModelConfig cfg = hybrid_config("M*E");
  cfg.num_nextn_predict_layers = 1, cfg.mtp_hybrid_override_pattern = "*E", cfg.mtp_num_layers = 2;
  model::HybridModel net(cfg, host_backend(), DType::f32);
  const auto& ps = net.params();
  const int64_t H = cfg.hidden_size;
  for (const char* n : {"mtp.layers.0.enorm.weight", "mtp.layers.0.hnorm.weight", "mtp.layers.0.norm.weight",
                        "mtp.layers.0.mixer.q_proj.weight", "mtp.layers.0.mixer.o_proj.weight",
                        "mtp.layers.1.norm.weight", "mtp.layers.1.mixer.gate.weight",
                        "mtp.layers.1.mixer.gate.e_score_correction_bias", "mtp.layers.1.mixer.experts.3.up_proj.weight",
                        "mtp.layers.1.mixer.shared_experts.down_proj.weight", "mtp.layers.1.final_layernorm.weight"})
    EXPECT_NE(ps.find(n), nullptr) << n;
  ASSERT_NE(ps.find("mtp.layers.0.eh_proj.weight"), nullptr);
  EXPECT_EQ(ps.find("mtp.layers.0.eh_proj.weight")->value.shape(), Shape({H, 2 * H}));
  // One block whatever the depth count: its weights are reused (mtp_use_repeated_layer).
  EXPECT_EQ(ps.find("mtp.layers.2.norm.weight"), nullptr);
  EXPECT_EQ(ps.find("mtp.layers.0.final_layernorm.weight"), nullptr);
  EXPECT_EQ(net.mtp_blocks().size(), 1u);
  EXPECT_EQ(net.mixers().size(), 3u);  // the trunk's only
}

// A.8.3's shifts: depth k's inputs and targets are the row's rolled left by k; the tail of the row
// and (packed rows) targets in the next sequence are ignored.
TEST(HybridModel, mtp_targets_roll_inputs_labels_and_weights) {
  model::Batch b;
  b.input_ids = Tensor::from_vector<int32_t>({1, 6}, {10, 11, 12, 13, 14, 15});
  b.labels = Tensor::from_vector<int32_t>({1, 6}, {11, 12, 13, -100, 15, 16});
  Tensor w = Tensor::from_vector<float>({1, 6}, {1, 1, 0.5, 1, 1, 1});
  model::MtpTargets t1 = model::mtp_targets(b, w, 1, host_backend());
  EXPECT_EQ(t1.ids.to_f64_vector(), (std::vector<double>{11, 12, 13, 14, 15, 0}));
  EXPECT_EQ(t1.labels.to_f64_vector(), (std::vector<double>{12, 13, -100, 15, 16, -1}));
  EXPECT_EQ(t1.weights.to_f64_vector(), (std::vector<double>{1, 0.5, 1, 1, 1, 0}));
  EXPECT_EQ(t1.tokens, 1 + 0.5 + 1 + 1);
  b.seq_idx = Tensor::from_vector<int32_t>({1, 6}, {0, 0, 0, 1, 1, 1});
  model::MtpTargets t2 = model::mtp_targets(b, Tensor(), 2, host_backend());
  EXPECT_EQ(t2.ids.to_f64_vector(), (std::vector<double>{12, 13, 14, 15, 0, 0}));
  EXPECT_EQ(t2.labels.to_f64_vector(), (std::vector<double>{13, -1, -1, 16, -1, -1}));
  EXPECT_FALSE(t2.weights.defined());
  EXPECT_EQ(t2.tokens, 2);
}

namespace ref {
using Vec = std::vector<double>;
Vec rms(const double* x, const double* w, int64_t H, double eps) {
  double ss = 0;
  for (int64_t i = 0; i < H; ++i) ss += x[i] * x[i];
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(H) + eps);
  Vec y(static_cast<size_t>(H));
  for (int64_t i = 0; i < H; ++i) y[static_cast<size_t>(i)] = w[i] * x[i] * r;
  return y;
}
Vec matvec(const double* W, const Vec& x, int64_t out) {  // W [out, in]
  const int64_t in = static_cast<int64_t>(x.size());
  Vec y(static_cast<size_t>(out), 0.0);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) y[static_cast<size_t>(o)] += W[o * in + i] * x[static_cast<size_t>(i)];
  return y;
}
double cross_entropy(const Vec& z, int64_t label) {
  double mx = -1e300, s = 0;
  for (double v : z) mx = std::max(mx, v);
  for (double v : z) s += std::exp(v - mx);
  return mx + std::log(s) - z[static_cast<size_t>(label)];
}
}  // namespace ref

// The MTP losses against a hand-written float64 A.8 / A.8.3 on a small fixed input: an MTP block of
// one squared-ReLU MLP layer, two depths with the block reused, norm weights away from 1 so that
// every norm is told apart. Per depth L_k = sum mask_k CE_k / sum mask_k with labels and mask
// rolled left by k; L = L_main + alpha / D * sum_k L_k.
TEST(HybridModel, mtp_losses_match_a_float64_reference_of_a8) {
  model::ModelConfig cfg = hybrid_config("M*");
  cfg.num_nextn_predict_layers = 1, cfg.mtp_hybrid_override_pattern = "-", cfg.mtp_num_layers = 2;
  cfg.mtp_loss_scaling_factor = 0.3;
  model::HybridModel net(cfg, host_backend(), DType::f64);
  net.init(7);
  int salt = 0;
  for (model::Param* p : net.params().all())
    if (p->name.ends_with("norm.weight") || p->name.ends_with("norm_f.weight")) {
      double* v = p->value.data<double>();
      for (int64_t i = 0; i < p->value.numel(); ++i) v[i] = 0.6 + 0.05 * static_cast<double>((i * 7 + salt) % 11);
      ++salt;
    }
  const int64_t B = 2, T = 6, H = cfg.hidden_size, V = cfg.vocab_size, F = cfg.intermediate_size, D = 2;
  const double eps = cfg.layer_norm_epsilon, alpha = cfg.mtp_loss_scaling_factor;
  std::vector<int32_t> ids = {1, 7, 3, 22, 4, 9, 0, 13, 5, 2, 6, 17};
  std::vector<int32_t> labels = {7, 3, 22, 4, 9, -100, 13, 5, 2, -100, 17, 8};
  std::vector<double> mask = {1, 1, 0.5, 1, 0, 1, 1, 1, 1, 1, 0.25, 1};
  model::Batch batch{Tensor::from_vector<int32_t>({B, T}, ids), Tensor::from_vector<int32_t>({B, T}, labels),
                     Tensor::from_vector<double>({B, T}, mask)};
  auto P = [&](const char* n) {
    const model::Param* p = net.params().find(n);
    EXPECT_NE(p, nullptr) << n;
    return p->value.data<double>();
  };
  Context ctx = cpu_context(DType::f64);
  Tensor x = net.forward(ctx, batch.input_ids, nullptr);
  const double* xd = x.data<double>();
  const double* head = P("lm_head.weight");
  const double* emb = P("backbone.embeddings.weight");

  // Main: h0 = norm_f(x); the cross-entropy mean over the masked labelled tokens.
  std::vector<ref::Vec> h(static_cast<size_t>(B * T));
  double main_sum = 0, main_tokens = 0;
  for (int64_t n = 0; n < B * T; ++n) {
    h[static_cast<size_t>(n)] = ref::rms(xd + n * H, P("backbone.norm_f.weight"), H, eps);
    if (labels[static_cast<size_t>(n)] < 0) continue;
    main_sum += mask[static_cast<size_t>(n)] * ref::cross_entropy(ref::matvec(head, h[static_cast<size_t>(n)], V),
                                                                  labels[static_cast<size_t>(n)]);
    main_tokens += mask[static_cast<size_t>(n)];
  }
  std::vector<double> depth_sum(D, 0.0), depth_tokens(D, 0.0);
  for (int64_t k = 1; k <= D; ++k) {
    std::vector<ref::Vec> next(h.size());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t n = b * T + t;
        const bool inside = t + k < T;
        const int32_t id = inside ? ids[static_cast<size_t>(n + k)] : 0;
        ref::Vec cat = ref::rms(emb + id * H, P("mtp.layers.0.enorm.weight"), H, eps);
        ref::Vec hn = ref::rms(h[static_cast<size_t>(n)].data(), P("mtp.layers.0.hnorm.weight"), H, eps);
        cat.insert(cat.end(), hn.begin(), hn.end());  // embedding first, then hidden
        ref::Vec u = ref::matvec(P("mtp.layers.0.eh_proj.weight"), cat, H);
        ref::Vec a = ref::matvec(P("mtp.layers.0.mixer.up_proj.weight"),
                                 ref::rms(u.data(), P("mtp.layers.0.norm.weight"), H, eps), F);
        for (double& v : a) v = v > 0 ? v * v : 0.0;
        ref::Vec d = ref::matvec(P("mtp.layers.0.mixer.down_proj.weight"), a, H);
        for (int64_t i = 0; i < H; ++i) u[static_cast<size_t>(i)] += d[static_cast<size_t>(i)];
        next[static_cast<size_t>(n)] = ref::rms(u.data(), P("mtp.layers.0.final_layernorm.weight"), H, eps);
        if (!inside || labels[static_cast<size_t>(n + k)] < 0) continue;
        const double w = mask[static_cast<size_t>(n + k)];
        depth_sum[static_cast<size_t>(k - 1)] +=
            w * ref::cross_entropy(ref::matvec(head, next[static_cast<size_t>(n)], V), labels[static_cast<size_t>(n + k)]);
        depth_tokens[static_cast<size_t>(k - 1)] += w;
      }
    h = std::move(next);
  }

  std::vector<double> got = net.mtp_loss(ctx, x, batch, batch.loss_mask, {1.0, 1.0}, nullptr);
  ASSERT_EQ(got.size(), 2u);
  for (int k = 0; k < D; ++k) EXPECT_NEAR(got[static_cast<size_t>(k)], depth_sum[static_cast<size_t>(k)], 1e-11);
  const double L1 = depth_sum[0] / depth_tokens[0], L2 = depth_sum[1] / depth_tokens[1];
  const double want = main_sum / main_tokens + alpha / D * (L1 + L2);
  train::LossSum l = train::cross_entropy_loss(ctx, net, batch);
  EXPECT_EQ(l.token_count, main_tokens);
  EXPECT_NEAR(l.mean(), want, 1e-12);
  // The depths are not the main loss: a model whose MTP scale is 0 gives the main mean alone.
  EXPECT_GT(std::fabs(l.mean() - main_sum / main_tokens), 1e-3);
}

}  // namespace
}  // namespace nemotron::testing
