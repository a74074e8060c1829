// Mamba2Mixer beyond its harness cases (mamba2_cases.cpp): a forward check against plain loops
// written from reference/architectures.md A.3.2, and the parameter names, init and FLOP count.
#include <gtest/gtest.h>

#include <cmath>

#include "block_configs.h"
#include "core/rng.h"
#include "harness.h"
#include "model/mamba2_mixer.h"

namespace nemotron::testing {
namespace {

// --- forward against plain loops ------------------------------------------------------------

double silu(double v) { return v / (1.0 + std::exp(-v)); }

// A.3.2 steps 1-7 written out directly, with the sequential recurrence of step 5.
std::vector<double> reference_forward(const model::ModelConfig& c, const model::ParamStore& store,
                                      const std::vector<double>& u, int64_t B, int64_t T) {
  const int64_t H = c.hidden_size, nH = c.mamba_num_heads, P = c.mamba_head_dim, G = c.n_groups,
                N = c.ssm_state_size, K = c.conv_kernel, d = nH * P, GN = G * N, conv_dim = d + 2 * GN,
                rows = 2 * d + 2 * GN + nH;
  auto param = [&](const std::string& name) {
    const model::Param* p = store.find(kMambaPrefix + name);
    return p ? p->value.to_f64_vector() : std::vector<double>();
  };
  std::vector<double> W = param("in_proj.weight"), bin = param("in_proj.bias"), cw = param("conv1d.weight"),
                      cb = param("conv1d.bias"), dtb = param("dt_bias"), alog = param("A_log"), Dp = param("D"),
                      nw = param("norm.weight"), Wo = param("out_proj.weight"), bout = param("out_proj.bias");
  std::vector<double> out(B * T * H);
  for (int64_t b = 0; b < B; ++b) {
    std::vector<double> zx(T * rows), act(T * conv_dim), dt(T * nH), y(T * d);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t r = 0; r < rows; ++r) {
        double s = bin.empty() ? 0.0 : bin[r];
        for (int64_t k = 0; k < H; ++k) s += u[(b * T + t) * H + k] * W[r * H + k];
        zx[t * rows + r] = s;
      }
    for (int64_t t = 0; t < T; ++t)
      for (int64_t ch = 0; ch < conv_dim; ++ch) {
        double s = cb.empty() ? 0.0 : cb[ch];
        for (int64_t k = 0; k < K; ++k) {
          int64_t ts = t - (K - 1) + k;
          if (ts >= 0) s += cw[ch * K + k] * zx[ts * rows + d + ch];
        }
        act[t * conv_dim + ch] = silu(s);
      }
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < nH; ++h) {
        double sp = std::log1p(std::exp(zx[t * rows + 2 * d + 2 * GN + h] + dtb[h]));
        dt[t * nH + h] = std::min(std::max(sp, c.time_step_limit_min), c.time_step_limit_max);
      }
    for (int64_t h = 0; h < nH; ++h) {
      const int64_t g = h / (nH / G);
      const double A = -std::exp(alog[h]);
      std::vector<double> S(P * N, 0.0);
      for (int64_t t = 0; t < T; ++t) {
        const double* xt = &act[t * conv_dim + h * P];
        const double* Bt = &act[t * conv_dim + d + g * N];
        const double* Ct = &act[t * conv_dim + d + GN + g * N];
        const double a = std::exp(dt[t * nH + h] * A);
        for (int64_t p = 0; p < P; ++p) {
          double s = 0;
          for (int64_t n = 0; n < N; ++n) {
            S[p * N + n] = a * S[p * N + n] + dt[t * nH + h] * xt[p] * Bt[n];
            s += S[p * N + n] * Ct[n];
          }
          y[t * d + h * P + p] = s + Dp[h] * xt[p];
        }
      }
    }
    const int64_t gs = d / G;
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> v(d);
      for (int64_t i = 0; i < d; ++i) v[i] = y[t * d + i] * silu(zx[t * rows + i]);
      for (int64_t g = 0; g < G; ++g) {
        double ss = 0;
        for (int64_t i = g * gs; i < (g + 1) * gs; ++i) ss += v[i] * v[i];
        double r = 1.0 / std::sqrt(ss / static_cast<double>(gs) + static_cast<double>(c.layer_norm_epsilon));
        for (int64_t i = g * gs; i < (g + 1) * gs; ++i) v[i] *= r * nw[i];
      }
      for (int64_t o = 0; o < H; ++o) {
        double s = bout.empty() ? 0.0 : bout[o];
        for (int64_t i = 0; i < d; ++i) s += v[i] * Wo[o * d + i];
        out[(b * T + t) * H + o] = s;
      }
    }
  }
  return out;
}

void expect_forward_matches_loops(model::ModelConfig cfg, int64_t B, int64_t T) {
  Context ctx = cpu_context(DType::f64);
  model::ParamStore store(host_backend(), DType::f64);
  model::Mamba2Mixer mixer(cfg, store, kMambaPrefix, 0);
  int k = 0;
  for (model::Param* p : store.all()) {
    auto [lo, hi] = mamba_param_range(p->name);
    fill_uniform(p->value, Philox(99, static_cast<uint64_t>(k++)), lo, hi);
  }
  Tensor u = Tensor::empty({B, T, cfg.hidden_size}, DType::f64);
  fill_uniform(u, Philox(98), -1, 1);
  Tensor out = mixer.forward(ctx, u, nullptr);
  Tensor want =
      Tensor::from_vector<double>({B, T, cfg.hidden_size}, reference_forward(cfg, store, u.to_f64_vector(), B, T));
  EXPECT_LT(relative_error(out, want), 1e-12);
}

