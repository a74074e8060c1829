#include "model/mlp_mixer.h"

#include "ops/activations.h"
#include "ops/fused_projection.h"

namespace nemotron::model {

MlpSpec MlpSpec::from_config(const ModelConfig& cfg) {
  if (cfg.mlp_hidden_act != "relu2" && !cfg.gated_mlp())
    throw InputError(fmt::format("mlp_hidden_act: expected \"relu2\" or \"silu\", got \"{}\"", cfg.mlp_hidden_act));
  if (cfg.intermediate_size <= 0)
    throw InputError(fmt::format("intermediate_size: expected a positive width, got {}", cfg.intermediate_size));
  return MlpSpec{cfg.hidden_size, cfg.intermediate_size, cfg.gated_mlp(), cfg.mlp_bias};
}

MlpMixer::MlpMixer(const ModelConfig& cfg, ParamStore& store, const std::string& prefix, int64_t layer_index)
    : MlpMixer(cfg, store, prefix, layer_index, MlpSpec::from_config(cfg)) {}

MlpMixer::MlpMixer(const ModelConfig& cfg, ParamStore& store, const std::string& prefix, int64_t,
                   const MlpSpec& spec, const ModelShard& shard)
    : spec_(spec), split_(shard.tensor_parallel()), init_std_(cfg.initializer_range), out_std_(output_init_std(cfg)) {
  NM_CHECK(spec.in_dim > 0 && spec.intermediate > 0, "mlp {}: widths {} -> {}", prefix, spec.in_dim,
           spec.intermediate);
  const TensorSplit column = TensorSplit::column(shard), row = TensorSplit::row(shard);
  // Registration order follows the Hub checkpoints: gate_proj, up_proj, down_proj.
  if (spec.gated) gate_ = Linear(store, prefix + "gate_proj.", spec.in_dim, spec.intermediate, spec.bias, column);
  up_ = Linear(store, prefix + "up_proj.", spec.in_dim, spec.intermediate, spec.bias, column);
  down_ = Linear(store, prefix + "down_proj.", spec.intermediate, spec.in_dim, spec.bias, row);
  if (spec.gated) gate_up_ = FusedLinears({&gate_, &up_});
}

void MlpMixer::init(uint64_t seed) {
  if (gate_.defined()) gate_.init(seed, init_std_);
  up_.init(seed, init_std_);
  down_.init(seed, out_std_);
}

Tensor MlpMixer::forward(Context& ctx, const Tensor& u, std::unique_ptr<MixerSaved>* saved, const SequenceLayout&) {
  Tensor y;  // made by down_proj's forward_output (in row chunks under tensor overlap)
  project(ctx, u, &y, saved, false);
  return y.view(u.shape());
}

Tensor MlpMixer::backward(Context& ctx, const MixerSaved& saved, const Tensor& dout) {
  Tensor dx = ctx.empty(dout.shape(), dout.dtype());
  backward_into(ctx, saved, dout, dx);
  return dx;
}

void MlpMixer::forward_into(Context& ctx, const Tensor& x, Tensor& y, std::unique_ptr<MixerSaved>* saved,
                            bool accumulate) {
  NM_CHECK(x.dim(-1) == spec_.in_dim && y.shape() == x.shape(), "mlp: x {} -> y {}, width {}", x.shape().str(),
           y.shape().str(), spec_.in_dim);
  project(ctx, x, &y, saved, accumulate);
}

void MlpMixer::project(Context& ctx, const Tensor& x, Tensor* y, std::unique_ptr<MixerSaved>* saved, bool accumulate) {
  NM_CHECK(x.dim(-1) == spec_.in_dim, "mlp: x {}, width {}", x.shape().str(), spec_.in_dim);
  const int64_t rows = x.numel() / spec_.in_dim;
  Tensor x2 = x.view({rows, spec_.in_dim});
  LinearSaved kept[3];  // up, gate, down
  LinearSaved* keep = saved ? kept : nullptr;
  Tensor up, act, gate;
  if (!saved && gate_up_.active()) {  // a frozen model's forward: one GEMM, SwiGLU on its halves
    act = ctx.empty({rows, up_.out_features()}, x2.dtype());
    ops::swiglu_halves_forward(ctx, gate_up_.forward(ctx, x2), act);
  } else {
    up = up_.forward(ctx, x2, keep ? &kept[0] : nullptr);
    act = ctx.empty(up.shape(), up.dtype());
  }
  if (up.defined() && spec_.gated) {
    gate = gate_.forward(ctx, x2, keep ? &kept[1] : nullptr);
    ops::swiglu_forward(ctx, gate, up, act);
  } else if (up.defined()) {
    ops::relu2_forward(ctx, up, act);
  }
  if (y->defined()) {
    Tensor y2 = y->view({rows, spec_.in_dim});
    down_.forward(ctx, act, y2, accumulate, keep ? &kept[2] : nullptr);
  } else {
    *y = down_.forward_output(ctx, act, keep ? &kept[2] : nullptr);
  }
  if (saved) {
    auto s = std::make_unique<MlpSaved>();
    s->x = x2;
    if (spec_.gated) s->up = up, s->gate = gate;
    else s->act = act;
    s->up_proj = std::move(kept[0]);
    s->gate_proj = std::move(kept[1]);
    s->down_proj = std::move(kept[2]);
    *saved = std::move(s);
  }
}

void MlpMixer::backward_into(Context& ctx, const MixerSaved& saved_base, const Tensor& dout, Tensor& dx,
                             bool accumulate) {
  const auto& s = dynamic_cast<const MlpSaved&>(saved_base);
  const int64_t rows = s.x.dim(0), F = up_.out_features();
  NM_CHECK(dout.numel() == rows * spec_.in_dim && dx.numel() == rows * spec_.in_dim,
           "mlp backward: dout {} / dx {} for {} rows of {}", dout.shape().str(), dx.shape().str(), rows,
           spec_.in_dim);
  Tensor dy = dout.view({rows, spec_.in_dim}), dx2 = dx.view({rows, spec_.in_dim});
  // The down_proj input for dW_down: SwiGLU's recomputed, relu2's kept.
  Tensor act = s.act;
  if (spec_.gated) {
    act = ctx.empty({rows, F}, dout.dtype());
    ops::swiglu_forward(ctx, s.gate, s.up, act);
  }
  Tensor dact = ctx.empty({rows, F}, dout.dtype());
  down_.backward(ctx, act, dy, &dact, false, &s.down_proj);
  if (spec_.gated) {
    Tensor dgate = ctx.empty({rows, F}, dout.dtype()), dup = ctx.empty({rows, F}, dout.dtype());
    ops::swiglu_backward(ctx, s.gate, s.up, dact, dgate, dup);
    gate_.backward(ctx, s.x, dgate, &dx2, accumulate, &s.gate_proj);
    up_.backward(ctx, s.x, dup, &dx2, true, &s.up_proj);
  } else {
    ops::relu2_backward_from_output(ctx, act, dact, dact);  // in place: dact becomes dup
    up_.backward(ctx, s.x, dact, &dx2, accumulate, &s.up_proj);
  }
}

double MlpMixer::forward_flops_per_token(int64_t) const {
  return (spec_.gated ? 3.0 : 2.0) * up_.flops_per_row();
}

}  // namespace nemotron::model
