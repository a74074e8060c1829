// The Mamba-2 mixer as harness cases: float64 gradient checks of the whole mixer (du and every
// parameter) over ragged chunks, with and without biases, with time_step_limit clamping; and a
// realistic size (P = 64, N = 128, chunk 128, T = 300: a ragged last chunk) on the backends only.
#include <cmath>

#include "block_configs.h"
#include "mixer_case.h"
#include "model/mamba2_mixer.h"

namespace nemotron::testing {
namespace {

std::unique_ptr<model::Mixer> make_mamba(const model::ModelConfig& cfg, model::ParamStore& store) {
  return std::make_unique<model::Mamba2Mixer>(cfg, store, kMambaPrefix, 0);
}

std::pair<double, double> small_range(const std::string& name, const Shape&) { return mamba_param_range(name); }
// Projections at unit gain keep dt_raw about N(0, 0.6) at any width, so dt stays realistic.
std::pair<double, double> scale_range(const std::string& name, const Shape& shape) {
  return unit_gain_range(shape, mamba_param_range(name));
}

class Mamba2Case : public MixerCase {
 public:
  Mamba2Case(model::ModelConfig cfg, int64_t B, int64_t T, bool scale = false)
      : MixerCase("mamba2_mixer", std::move(cfg), B, T, make_mamba, scale ? scale_range : small_range),
        scale_(scale) {}
  bool grad_check() const override { return !scale_; }
  std::string extra_params() const override {
    const model::ModelConfig& c = config();
    std::string s = fmt::format("H={},nH={},P={},G={},N={},K={},chunk={},conv_bias={},bias={}", c.hidden_size,
                                c.mamba_num_heads, c.mamba_head_dim, c.n_groups, c.ssm_state_size, c.conv_kernel,
                                c.chunk_size, c.use_conv_bias ? 1 : 0, c.use_bias ? 1 : 0);
    if (std::isfinite(c.time_step_limit_max))
      s += fmt::format(",limit=({},{})", c.time_step_limit_min, c.time_step_limit_max);
    return s;
  }

 private:
  bool scale_;
};

NM_OP_CASES(mamba2_mixer_cases) {
  CaseList c;
  // T = 11 over chunks of 4 (ragged), two heads per group, conv bias.
  c.push_back(std::make_unique<Mamba2Case>(mamba_config(8, 4, 3, 2, 5, 4, 4, true, false), 2, 11));
  // No conv bias, in/out_proj biases, one head per group, T = 6 over chunks of 4.
  c.push_back(std::make_unique<Mamba2Case>(mamba_config(6, 2, 4, 2, 3, 3, 4, false, true), 3, 6));
  // time_step_limit clamps part of dt on both sides (dt ranges over about 0.05 .. 0.3).
  model::ModelConfig clamp = mamba_config(8, 4, 3, 2, 5, 4, 4, true, false);
  clamp.time_step_limit_min = 0.1;
  clamp.time_step_limit_max = 0.2;
  c.push_back(std::make_unique<Mamba2Case>(clamp, 2, 7));
  // Realistic heads (Nano's P = 64, N = 128, chunk 128), T = 300 = 2 chunks + 44.
  c.push_back(std::make_unique<Mamba2Case>(mamba_config(256, 8, 64, 2, 128, 4, 128, true, false), 1, 300, true));
  return c;
}

}  // namespace
}  // namespace nemotron::testing