TEST(Mamba2Mixer, forward_matches_plain_loops_f64) {
  expect_forward_matches_loops(mamba_config(7, 4, 3, 2, 5, 4, 4, true, false), 2, 11);
  expect_forward_matches_loops(mamba_config(6, 6, 2, 3, 4, 3, 16, false, true), 3, 5);
  model::ModelConfig clamp = mamba_config(7, 4, 3, 2, 5, 4, 3, true, true);
  clamp.time_step_limit_min = 0.1;
  clamp.time_step_limit_max = 0.2;
  expect_forward_matches_loops(clamp, 2, 8);
}

// --- parameters, init, FLOPs ----------------------------------------------------------------

TEST(Mamba2Mixer, registers_hub_names_and_shapes) {
  model::ParamStore store(host_backend(), DType::f32);
  model::Mamba2Mixer mixer(mamba_config(16, 4, 8, 2, 6, 4, 8, true, true), store, kMambaPrefix, 0);
  // d = 32, GN = 12, in_proj rows = 2*32 + 2*12 + 4 = 92, conv_dim = 56
  const std::vector<std::tuple<std::string, Shape, bool>> want = {
      {"in_proj.weight", {92, 16}, true}, {"in_proj.bias", {92}, false},  {"conv1d.weight", {56, 1, 4}, true},
      {"conv1d.bias", {56}, false},       {"dt_bias", {4}, false},        {"A_log", {4}, false},
      {"D", {4}, false},                  {"norm.weight", {32}, false},   {"out_proj.weight", {16, 32}, true},
      {"out_proj.bias", {16}, false}};
  ASSERT_EQ(store.all().size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& [name, shape, decay] = want[i];
    const model::Param* p = store.all()[i];
    EXPECT_EQ(p->name, kMambaPrefix + name);
    EXPECT_EQ(p->value.shape(), shape) << name;
    EXPECT_EQ(p->weight_decay, decay) << name;
  }
  model::ParamStore lean(host_backend(), DType::f32);
  model::Mamba2Mixer plain(mamba_config(16, 4, 8, 2, 6, 4, 8, false, false), lean, kMambaPrefix, 0);
  EXPECT_EQ(lean.all().size(), want.size() - 3);
  EXPECT_EQ(lean.find(std::string(kMambaPrefix) + "conv1d.bias"), nullptr);
}

TEST(Mamba2Mixer, rejects_heads_not_divisible_by_groups) {
  model::ParamStore store(host_backend(), DType::f32);
  EXPECT_THROW(model::Mamba2Mixer(mamba_config(16, 6, 8, 4, 6, 4, 8, true, false), store, kMambaPrefix, 3), InputError);
}

double stddev(const std::vector<double>& v) {
  double m = 0, s = 0;
  for (double x : v) m += x;
  m /= static_cast<double>(v.size());
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size()));
}

TEST(Mamba2Mixer, init_follows_hf) {
  model::ModelConfig cfg = mamba_config(64, 8, 16, 2, 16, 4, 64, true, false);
  model::ParamStore store(host_backend(), DType::f64);
  model::Mamba2Mixer mixer(cfg, store, kMambaPrefix, 0);
  mixer.init(1234);
  auto v = [&](const char* name) { return store.get(std::string(kMambaPrefix) + name).value.to_f64_vector(); };
  std::vector<double> a_log = v("A_log"), D = v("D"), dt_bias = v("dt_bias"), norm = v("norm.weight");
  for (int64_t h = 0; h < 8; ++h) {
    EXPECT_NEAR(a_log[h], std::log(h + 1.0), 1e-15);
    EXPECT_EQ(D[h], 1.0);
    double dt = std::log1p(std::exp(dt_bias[h]));  // softplus(dt_bias) is the initial step size
    EXPECT_GE(dt, cfg.time_step_min * (1 - 1e-12));
    EXPECT_LE(dt, cfg.time_step_max * (1 + 1e-12));
  }
  EXPECT_NE(dt_bias[0], dt_bias[1]);
  for (double w : norm) EXPECT_EQ(w, 1.0);
  for (double w : v("conv1d.weight")) EXPECT_LE(std::fabs(w), 0.5);  // 1/sqrt(K)
  for (double w : v("conv1d.bias")) EXPECT_LE(std::fabs(w), 0.5);
  EXPECT_NEAR(stddev(v("in_proj.weight")), 0.02, 0.001);                    // 16,384 samples
  EXPECT_NEAR(stddev(v("out_proj.weight")), 0.02 / std::sqrt(4.0), 0.0006);  // 8,192 samples, 4 layers
  model::ParamStore again(host_backend(), DType::f64);
  model::Mamba2Mixer twin(cfg, again, kMambaPrefix, 0);
  twin.init(1234);
  for (size_t i = 0; i < store.all().size(); ++i)
    EXPECT_EQ(store.all()[i]->value.to_f64_vector(), again.all()[i]->value.to_f64_vector()) << store.all()[i]->name;
}

TEST(Mamba2Mixer, forward_flops_per_token_counts_projections_and_scan) {
  model::ParamStore store(host_backend(), DType::f32);
  model::Mamba2Mixer mixer(mamba_config(8, 4, 3, 2, 5, 4, 4, true, false), store, kMambaPrefix, 0);
  // in_proj 8*48 + out_proj 12*8 = 480 MACs; scan with Q' = 4: 2*4*5 + 4*(4*3 + 2*15) = 208.
  EXPECT_DOUBLE_EQ(mixer.forward_flops_per_token(100), 2.0 * (480 + 208));
  // T = 2 < chunk: Q' = 2: 2*2*5 + 4*(2*3 + 2*15) = 164.
  EXPECT_DOUBLE_EQ(mixer.forward_flops_per_token(2), 2.0 * (480 + 164));
}

}  // namespace
}  // namespace nemotron::testing
