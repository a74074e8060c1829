// The MLP mixer beyond its harness cases (mlp_cases.cpp): Hub names, the FLOP count, and the
// forward against a direct per-token computation.
#include <gtest/gtest.h>

#include <cmath>

#include "block_configs.h"
#include "core/rng.h"
#include "harness.h"
#include "model/mlp_mixer.h"

namespace nemotron::testing {
namespace {

using model::MlpMixer;
using model::ModelConfig;

TEST(MlpMixer, registers_hub_names_and_flops) {
  model::ParamStore relu(host_backend(), DType::f64);
  MlpMixer a(mlp_config(8, 24, "relu2", false), relu, "backbone.layers.1.mixer.", 1);
  EXPECT_EQ(relu.all().size(), 2u);
  EXPECT_EQ(relu.get("backbone.layers.1.mixer.up_proj.weight").value.shape(), Shape({24, 8}));
  EXPECT_EQ(relu.get("backbone.layers.1.mixer.down_proj.weight").value.shape(), Shape({8, 24}));
  EXPECT_DOUBLE_EQ(a.forward_flops_per_token(100), 4.0 * 8 * 24);
  model::ParamStore glu(host_backend(), DType::f64);
  MlpMixer b(mlp_config(8, 24, "silu", true), glu, "mlp.", 0);
  EXPECT_EQ(glu.get("mlp.gate_proj.weight").value.shape(), Shape({24, 8}));
  EXPECT_EQ(glu.get("mlp.gate_proj.bias").value.shape(), Shape({24}));
  EXPECT_EQ(glu.get("mlp.down_proj.bias").value.shape(), Shape({8}));
  EXPECT_DOUBLE_EQ(b.forward_flops_per_token(1), 6.0 * 8 * 24);
  model::ParamStore bad(host_backend(), DType::f64);
  EXPECT_THROW(MlpMixer(mlp_config(8, 24, "gelu", false), bad, "", 0), InputError);
}

// y = Wd act(Wu x) computed one token at a time from the stored weights.
TEST(MlpMixer, forward_matches_direct_per_token_formula) {
  Context ctx = cpu_context(DType::f64);
  for (const char* act : {"relu2", "silu"}) {
    const int64_t H = 5, F = 7;
    ModelConfig cfg = mlp_config(H, F, act, false);
    cfg.initializer_range = 0.5;
    model::ParamStore store(host_backend(), DType::f64);
    MlpMixer m(cfg, store, "", 0);
    m.init(11);
    Tensor u = Tensor::empty({2, 3, H}, DType::f64);
    fill_uniform(u, Philox(2), -1, 1);
    std::vector<double> y = m.forward(ctx, u, nullptr).to_f64_vector();
    const double* Wu = store.get("up_proj.weight").value.data<double>();
    const double* Wd = store.get("down_proj.weight").value.data<double>();
    const double* Wg = cfg.gated_mlp() ? store.get("gate_proj.weight").value.data<double>() : nullptr;
    const double* x = u.data<double>();
    double err = 0;
    for (int64_t n = 0; n < 6; ++n) {
      std::vector<double> a(F);
      for (int64_t f = 0; f < F; ++f) {
        double up = 0, gate = 0;
        for (int64_t i = 0; i < H; ++i) up += Wu[f * H + i] * x[n * H + i];
        if (Wg) {
          for (int64_t i = 0; i < H; ++i) gate += Wg[f * H + i] * x[n * H + i];
          a[f] = gate / (1 + std::exp(-gate)) * up;
        } else {
          a[f] = up > 0 ? up * up : 0;
        }
      }
      for (int64_t h = 0; h < H; ++h) {
        double want = 0;
        for (int64_t f = 0; f < F; ++f) want += Wd[h * F + f] * a[f];
        err = std::max(err, std::fabs(y[n * H + h] - want));
      }
    }
    EXPECT_LT(err, 1e-14) << act;
  }
}

}  // namespace
}  // namespace nemotron::testing
