// The attention mixer as harness cases: float64 gradient checks of the whole block (du and every
// parameter) for GQA ratios 2 and 4, with and without RoPE, head_dim != H / nq, with and without
// biases, Llama-3 scaled RoPE (DeciLM); and realistic sizes (head_dim 128, T = 300) on the
// backends only.
#include "block_configs.h"
#include "mixer_case.h"
#include "model/attention_mixer.h"

namespace nemotron::testing {
namespace {

using model::AttentionMixer;

std::unique_ptr<model::Mixer> make_attention(const model::ModelConfig& c, model::ParamStore& s) {
  return std::make_unique<AttentionMixer>(c, s, "backbone.layers.1.mixer.", 1);
}

bool is_k_bias(const std::string& name) { return name.ends_with("k_proj.bias"); }

std::pair<double, double> scale_range(const std::string&, const Shape& shape) { return unit_gain_range(shape); }

// Without RoPE the k_proj bias adds q.b_k to every score of a query row, which the softmax
// ignores: its exact gradient is zero, so a relative comparison would only compare rounding
// noise. It is left out of those checks and asserted to vanish in its own test
// (attention_mixer_test.cpp). (With RoPE the bias rotates with the position, its gradient is not
// zero, and it is checked.)
class AttentionMixerCase : public MixerCase {
 public:
  AttentionMixerCase(model::ModelConfig cfg, int64_t B, int64_t T, bool scale = false)
      : MixerCase("attention_mixer", cfg, B, T, make_attention, scale ? ParamRange(scale_range) : ParamRange()),
        scale_(scale) {}
  bool grad_check() const override { return !scale_; }
  std::vector<InputSpec> inputs() const override {
    std::vector<InputSpec> in = MixerCase::inputs();
    for (InputSpec& spec : in)
      if (skip(spec.name)) spec.differentiable = false;
    return in;
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    std::vector<Tensor> grads = MixerCase::backward(ctx, in, douts);
    std::vector<InputSpec> specs = inputs();
    for (size_t i = 0; i < specs.size(); ++i)
      if (skip(specs[i].name)) grads[i] = Tensor();
    return grads;
  }

 private:
  bool skip(const std::string& name) const { return config().position_embedding_type != "rope" && is_k_bias(name); }
  std::string extra_params() const override {
    const model::ModelConfig& c = config();
    return fmt::format("H={},nq={},nkv={},hd={},rope={}{},bias={}", c.hidden_size, c.num_attention_heads,
                       c.num_key_value_heads, c.head_dim, c.position_embedding_type == "rope" ? 1 : 0,
                       c.rope_scaling_factor > 0 ? fmt::format(",llama3(theta={},factor={},L={})", c.rope_theta,
                                                               c.rope_scaling_factor,
                                                               c.rope_original_max_position_embeddings)
                                                 : "",
                       c.attention_bias ? 1 : 0);
  }
  bool scale_;
};

NM_OP_CASES(attention_mixer_cases) {
  CaseList c;
  c.push_back(std::make_unique<AttentionMixerCase>(attention_config(12, 4, 2, 5, false, false), 2, 5));
  c.push_back(std::make_unique<AttentionMixerCase>(attention_config(10, 4, 1, 6, true, true), 3, 7));
  c.push_back(std::make_unique<AttentionMixerCase>(attention_config(9, 2, 1, 4, true, false), 2, 9));
  c.push_back(std::make_unique<AttentionMixerCase>(attention_config(8, 8, 2, 3, false, true), 2, 3));
  // Realistic: Nano's attention (no RoPE, GQA 2) at head_dim 128; T = 300 is no multiple of a tile.
  c.push_back(std::make_unique<AttentionMixerCase>(attention_config(256, 4, 2, 128, false, false), 1, 300, true));
  // Llama-3 RoPE: L = 16 puts hd = 8's pairs in all three bands; then the 49B's RoPE (B.3) on
  // one KV group of 128-wide heads.
  model::ModelConfig l3 = attention_config(16, 4, 1, 8, true, false);
  l3.rope_scaling_factor = 4.0, l3.rope_original_max_position_embeddings = 16;
  c.push_back(std::make_unique<AttentionMixerCase>(l3, 2, 9));
  model::ModelConfig s49 = attention_config(256, 8, 1, 128, true, false);
  s49.rope_theta = 500000.0, s49.rope_scaling_factor = 8.0, s49.rope_original_max_position_embeddings = 8192;
  c.push_back(std::make_unique<AttentionMixerCase>(s49, 1, 300, true));
  return c;
}

}  // namespace
}  // namespace nemotron::testing
