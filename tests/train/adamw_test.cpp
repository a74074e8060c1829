#include <gtest/gtest.h>

#include <cmath>

#include "train/adamw.h"

namespace nemotron::train {

TEST(AdamW, matches_hand_computed_update_and_skips_decay_and_buffers) {
  model::ParamStore store(host_backend(), DType::f64);
  model::Param& w = store.add("w", {2, 1});        // decayed
  model::Param& n = store.add("n.weight", {1});    // 1-D: no decay
  model::Param& b = store.add("bias_buffer", {1});
  store.set_requires_grad(b, false);
  w.value.data<double>()[0] = 1.0, w.value.data<double>()[1] = -2.0;
  n.value.data<double>()[0] = 0.5;
  b.value.data<double>()[0] = 3.0;
  w.grad.data<double>()[0] = 0.1, w.grad.data<double>()[1] = -0.3;
  n.grad.data<double>()[0] = 2.0;
  AdamWConfig cfg{0.9, 0.95, 1e-8, 0.1};
  AdamW opt(store, cfg);
  opt.step(0.01);
  // Step 1: mhat = g, vhat = g^2, so the Adam term is g / (|g| + eps) = sign(g).
  EXPECT_NEAR(w.value.data<double>()[0], 1.0 - 0.01 * (0.1 / (0.1 + 1e-8) + 0.1 * 1.0), 1e-12);
  EXPECT_NEAR(w.value.data<double>()[1], -2.0 - 0.01 * (-0.3 / (0.3 + 1e-8) + 0.1 * -2.0), 1e-12);
  EXPECT_NEAR(n.value.data<double>()[0], 0.5 - 0.01 * (2.0 / (2.0 + 1e-8)), 1e-12);
  EXPECT_EQ(b.value.data<double>()[0], 3.0);
  // Step 2 with a new gradient, against the textbook recurrences.
  w.grad.data<double>()[0] = -0.2;
  double w0 = w.value.data<double>()[0];
  opt.step(0.01);
  double m = 0.9 * (0.1 * 0.1) + 0.1 * -0.2;        // m1 = 0.1 * g1, m2 = 0.9 m1 + 0.1 g2
  double v = 0.95 * (0.05 * 0.01) + 0.05 * 0.04;    // v1 = 0.05 * g1^2, v2 = 0.95 v1 + 0.05 g2^2
  double mhat = m / (1 - 0.81), vhat = v / (1 - 0.95 * 0.95);
  EXPECT_NEAR(w.value.data<double>()[0], w0 - 0.01 * (mhat / (std::sqrt(vhat) + 1e-8) + 0.1 * w0), 1e-12);
  EXPECT_EQ(opt.steps_taken(), 2);
}

TEST(ClipGradNorm, scales_to_max_norm_and_reports_the_unclipped_norm) {
  model::ParamStore store(host_backend(), DType::f32);
  model::Param& a = store.add("a", {2, 1});
  a.grad.data<float>()[0] = 3, a.grad.data<float>()[1] = 4;
  EXPECT_NEAR(clip_grad_norm(store, 0.0), 5.0, 1e-6);  // 0 = no clipping
  EXPECT_NEAR(clip_grad_norm(store, 1.0), 5.0, 1e-6);
  EXPECT_NEAR(a.grad.data<float>()[0], 0.6, 1e-5);
  EXPECT_NEAR(a.grad.data<float>()[1], 0.8, 1e-5);
}

// AdamW::clip_grad_norm leaves the gradients as they are and clips inside the next step: the
// result must equal clipping the gradients in place and stepping, for two steps (the second
// without clipping: the factor is used once).
TEST(ClipGradNorm, optimizer_applies_the_clip_inside_its_step) {
  auto make = [](model::ParamStore& store) {
    model::Param& w = store.add("w", {3, 1});
    const double v[3] = {0.5, -1.0, 2.0};
    for (int i = 0; i < 3; ++i) w.value.data<double>()[i] = v[i];
    return &w;
  };
  auto set_grads = [](model::Param& w, double scale) {
    const double g[3] = {3.0, -4.0, 12.0};  // norm 13
    for (int i = 0; i < 3; ++i) w.grad.data<double>()[i] = scale * g[i];
  };
  model::ParamStore a(host_backend(), DType::f64), b(host_backend(), DType::f64);
  model::Param *wa = make(a), *wb = make(b);
  AdamWConfig cfg{0.9, 0.95, 1e-8, 0.1};
  AdamW opt_a(a, cfg), opt_b(b, cfg);
  set_grads(*wa, 1.0), set_grads(*wb, 1.0);
  EXPECT_NEAR(opt_a.clip_grad_norm(1.0), 13.0, 1e-12);
  EXPECT_EQ(wa->grad.data<double>()[0], 3.0);  // untouched: the step applies the factor
  EXPECT_NEAR(clip_grad_norm(b, 1.0), 13.0, 1e-12);
  opt_a.step(0.01), opt_b.step(0.01);
  set_grads(*wa, 0.01), set_grads(*wb, 0.01);  // norm 0.13: no clipping
  EXPECT_NEAR(opt_a.clip_grad_norm(1.0), 0.13, 1e-12);
  EXPECT_NEAR(clip_grad_norm(b, 1.0), 0.13, 1e-12);
  opt_a.step(0.01), opt_b.step(0.01);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(wa->value.data<double>()[i], wb->value.data<double>()[i], 1e-14) << i;
}

}  // namespace nemotron::train
