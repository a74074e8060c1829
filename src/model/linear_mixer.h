// DeciLM's replace_with_linear sub-block (reference/architectures.md B.1, B.3): out = u W^T with
// one [H, H] weight, no bias, in place of an attention or an FFN. Hub name `<prefix><name>weight`
// (self_attn.linear_attn.weight, mlp.linear_mlp.weight). Per token: mixes no positions.
#pragma once
#include <string>

#include "model/linear.h"
#include "model/mixer.h"
#include "model/model_shard.h"

namespace nemotron::model {

struct LinearMixerSaved : MixerSaved {
  Tensor u;  // input [B, T, H]
};

class LinearMixer : public Mixer {
 public:
  // `prefix` + `name` = the weight's prefix, e.g. "model.layers.3.self_attn." + "linear_attn.".
  // Under tensor parallelism the [H, H] weight stays whole on every rank (it is small and rare):
  // the mixer is not split and computes its whole output.
  LinearMixer(const ModelConfig& cfg, ParamStore& store, const std::string& prefix, const std::string& name,
              const ModelShard& shard = {});

  LayerKind kind() const override { return LayerKind::linear; }
  // W ~ N(0, initializer_range / sqrt(num_layers)): it writes into the residual stream.
  void init(uint64_t seed) override;
  Tensor forward(Context& ctx, const Tensor& u, std::unique_ptr<MixerSaved>* saved,
                 const SequenceLayout& layout = {}) override;
  Tensor backward(Context& ctx, const MixerSaved& saved, const Tensor& dout) override;
  // Per token, so decoding is the plain forward on the new tokens.
  Tensor extend(Context& ctx, const Tensor& u, LayerDecodeState* state, const DecodeBatch& batch) override;
  double forward_flops_per_token(int64_t T) const override;

 private:
  double std_;
  Linear w_;
};

}  // namespace nemotron::model
