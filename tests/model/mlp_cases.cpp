// The MLP mixer as harness cases: float64 gradient checks for squared ReLU and SwiGLU (with and
// without biases, and at an explicit width as MoE experts and DeciLM layers use it).
#include <optional>

#include "block_configs.h"
#include "mixer_case.h"
#include "model/mlp_mixer.h"

namespace nemotron::testing {
namespace {

using model::MlpMixer;
using model::MlpSpec;

class MlpMixerCase : public MixerCase {
 public:
  MlpMixerCase(model::ModelConfig cfg, int64_t B, int64_t T, std::optional<MlpSpec> spec = std::nullopt)
      : MixerCase("mlp_mixer", cfg, B, T, factory(spec)), spec_(spec) {}
  std::string extra_params() const override {
    const model::ModelConfig& c = config();
    MlpSpec s = spec_ ? *spec_ : MlpSpec::from_config(c);
    return fmt::format("H={},F={},act={},bias={}{}", c.hidden_size, s.intermediate, s.gated ? "swiglu" : "relu2",
                       s.bias ? 1 : 0, spec_ ? ",explicit" : "");
  }

 private:
  static MixerFactory factory(std::optional<MlpSpec> spec) {
    return [spec](const model::ModelConfig& c, model::ParamStore& s) -> std::unique_ptr<model::Mixer> {
      if (spec) return std::make_unique<MlpMixer>(c, s, "model.layers.3.mlp.", 3, *spec);
      return std::make_unique<MlpMixer>(c, s, "backbone.layers.1.mixer.", 1);
    };
  }
  std::optional<MlpSpec> spec_;
};

NM_OP_CASES(mlp_mixer_cases) {
  CaseList c;
  c.push_back(std::make_unique<MlpMixerCase>(mlp_config(7, 11, "relu2", false), 2, 5));
  c.push_back(std::make_unique<MlpMixerCase>(mlp_config(6, 9, "relu2", true), 3, 3));
  c.push_back(std::make_unique<MlpMixerCase>(mlp_config(7, 10, "silu", false), 2, 5));
  c.push_back(std::make_unique<MlpMixerCase>(mlp_config(5, 13, "silu", true), 3, 7));
  // Explicit width (a DeciLM layer's own F), SwiGLU from the spec, not the config's act.
  c.push_back(std::make_unique<MlpMixerCase>(mlp_config(6, 4, "relu2", false), 2, 3, MlpSpec{6, 9, true, false}));
  return c;
}

}  // namespace
}  // namespace nemotron::testing
