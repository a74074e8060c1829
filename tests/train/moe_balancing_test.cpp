// MoE load balancing (reference/architectures.md A.7.4): the seq_aux_loss value against a direct
// computation, its gradient (router weights and the input) against float64 central differences,
// and the aux-loss-free expert-bias update rule.
#include "train/moe_balancing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/rng.h"
#include "model/moe_mixer.h"

namespace nemotron::train {
namespace {

model::ModelConfig moe_config(int64_t E, int64_t K) {
  model::ModelConfig c;
  c.hidden_size = 8;
  c.hybrid_override_pattern = "E";
  c.n_routed_experts = E;
  c.num_experts_per_tok = K;
  c.moe_intermediate_size = 8;
  c.moe_shared_expert_intermediate_size = 8;
  c.n_shared_experts = 1;
  c.routed_scaling_factor = 1.5;
  return c;
}

struct Fixture {
  model::ParamStore store{host_backend(), DType::f64};
  model::MoeMixer moe;
  Tensor u, dout;
  Fixture(int64_t E, int64_t K, int64_t B, int64_t S) : moe(moe_config(E, K), store, "m.", 0) {
    uint64_t stream = 1;
    for (model::Param* p : store.all()) {
      const bool gate = p->name == "m.gate.weight";
      fill_uniform(p->value, Philox(7, stream++), gate ? -2.0 : -0.5, gate ? 2.0 : 0.5);
    }
    u = Tensor::empty({B, S, 8}, DType::f64);
    dout = Tensor::empty({B, S, 8}, DType::f64);
    fill_uniform(u, Philox(8, 1), -1, 1);
    fill_uniform(dout, Philox(8, 2), -1, 1);
  }
  model::MoeLayerStats last;  // of the last objective() forward
  // <dout, moe(u)> + grad_scale * aux: the objective whose gradient the backward computes.
  double objective(double grad_scale) {
    Context ctx{&host_backend(), nullptr, DType::f64};
    Tensor out = moe.forward(ctx, u, nullptr, &last);
    double j = 0;
    for (int64_t i = 0; i < out.numel(); ++i) j += out.data<double>()[i] * dout.data<double>()[i];
    return j + grad_scale * last.aux_loss;
  }
};

// The loss straight from A.7.4: logits = x W^T, s = sigmoid, p = s / sum s, top-K of p.
double direct_aux(Fixture& f, int64_t E, int64_t K, int64_t B, int64_t S, double coeff) {
  const double* W = f.store.get("m.gate.weight").value.data<double>();
  const double* x = f.u.data<double>();
  double total = 0;
  for (int64_t b = 0; b < B; ++b) {
    std::vector<double> count(E, 0), psum(E, 0);
    for (int64_t t = 0; t < S; ++t) {
      std::vector<double> s(E);
      double z = 0;
      for (int64_t e = 0; e < E; ++e) {
        double l = 0;
        for (int64_t h = 0; h < 8; ++h) l += x[(b * S + t) * 8 + h] * W[e * 8 + h];
        z += (s[e] = 1 / (1 + std::exp(-l)));
      }
      std::vector<int64_t> order(E);
      for (int64_t e = 0; e < E; ++e) order[e] = e, psum[e] += K > 1 ? s[e] / z : s[e];
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return s[a] > s[c]; });
      for (int64_t j = 0; j < K; ++j) count[order[j]] += 1;
    }
    double inner = 0;
    for (int64_t e = 0; e < E; ++e) inner += count[e] * psum[e];
    total += static_cast<double>(E) / (K * S * S) * inner;
  }
  return coeff * total / B;
}

