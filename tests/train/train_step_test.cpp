// The shared training step: the general per-token loss form (what GRPO's loss will use) gives the
// fused cross-entropy's value and gradients; the gradient hook sees the complete gradients once
// per step; MoE balancing counts only the step's own forwards (an inference forward between
// steps, as a rollout does, changes nothing); a batch without a loss token is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "core/rng.h"
#include "train/train_step.h"
#include "train_fixtures.h"

namespace nemotron::train {
namespace {

using testing::tiny_train_config;

model::Batch batch(const model::ModelConfig& cfg, int64_t B, int64_t T, uint64_t seed, bool masked = true) {
  Philox rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(B * T)), labels(ids.size());
  std::vector<double> mask(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(rng.bits(i) % cfg.vocab_size);
  for (size_t i = 0; i < ids.size(); ++i) {
    labels[i] = (i + 1) % T == 0 ? -100 : ids[i + 1];
    mask[i] = i % 4 == 1 ? 0.0 : 1.0;
  }
  return {Tensor::from_vector<int32_t>({B, T}, ids), Tensor::from_vector<int32_t>({B, T}, labels),
          masked ? Tensor::from_vector<double>({B, T}, mask) : Tensor()};
}

// The masked cross-entropy through the general form only: the step must run the head forward,
// call per_token with the log-probs, and back-propagate the returned d loss / d log p.
class GeneralFormCrossEntropy : public MaskedCrossEntropy {
 public:
  bool linear_weights(const model::Batch&, Tensor*) const override { return false; }
  TokenLossGrad per_token(Context& ctx, int64_t micro_index, const model::Batch& mb, const Tensor& logprobs) override {
    seen.push_back(micro_index);
    return MaskedCrossEntropy::per_token(ctx, micro_index, mb, logprobs);
  }
  std::vector<int64_t> seen;
};

// MTP (reference/architectures.md A.8.3) in the step: each depth's mean over the global batch's
// own rolled tokens is reported, `loss` stays the main head's mean, and the objective adds
// alpha / D * sum_k L_k, whose gradient is what the step applies (checked against
// cross_entropy_backward on the batch concatenated into one micro-batch: same objective).
TEST(TrainStep, mtp_depth_losses_are_reported_and_trained) {
  model::ModelConfig cfg = tiny_train_config().model;
  cfg.num_nextn_predict_layers = 1, cfg.mtp_hybrid_override_pattern = "*E", cfg.mtp_num_layers = 2;
  model::HybridModel a(cfg, host_backend(), DType::f64), b(cfg, host_backend(), DType::f64);
  a.init(3), b.init(3);
  AdamW oa(a.params(), {});
  TrainStep sa(a, oa, StepConfig{0.0, {}});
  MaskedCrossEntropy ce;
  const model::Batch m0 = batch(cfg, 1, 12, 1), m1 = batch(cfg, 1, 12, 2);
  // The same rows as one micro-batch of B = 2.
  auto cat = [](const Tensor& x, const Tensor& y) {
    std::vector<double> v = x.to_f64_vector(), w = y.to_f64_vector();
    v.insert(v.end(), w.begin(), w.end());
    if (x.dtype() == DType::f64) return Tensor::from_vector<double>({2, x.dim(1)}, v);
    return Tensor::from_vector<int32_t>({2, x.dim(1)}, std::vector<int32_t>(v.begin(), v.end()));
  };
  const model::Batch whole{cat(m0.input_ids, m1.input_ids), cat(m0.labels, m1.labels), cat(m0.loss_mask, m1.loss_mask)};
  Context ctx{&host_backend(), nullptr, DType::f64};
  Tensor x = b.forward(ctx, whole.input_ids, nullptr);
  const std::vector<double> sums = b.mtp_loss(ctx, x, whole, whole.loss_mask, {1.0, 1.0}, nullptr);
  const double main = cross_entropy_loss(ctx, b, whole).loss_sum;  // with MTP: the whole objective
  b.params().zero_grads();
  cross_entropy_backward(ctx, b, whole, 1.0 / count_loss_tokens(whole));
  std::vector<std::vector<double>> want;
  for (const model::Param* p : b.params().all()) want.push_back(p->requires_grad ? p->grad.to_f64_vector() : std::vector<double>());

  // The step's gradients are taken before its update: read them from the hook.
  std::vector<std::vector<double>> got;
  sa.set_grad_hook([&](model::ParamStore& ps) {
    for (const model::Param* p : ps.all()) got.push_back(p->requires_grad ? p->grad.to_f64_vector() : std::vector<double>());
  });
  const StepResult r = sa.run({m0, m1}, ce, 1e-3, 1);
  ASSERT_EQ(r.mtp_losses.size(), 2u);
  const double n = count_loss_tokens(whole);
  for (int k = 1; k <= 2; ++k) {
    const double tokens = model::mtp_targets(whole, whole.loss_mask, k, host_backend()).tokens;
    EXPECT_NEAR(r.mtp_losses[static_cast<size_t>(k - 1)], sums[static_cast<size_t>(k - 1)] / tokens, 1e-12);
  }
  EXPECT_NEAR(r.mtp_loss, 0.3 / 2 * (r.mtp_losses[0] + r.mtp_losses[1]), 1e-12);
  EXPECT_NEAR(r.loss + r.mtp_loss, main / n, 1e-12);
  EXPECT_LT(r.loss, main / n);  // `loss` is the main head's alone
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k)
    for (size_t i = 0; i < got[k].size(); ++i)
      ASSERT_NEAR(got[k][i], want[k][i], 1e-12 * (1 + std::fabs(want[k][i]))) << b.params().all()[k]->name;
}

// The MTP block's MoE layer (inner pattern "*E", one block reused at both depths) is balanced as
// a trunk MoE layer is: the seq_aux_loss of each depth's forward joins the objective (float64
// central differences of main + MTP + every aux loss against the step's gradient on the MTP
// router, the aux part of it clearly visible), and its expert bias moves by the tokens of both
// depths.
TEST(TrainStep, mtp_moe_layer_takes_part_in_load_balancing) {
  model::ModelConfig cfg = tiny_train_config().model;
  cfg.num_nextn_predict_layers = 1, cfg.mtp_hybrid_override_pattern = "*E", cfg.mtp_num_layers = 2;
  MoeSection moe = tiny_train_config().moe;  // expert bias at rate 0.01 and seq_aux_loss
  moe.moe_aux_loss_coeff = 0.5;              // large enough that its gradient stands out
  const std::string gate = "mtp.layers.1.mixer.gate.weight", bias = "mtp.layers.1.mixer.gate.e_score_correction_bias";
  const model::Batch mb = batch(cfg, 2, 12, 21);
  const double n = count_loss_tokens(mb);
  Context ctx{&host_backend(), nullptr, DType::f64};

  model::HybridModel net(cfg, host_backend(), DType::f64);
  net.init(5);
  AdamW opt(net.params(), {});
  TrainStep step(net, opt, StepConfig{0.0, moe});
  std::vector<double> grad;
  step.set_grad_hook([&](model::ParamStore& ps) { grad = ps.get(gate).grad.to_f64_vector(); });
  MaskedCrossEntropy ce;
  const StepResult r = step.run({mb}, ce, 1e-3, 1);

  // The objective the step differentiates, on an untrained twin: main mean + alpha / D * sum_k
  // L_k + the aux loss of every MoE forward (the trunk's layer once, the MTP layer per depth).
  model::HybridModel f(cfg, host_backend(), DType::f64);
  f.init(5);
  MoeBalancer coeffs(f, moe);
  coeffs.begin_step(1);  // the aux-loss setting on every MoE layer, as the step's
  model::ForwardStats st;
  auto objective = [&] {
    Tensor x = f.forward(ctx, mb.input_ids, nullptr, &st);
    double j = 0;
    for (double v : f.head(ctx, x, mb.labels, mb.loss_mask, 1.0, nullptr).to_f64_vector()) j += v / n;
    const std::vector<double> s = f.mtp_loss(ctx, x, mb, mb.loss_mask, {1.0, 1.0}, nullptr, &st);
    for (int64_t k = 1; k <= 2; ++k)
      j += cfg.mtp_loss_scaling_factor / 2 * s[static_cast<size_t>(k - 1)] /
           model::mtp_targets(mb, mb.loss_mask, k, host_backend()).tokens;
    for (const auto* v : {&st.moe, &st.mtp_moe})
      for (const model::MoeLayerStats& m : *v) j += m.aux_loss;
    return j;
  };
  objective();
  ASSERT_EQ(st.moe.size(), 1u);
  ASSERT_EQ(st.mtp_moe.size(), 2u);  // the reused block's MoE layer, once per depth
  double aux = st.moe[0].aux_loss;
  for (const model::MoeLayerStats& m : st.mtp_moe) {
    EXPECT_GT(m.aux_loss, 0.0);
    aux += m.aux_loss;
  }
  EXPECT_NEAR(r.aux_loss, aux, 1e-12 * aux);

  // Central differences over every MTP router weight (the expert choice is piecewise constant;
  // steps of 1e-6 do not flip it here).
  double* w = f.params().get(gate).value.data<double>();
  ASSERT_EQ(grad.size(), static_cast<size_t>(f.params().get(gate).value.numel()));
  double max_err = 0, max_ref = 0;
  for (size_t i = 0; i < grad.size(); ++i) {
    const double h = 1e-6, keep = w[i];
    w[i] = keep + h;
    const double jp = objective();
    w[i] = keep - h;
    const double jm = objective();
    w[i] = keep;
    const double num = (jp - jm) / (2 * h);
    max_err = std::max(max_err, std::fabs(num - grad[i]));
    max_ref = std::max(max_ref, std::fabs(num));
  }
  EXPECT_LT(max_err, 1e-7 * std::max(1.0, max_ref)) << "max |fd - analytic| " << max_err << " of " << max_ref;
  // The same gradient without any aux loss differs by far more than that: the aux term reached
  // the MTP router.
  model::HybridModel g(cfg, host_backend(), DType::f64);
  g.init(5);
  g.params().zero_grads();
  cross_entropy_backward(ctx, g, mb, 1.0 / n);
  const std::vector<double> plain = g.params().get(gate).grad.to_f64_vector();
  double aux_part = 0;
  for (size_t i = 0; i < grad.size(); ++i) aux_part = std::max(aux_part, std::fabs(grad[i] - plain[i]));
  EXPECT_GT(aux_part, 1e3 * max_err);

  // The bias update: the counts of both depths (2 x B*T tokens x top-2), then rate * sign(mean - c).
  objective();  // the original weights again
  const std::vector<int64_t>& counts = step.balancer().step_counts().back();
  ASSERT_EQ(step.balancer().num_layers(), 2);  // the trunk's MoE layer and the MTP block's
  std::vector<int64_t> want(counts.size(), 0);
  for (const model::MoeLayerStats& m : st.mtp_moe)  // the last objective() ran the original weights
    for (size_t e = 0; e < want.size(); ++e) want[e] += m.tokens_per_expert[e];
  EXPECT_EQ(counts, want);
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  EXPECT_EQ(total, 2 * 2 * 12 * cfg.num_experts_per_tok);
  const std::vector<double> b = net.params().get(bias).value.to_f64_vector();
  const double mean = static_cast<double>(total) / static_cast<double>(counts.size());
  for (size_t e = 0; e < b.size(); ++e) {
    const double d = mean - static_cast<double>(counts[e]);
    EXPECT_NEAR(b[e], d > 0 ? 0.01 : d < 0 ? -0.01 : 0.0, 1e-15) << "expert " << e;
  }
  EXPECT_NE(b, std::vector<double>(b.size(), 0.0));
}

TEST(TrainStep, general_loss_form_matches_the_fused_cross_entropy) {
  const model::ModelConfig cfg = tiny_train_config().model;
  model::HybridModel a(cfg, host_backend(), DType::f64), b(cfg, host_backend(), DType::f64);
  a.init(3), b.init(3);
  AdamW oa(a.params(), {}), ob(b.params(), {});
  TrainStep sa(a, oa, StepConfig{1.0, {}}), sb(b, ob, StepConfig{1.0, {}});
  MaskedCrossEntropy fused;
  GeneralFormCrossEntropy general;
  const std::vector<model::Batch> micro{batch(cfg, 2, 12, 1), batch(cfg, 2, 12, 2, false)};
  int64_t hooks = 0;
  double hook_norm_sq = 0;
  sb.set_grad_hook([&](model::ParamStore& ps) {
    ++hooks;
    for (const model::Param* p : ps.all())
      if (p->requires_grad)
        for (double g : p->grad.to_f64_vector()) hook_norm_sq += g * g;
  });
  const StepResult ra = sa.run(micro, fused, 1e-3, 1), rb = sb.run(micro, general, 1e-3, 1);
  EXPECT_EQ(general.seen, (std::vector<int64_t>{0, 1}));
  EXPECT_NEAR(ra.loss, rb.loss, 1e-13 * ra.loss);
  EXPECT_EQ(ra.normaliser, rb.normaliser);
  EXPECT_EQ(ra.normaliser, count_loss_tokens(micro[0]) + count_loss_tokens(micro[1]));
  EXPECT_NEAR(ra.grad_norm, rb.grad_norm, 1e-11 * ra.grad_norm);
  EXPECT_EQ(hooks, 1);
  EXPECT_NEAR(std::sqrt(hook_norm_sq), rb.grad_norm, 1e-12 * rb.grad_norm);  // complete when the hook runs
  double worst = 0;
  for (size_t k = 0; k < a.params().all().size(); ++k) {
    const model::Param& pa = *a.params().all()[k];
    if (!pa.requires_grad) continue;
    std::vector<double> ga = pa.grad.to_f64_vector(), gb = b.params().all()[k]->grad.to_f64_vector();
    double scale = 1e-30, diff = 0;
    for (size_t i = 0; i < ga.size(); ++i) scale = std::max(scale, std::fabs(ga[i])), diff = std::max(diff, std::fabs(ga[i] - gb[i]));
    worst = std::max(worst, diff / scale);
  }
  EXPECT_LT(worst, 1e-10);
  // Evaluation through either form gives the same mean.
  EXPECT_NEAR(sa.evaluate(micro[0], fused).mean(), sb.evaluate(micro[0], general).mean(), 1e-13);
}

// The step's one read of the deferred loss values: each micro-batch's sum, added in order.
TEST(TrainStep, sum_loss_values_adds_each_micro_batch_in_order) {
  const Tensor a = Tensor::from_vector<float>({3}, {0.5f, 1.25f, 2.0f});
  const Tensor b = Tensor::from_vector<float>({2, 2}, {1e-3f, 4.0f, 0.0f, 8.5f});
  EXPECT_EQ(sum_loss_values({}), 0.0);
  const double sa = 0.5 + 1.25 + 2.0, sb = static_cast<double>(1e-3f) + 4.0 + 0.0 + 8.5;
  EXPECT_EQ(sum_loss_values({a, b}), sa + sb);
  EXPECT_EQ(sum_loss_values({b}), sb);
}

// Everything a step reads is what it was given: an inference forward between steps (a rollout,
// an evaluation) leaves the MoE expert counts, the bias update and the weights as they would be.
TEST(TrainStep, forwards_between_steps_do_not_touch_moe_balancing) {
  const model::ModelConfig cfg = tiny_train_config().model;
  MoeSection moe;
  moe.moe_router_enable_expert_bias = true;
  moe.moe_router_bias_update_rate = 0.01;
  moe.moe_router_load_balancing_type = "seq_aux_loss";
  moe.moe_aux_loss_coeff = 0.01;
  std::vector<double> bias[2];
  double loss[2] = {0, 0};
  for (int interleave = 0; interleave < 2; ++interleave) {
    model::HybridModel net(cfg, host_backend(), DType::f64);
    net.init(4);
    AdamW opt(net.params(), {});
    TrainStep step(net, opt, StepConfig{1.0, moe});
    MaskedCrossEntropy ce;
    for (int s = 1; s <= 3; ++s) {
      const StepResult r = step.run({batch(cfg, 2, 12, 10 * s), batch(cfg, 2, 12, 10 * s + 1)}, ce, 1e-2, s);
      EXPECT_GT(r.aux_loss, 0.0);
      EXPECT_GT(r.moe_max_load, 0.0);
      loss[interleave] = r.loss;
      if (interleave) {
        model::ForwardStats stats;  // a rollout-like forward on other data, with statistics asked
        Context ctx{&host_backend(), nullptr, DType::f64};
        net.token_logprobs(ctx, batch(cfg, 3, 7, 999).input_ids, batch(cfg, 3, 7, 999).labels, &stats);
        EXPECT_EQ(stats.moe.size(), 1u);
      }
    }
    bias[interleave] = net.params().get("backbone.layers.3.mixer.gate.e_score_correction_bias").value.to_f64_vector();
  }
  EXPECT_EQ(loss[0], loss[1]);
  EXPECT_EQ(bias[0], bias[1]);
  EXPECT_NE(bias[0], std::vector<double>(bias[0].size(), 0.0));  // the update did run
}

TEST(TrainStep, refuses_a_global_batch_without_loss_tokens) {
  const model::ModelConfig cfg = tiny_train_config().model;
  model::HybridModel net(cfg, host_backend(), DType::f64);
  net.init(1);
  AdamW opt(net.params(), {});
  TrainStep step(net, opt, StepConfig{});
  MaskedCrossEntropy ce;
  model::Batch b = batch(cfg, 1, 8, 5);
  b.loss_mask = Tensor::zeros({1, 8}, DType::f64);
  try {
    step.run({b}, ce, 1e-3, 7);
    ADD_FAILURE() << "a step without loss tokens ran";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("iteration 7: the global batch has no token with a label"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(opt.steps_taken(), 0);
}

// token_logprobs is the log-softmax of logits() at the targets (0 where ignored).
TEST(HybridModelHead, token_logprobs_are_log_softmax_of_the_logits) {
  const model::ModelConfig cfg = tiny_train_config().model;
  model::HybridModel net(cfg, host_backend(), DType::f64);
  net.init(2);
  Context ctx{&host_backend(), nullptr, DType::f64};
  const model::Batch b = batch(cfg, 2, 6, 8);
  const std::vector<double> lp = net.token_logprobs(ctx, b.input_ids, b.labels).to_f64_vector();
  const std::vector<double> z = net.logits(ctx, b.input_ids).to_f64_vector(), y = b.labels.to_f64_vector();
  const int64_t V = cfg.vocab_size;
  ASSERT_EQ(lp.size(), y.size());
  for (size_t n = 0; n < y.size(); ++n) {
    if (y[n] < 0) {
      EXPECT_EQ(lp[n], 0.0);
      continue;
    }
    double mx = -1e300, s = 0;
    for (int64_t v = 0; v < V; ++v) mx = std::max(mx, z[n * V + v]);
    for (int64_t v = 0; v < V; ++v) s += std::exp(z[n * V + v] - mx);
    EXPECT_NEAR(lp[n], z[n * V + static_cast<int64_t>(y[n])] - mx - std::log(s), 1e-12) << n;
  }
}

}  // namespace
}  // namespace nemotron::train
