#include "model/linear_mixer.h"

namespace nemotron::model {

LinearMixer::LinearMixer(const ModelConfig& cfg, ParamStore& store, const std::string& prefix, const std::string& name,
                         const ModelShard&)
    : std_(output_init_std(cfg)), w_(store, prefix + name, cfg.hidden_size, cfg.hidden_size, false) {}

void LinearMixer::init(uint64_t seed) { w_.init(seed, std_); }

Tensor LinearMixer::forward(Context& ctx, const Tensor& u, std::unique_ptr<MixerSaved>* saved, const SequenceLayout&) {
  Tensor out = w_.forward(ctx, u);
  if (saved) {
    auto s = std::make_unique<LinearMixerSaved>();
    s->u = u;
    *saved = std::move(s);
  }
  return out;
}

Tensor LinearMixer::backward(Context& ctx, const MixerSaved& saved_base, const Tensor& dout) {
  const auto& s = dynamic_cast<const LinearMixerSaved&>(saved_base);
  Tensor du = ctx.empty(s.u.shape(), dout.dtype());
  w_.backward(ctx, s.u, dout, &du);
  return du;
}

Tensor LinearMixer::extend(Context& ctx, const Tensor& u, LayerDecodeState*, const DecodeBatch&) {
  return forward(ctx, u, nullptr);
}

double LinearMixer::forward_flops_per_token(int64_t) const { return w_.flops_per_row(); }

}  // namespace nemotron::model