TEST(SeqAuxLoss, value_matches_the_formula) {
  for (auto [E, K] : {std::pair<int64_t, int64_t>{4, 2}, {6, 1}}) {
    SCOPED_TRACE(fmt::format("E={} K={}", E, K));
    Fixture f(E, K, 3, 5);
    f.moe.set_seq_aux_loss(0.25, 1.0);
    f.objective(1.0);
    EXPECT_NEAR(f.last.aux_loss, direct_aux(f, E, K, 3, 5, 0.25), 1e-14);
    EXPECT_GT(f.last.aux_loss, 0.0);
    f.moe.set_seq_aux_loss(0.0, 1.0);
    f.objective(1.0);
    EXPECT_EQ(f.last.aux_loss, 0.0);
  }
}

// Float64 central differences of <dout, out> + grad_scale * aux against the backward, for every
// router weight and every input element. The main expert choice is pinned (piecewise constant).
TEST(SeqAuxLoss, gradient_matches_fd_f64) {
  for (auto [E, K] : {std::pair<int64_t, int64_t>{4, 2}, {6, 1}}) {
    SCOPED_TRACE(fmt::format("E={} K={}", E, K));
    const int64_t B = 2, S = 5;
    const double coeff = 0.3, scale = 0.7;
    Fixture f(E, K, B, S);
    f.moe.set_seq_aux_loss(coeff, scale);
    Context ctx{&host_backend(), nullptr, DType::f64};
    f.objective(scale);
    f.moe.force_selection(f.last.selection.clone());
    f.store.zero_grads();
    std::unique_ptr<model::MixerSaved> saved;
    f.moe.forward(ctx, f.u, &saved);
    Tensor du = f.moe.backward(ctx, *saved, f.dout);

    double max_err = 0, max_ref = 0, aux_part = 0;
    auto check = [&](double* w, double analytic) {
      const double h = 1e-6, keep = *w;
      *w = keep + h;
      const double jp = f.objective(scale);
      *w = keep - h;
      const double jm = f.objective(scale);
      *w = keep;
      const double num = (jp - jm) / (2 * h);
      max_err = std::max(max_err, std::fabs(num - analytic));
      max_ref = std::max(max_ref, std::fabs(num));
    };
    model::Param& gate = f.store.get("m.gate.weight");
    for (int64_t i = 0; i < gate.value.numel(); ++i) check(gate.value.data<double>() + i, gate.grad.data<double>()[i]);
    for (int64_t i = 0; i < f.u.numel(); ++i) check(f.u.data<double>() + i, du.data<double>()[i]);
    EXPECT_LT(max_err, 1e-7 * std::max(1.0, max_ref)) << "max |fd - analytic| " << max_err << " of " << max_ref;

    // The aux term is not negligible in what was checked: its own gradient is visible.
    f.moe.set_seq_aux_loss(coeff, 0.0);  // same forward, no aux gradient
    model::ParamStore& st = f.store;
    std::vector<double> with(gate.grad.data<double>(), gate.grad.data<double>() + gate.grad.numel());
    st.zero_grads();
    f.moe.forward(ctx, f.u, &saved);
    f.moe.backward(ctx, *saved, f.dout);
    for (int64_t i = 0; i < gate.grad.numel(); ++i)
      aux_part = std::max(aux_part, std::fabs(with[i] - gate.grad.data<double>()[i]));
    EXPECT_GT(aux_part, 1e3 * max_err);
  }
}

TEST(ExpertBias, moves_towards_the_mean_load_by_the_rate) {
  model::ParamStore store(host_backend(), DType::f32);
  model::Param& b = store.add("bias", {4}, false);
  b.value.data<float>()[1] = 0.5f;
  update_expert_bias(b, {3, 1, 2, 2}, 1e-3);  // mean 2: overloaded down, underloaded up, equal stays
  EXPECT_FLOAT_EQ(b.value.data<float>()[0], -1e-3f);
  EXPECT_FLOAT_EQ(b.value.data<float>()[1], 0.5f + 1e-3f);
  EXPECT_EQ(b.value.data<float>()[2], 0.0f);
  EXPECT_EQ(b.value.data<float>()[3], 0.0f);
}

}  // namespace
}  // namespace nemotron::train
