// LoRA adapters (model/lora.h) as harness cases: float64 gradient checks of a mixer whose base
// weights are frozen and whose targeted projections carry an adapter (random A and B, so both
// factors matter), checking du and dA, dB of every adapter, for each wrapped layer kind:
// attention q/k/v (linear_qkv) and o_proj (linear_proj), the MLP's up/gate (linear_fc1) and down
// (linear_fc2), the MoE's shared expert (an MLP under `shared_experts.`), Mamba's in_proj (the
// row-block path: z, xBC, dt as separate GEMMs) and out_proj. Cases with adapter dropout run in a
// training context (Context::dropout active, a fixed key): the mask is a function of the key, not
// of the inputs, so finite differences see the same mask as the backward, which regenerates it.
#include <fmt/ranges.h>

#include "block_configs.h"
#include "mixer_case.h"
#include "model/attention_mixer.h"
#include "model/lora.h"
#include "model/mamba2_mixer.h"
#include "model/mlp_mixer.h"

namespace nemotron::testing {
namespace {

model::LoraConfig lora_config(std::vector<std::string> targets, double dropout) {
  model::LoraConfig c;
  c.dropout = dropout;
  c.target_modules = std::move(targets);
  c.dim = 2;
  c.alpha = 3;  // scale 1.5: a wrong scale shows
  return c;
}

class LoraCase : public MixerCase {
 public:
  LoraCase(const std::string& kind, model::ModelConfig cfg, int64_t B, int64_t T, MixerFactory base,
           std::vector<std::string> targets, ParamRange range = {}, double dropout = 0)
      : MixerCase("lora_" + kind, std::move(cfg), B, T, wrap(std::move(base), targets, dropout), std::move(range)),
        targets_(std::move(targets)),
        dropout_(dropout) {}
  std::string extra_params() const override {
    return fmt::format("targets={}{}", fmt::join(targets_, "+"), dropout_ > 0 ? fmt::format(",dropout={}", dropout_) : "");
  }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Training t(ctx, dropout_ > 0);
    return MixerCase::forward(ctx, in);
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    Training t(ctx, dropout_ > 0);
    return MixerCase::backward(ctx, in, douts);
  }
  // The frozen base weights get no gradient; u and the adapters do.
  std::vector<InputSpec> inputs() const override {
    std::vector<InputSpec> in = MixerCase::inputs();
    for (size_t k = 1; k < in.size(); ++k) in[k].differentiable = model::is_lora_param(in[k].name);
    return in;
  }

 private:
  // A training micro-batch's dropout key for the scope of one call (a fixed key: a fixed mask).
  struct Training {
    Context& ctx;
    DropoutKey before;
    Training(Context& c, bool on) : ctx(c), before(c.dropout) {
      if (on) ctx.dropout = {true, 17, 3, 1};
    }
    ~Training() { ctx.dropout = before; }
  };
  static MixerFactory wrap(MixerFactory base, std::vector<std::string> targets, double dropout) {
    return [base, targets, dropout](const model::ModelConfig& c, model::ParamStore& s) {
      auto mixer = base(c, s);
      model::attach_lora(s, lora_config(targets, dropout), 5, "test");
      return mixer;
    };
  }
  std::vector<std::string> targets_;
  double dropout_;
};

std::unique_ptr<model::Mixer> make_attention(const model::ModelConfig& c, model::ParamStore& s) {
  return std::make_unique<model::AttentionMixer>(c, s, "backbone.layers.1.mixer.", 1);
}
std::unique_ptr<model::Mixer> make_mlp(const model::ModelConfig& c, model::ParamStore& s) {
  return std::make_unique<model::MlpMixer>(c, s, "backbone.layers.2.mixer.", 2);
}
std::unique_ptr<model::Mixer> make_shared_expert(const model::ModelConfig& c, model::ParamStore& s) {
  return std::make_unique<model::MlpMixer>(c, s, "backbone.layers.3.mixer.shared_experts.", 3);
}
std::unique_ptr<model::Mixer> make_mamba(const model::ModelConfig& c, model::ParamStore& s) {
  return std::make_unique<model::Mamba2Mixer>(c, s, kMambaPrefix, 0);
}
std::pair<double, double> mamba_range(const std::string& name, const Shape&) { return mamba_param_range(name); }

NM_OP_CASES(lora_cases) {
  CaseList c;
  c.push_back(std::make_unique<LoraCase>("attention", attention_config(12, 4, 2, 5, false, false), 2, 5, make_attention,
                                         std::vector<std::string>{"linear_qkv", "linear_proj"}));
  c.push_back(std::make_unique<LoraCase>("attention", attention_config(10, 4, 1, 6, true, true), 2, 4, make_attention,
                                         std::vector<std::string>{"linear_qkv"}));
  c.push_back(std::make_unique<LoraCase>("mlp", mlp_config(7, 11, "relu2", false), 2, 5, make_mlp,
                                         std::vector<std::string>{"linear_fc1", "linear_fc2"}));
  c.push_back(std::make_unique<LoraCase>("mlp", mlp_config(5, 9, "silu", true), 3, 3, make_mlp,
                                         std::vector<std::string>{"linear_fc1"}));
  c.push_back(std::make_unique<LoraCase>("shared_expert", mlp_config(6, 10, "relu2", false), 2, 4,
                                         make_shared_expert, std::vector<std::string>{"linear_fc1", "linear_fc2"}));
  c.push_back(std::make_unique<LoraCase>("mamba", mamba_config(8, 4, 3, 2, 5, 4, 4, true, false), 2, 7, make_mamba,
                                         std::vector<std::string>{"in_proj", "out_proj"}, mamba_range));
  c.push_back(std::make_unique<LoraCase>("mamba", mamba_config(6, 2, 4, 2, 3, 3, 4, false, true), 2, 6, make_mamba,
                                         std::vector<std::string>{"in_proj"}, mamba_range));
  // Adapter dropout (p = 0.4: with these few inputs, some of each adapter's are dropped).
  c.push_back(std::make_unique<LoraCase>("attention", attention_config(12, 4, 2, 5, false, false), 2, 5, make_attention,
                                         std::vector<std::string>{"linear_qkv", "linear_proj"}, ParamRange{}, 0.4));
  c.push_back(std::make_unique<LoraCase>("mlp", mlp_config(5, 9, "silu", true), 3, 3, make_mlp,
                                         std::vector<std::string>{"linear_fc1", "linear_fc2"}, ParamRange{}, 0.4));
  c.push_back(std::make_unique<LoraCase>("mamba", mamba_config(8, 4, 3, 2, 5, 4, 4, true, false), 2, 7, make_mamba,
                                         std::vector<std::string>{"in_proj", "out_proj"}, mamba_range, 0.4));
  return c;
}

}  // namespace
}  // namespace nemotron::testing
