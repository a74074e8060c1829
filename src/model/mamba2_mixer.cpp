#include "model/mamba2_mixer.h"

#include <cmath>
#include <functional>
#include <vector>

#include "core/scoped_field.h"
#include "ops/bias.h"
#include "ops/causal_conv1d.h"
#include "ops/causal_conv1d_decode.h"
#include "ops/dt_softplus.h"
#include "ops/embedding.h"
#include "ops/gated_rmsnorm.h"
#include "ops/mamba_a.h"
#include "ops/matmul.h"
#include "ops/ssd_decode.h"
#include "ops/ssd_scan.h"
#include "model/mamba_context.h"
#include "model/tensor_split.h"

namespace nemotron::model {

namespace {

// Overwrites a parameter with host values (any device, any float dtype).
void set_values(Param& p, const std::vector<double>& v) {
  p.value.copy_from(Tensor::from_vector<double>(p.value.shape(), v).to_host(p.value.dtype()));
}

void check_config(const ModelConfig& c, int64_t layer) {
  auto fail = [&](const std::string& what) {
    throw InputError(fmt::format("model config: layer {} (mamba): {}", layer, what));
  };
  if (c.hidden_size <= 0) fail(fmt::format("hidden_size must be positive, got {}", c.hidden_size));
  if (c.mamba_num_heads <= 0) fail(fmt::format("mamba_num_heads must be positive, got {}", c.mamba_num_heads));
  if (c.mamba_head_dim <= 0) fail(fmt::format("mamba_head_dim must be positive, got {}", c.mamba_head_dim));
  if (c.ssm_state_size <= 0) fail(fmt::format("ssm_state_size must be positive, got {}", c.ssm_state_size));
  if (c.n_groups <= 0 || c.mamba_num_heads % c.n_groups != 0)
    fail(fmt::format("n_groups ({}) must divide mamba_num_heads ({})", c.n_groups, c.mamba_num_heads));
  if (c.conv_kernel <= 0) fail(fmt::format("conv_kernel must be positive, got {}", c.conv_kernel));
  if (c.chunk_size <= 0) fail(fmt::format("chunk_size must be positive, got {}", c.chunk_size));
  if (!(c.time_step_limit_min < c.time_step_limit_max))
    fail(fmt::format("time_step_limit must satisfy min < max, got ({}, {})", c.time_step_limit_min,
                     c.time_step_limit_max));
  if (!(0 < c.time_step_min && c.time_step_min <= c.time_step_max))
    fail(fmt::format("time_step_min/max must satisfy 0 < min <= max, got {} and {}", c.time_step_min,
                     c.time_step_max));
}

}  // namespace

Mamba2Mixer::Mamba2Mixer(const ModelConfig& cfg, ParamStore& store, const std::string& prefix, int64_t layer_index,
                         const ModelShard& shard)
    : cfg_(cfg), prefix_(prefix), layer_index_(layer_index), split_(shard.tensor_parallel()) {
  check_config(cfg, layer_index);
  H_ = cfg.hidden_size;
  nH_ = cfg.mamba_num_heads;
  P_ = cfg.mamba_head_dim;
  d_ = nH_ * P_;
  G_ = cfg.n_groups;
  N_ = cfg.ssm_state_size;
  K_ = cfg.conv_kernel;
  GN_ = G_ * N_;
  // Tensor parallelism splits heads and groups (reference/architectures.md C.3): every per-head or
  // per-group block of in_proj, conv1d, dt_bias, A_log, D and the norm on its own; out_proj by
  // columns. The members below are then this rank's sizes.
  const TensorSplit column = TensorSplit::column(shard), row = TensorSplit::row(shard);
  const TensorSplit in_split = TensorSplit::column(shard, {d_, d_, GN_, GN_, nH_});
  const TensorSplit conv_split = TensorSplit::column(shard, {d_, GN_, GN_});
  in_proj_ = Linear(store, prefix + "in_proj.", H_, 2 * d_ + 2 * GN_ + nH_, cfg.use_bias, in_split);
  conv_w_ = &add_split(store, prefix + "conv1d.weight", {d_ + 2 * GN_, 1, K_}, conv_split, true);
  if (cfg.use_conv_bias) conv_b_ = &add_split(store, prefix + "conv1d.bias", {d_ + 2 * GN_}, conv_split, false);
  dt_bias_ = &add_split(store, prefix + "dt_bias", {nH_}, column, false);
  A_log_ = &add_split(store, prefix + "A_log", {nH_}, column, false);
  D_ = &add_split(store, prefix + "D", {nH_}, column, false);
  norm_w_ = &add_split(store, prefix + "norm.weight", {d_}, column, false);
  out_proj_ = Linear(store, prefix + "out_proj.", d_, H_, cfg.use_bias, row);
  first_head_ = shard.tensor_parallel() ? shard.tensor_rank * (nH_ / shard.tensor_size) : 0;
  nH_ = split_extent(nH_, column, prefix + "mamba_num_heads");
  G_ = split_extent(G_, column, prefix + "n_groups");
  d_ = nH_ * P_;
  GN_ = G_ * N_;
}

Mamba2Mixer::Rows Mamba2Mixer::in_rows(Part part) const {
  const int64_t size[kNumParts] = {d_, d_, GN_, GN_, nH_};
  int64_t begin = 0;
  for (int p = 0; p < part; ++p) begin += size[p];
  return {begin, begin + size[part]};
}

std::array<RowBlock, Mamba2Mixer::kNumParts> Mamba2Mixer::in_blocks() const {
  std::array<RowBlock, kNumParts> b;
  for (int p = 0; p < kNumParts; ++p) {
    const Rows r = in_rows(static_cast<Part>(p));
    b[p] = {r.begin, r.end};
  }
  return b;
}

Mamba2Mixer::Rows Mamba2Mixer::conv_rows(Part part) const {
  NM_CHECK(part == kX || part == kB || part == kC, "conv1d covers x, B and C only");
  Rows r = in_rows(part);
  return {r.begin - d_, r.end - d_};  // conv channels are in_proj rows without the leading z
}

void Mamba2Mixer::init(uint64_t seed) {
  const double std = cfg_.initializer_range;
  in_proj_.init(seed, std);
  const double bound = 1.0 / std::sqrt(static_cast<double>(K_));
  init_uniform(*conv_w_, seed, -bound, bound);
  if (conv_b_) init_uniform(*conv_b_, seed, -bound, bound);

  init_uniform(*dt_bias_, seed, std::log(cfg_.time_step_min), std::log(cfg_.time_step_max));
  std::vector<double> dt_bias = dt_bias_->value.to_f64_vector();
  for (double& v : dt_bias) {
    double dt = std::max(std::exp(v), cfg_.time_step_floor);
    v = dt + std::log(-std::expm1(-dt));  // softplus^-1
  }
  set_values(*dt_bias_, dt_bias);

  std::vector<double> a_log(nH_);
  for (int64_t h = 0; h < nH_; ++h) a_log[h] = std::log(static_cast<double>(first_head_ + h + 1));
  set_values(*A_log_, a_log);
  init_constant(*D_, 1.0);
  init_constant(*norm_w_, 1.0);
  const double layers = static_cast<double>(std::max<int64_t>(1, cfg_.num_layers()));
  out_proj_.init(seed, cfg_.rescale_prenorm_residual ? std / std::sqrt(layers) : std);
}

// A = -exp(A_log) in stat_dtype (float32 under bf16: the scan's decay exp(dt A) needs it).
Tensor Mamba2Mixer::A(Context& ctx, DType dtype) const {
  Tensor a = ctx.empty({nH_}, stat_dtype(dtype));
  ops::mamba_a_forward(ctx, A_log_->value, a);
  return a;
}

// conv1d's channels are x, B, C in that order, so the whole weight and bias cover the three parts.
void Mamba2Mixer::convs(Context& ctx, const Tensor* raw[3], const Tensor& seq_idx, bool context_split,
                        Tensor out[3]) const {
  Tensor in[3];
  for (int i = 0; i < 3; ++i) in[i] = *raw[i], out[i] = ctx.empty(raw[i]->shape(), raw[i]->dtype());
  ops::causal_conv1d_forward_parts(ctx, in, conv_w_->value, conv_b_ ? conv_b_->value : Tensor(), {out, 3}, seq_idx);
  if (context_split)
    for (int i = 0; i < 3; ++i) out[i] = context_halo_drop(ctx, out[i], K_ - 1);
}

Tensor Mamba2Mixer::compute_dt(Context& ctx, const Tensor& dt_raw) const {
  Tensor dt = ctx.empty(dt_raw.shape(), stat_dtype(dt_raw.dtype()));
  ops::dt_softplus_forward(ctx, dt_raw, dt_bias_->value, cfg_.time_step_limit_min, cfg_.time_step_limit_max, dt);
  return dt;
}

Tensor Mamba2Mixer::forward(Context& ctx, const Tensor& u, std::unique_ptr<MixerSaved>* saved,
                           const SequenceLayout& layout) {
  NM_CHECK(u.rank() == 3 && u.dim(2) == H_, "{}: mamba input must be [B, T, {}], got {}", prefix_, H_,
           u.shape().str());
  const int64_t B = u.dim(0), T = u.dim(1);
  const DType dtype = u.dtype();

  // in_proj, one GEMM per part: z, x, B, C, dt (pre-conv for x, B, C).
  const int64_t width[kNumParts] = {d_, d_, GN_, GN_, nH_};
  Tensor part_out[kNumParts];
  for (int p = 0; p < kNumParts; ++p) part_out[p] = ctx.empty({B, T, width[p]}, dtype);
  LinearSaved in_kept, out_kept;
  in_proj_.forward_rows(ctx, u, in_blocks(), part_out, saved ? &in_kept : nullptr);
  Tensor &z = part_out[kZ], &dt_raw = part_out[kDt];

  const Tensor& seq_idx = layout.seq_idx;
  const bool cp = layout.context_split;
  // Context parallelism: the conv inputs with their halos, the local chunks as 2B rows of L.
  const int64_t halo = K_ - 1, Bs = cp ? 2 * B : B, Ts = cp ? T / 2 : T;
  Tensor raw[3], conv_seq = seq_idx;
  for (Part p : {kX, kB, kC}) raw[p - kX] = cp ? context_halo_extend(ctx, part_out[p], halo) : part_out[p];
  if (cp && seq_idx.defined()) conv_seq = context_halo_extend(ctx, seq_idx, halo);
  const Tensor* raw_in[3] = {&raw[0], &raw[1], &raw[2]};
  Tensor conv_out[3];
  convs(ctx, raw_in, conv_seq, cp, conv_out);
  Tensor &x = conv_out[0], &Bm = conv_out[1], &Cm = conv_out[2];
  Tensor dt = compute_dt(ctx, dt_raw);

  ops::SsdScanArgs args{x.view({Bs, Ts, nH_, P_}), dt.view({Bs, Ts, nH_}), A(ctx, dtype), Bm.view({Bs, Ts, G_, N_}),
                        Cm.view({Bs, Ts, G_, N_}), D_->value, Tensor(), cfg_.chunk_size,
                        seq_idx.defined() ? seq_idx.view({Bs, Ts}) : Tensor()};
  Tensor y = ctx.empty({B, T, d_}, dtype);
  Tensor y4 = y.view({Bs, Ts, nH_, P_});
  std::shared_ptr<ContextScanChain> chain;
  if (cp) {
    chain = std::make_shared<ContextScanChain>();
    context_scan_forward(ctx, args, y4, *chain);
  } else {
    ops::ssd_scan_forward(ctx, args, y4);
  }

  Tensor normed = ctx.empty({B, T, d_}, dtype), rstd = ctx.empty({B * T, G_}, stat_dtype(dtype));
  ops::gated_rmsnorm_forward(ctx, y, z, norm_w_->value, G_, cfg_.layer_norm_epsilon, normed, rstd);
  Tensor out = out_proj_.forward_output(ctx, normed, saved ? &out_kept : nullptr);

  if (saved) {
    auto s = std::make_unique<Mamba2Saved>();
    s->u = u;
    s->z = z;
    s->x_raw = raw[0];
    s->B_raw = raw[1];
    s->C_raw = raw[2];
    s->x = x;
    s->Bm = Bm;
    s->Cm = Cm;
    s->context_split = cp;
    s->conv_seq_idx = conv_seq;
    s->chain = std::move(chain);
    s->dt_raw = dt_raw;
    s->y = y;
    s->rstd = rstd;
    s->seq_idx = seq_idx;
    s->in_proj = std::move(in_kept);
    s->out_proj = std::move(out_kept);
    *saved = std::move(s);
  }
  return out;
}

Tensor Mamba2Mixer::backward(Context& ctx, const MixerSaved& saved_base, const Tensor& dout) {
  const auto* sp = dynamic_cast<const Mamba2Saved*>(&saved_base);
  NM_CHECK(sp, "{}: backward needs the Mamba2Saved of this mixer's forward", prefix_);
  const Mamba2Saved& s = *sp;
  const int64_t B = s.u.dim(0), T = s.u.dim(1);
  const DType dtype = s.u.dtype();
  expect_shape(dout, s.u.shape(), "mamba dout");

  // out_proj and the gated norm. out_proj's input (the norm's output) is not kept: the norm's
  // backward writes it again beside dy and dz (one pass over y and z), so out_proj's dx comes
  // first and its dW, queued, after. An adapter on out_proj needs its input with dx: then the
  // norm's forward recomputes it first.
  Tensor normed = ctx.empty({B, T, d_}, dtype), d_normed = ctx.empty({B, T, d_}, dtype);
  Tensor dy = ctx.empty({B, T, d_}, dtype), dz = ctx.empty({B, T, d_}, dtype);
  Tensor d_norm_w = grad_sink(ctx, *norm_w_);
  if (out_proj_.weight().lora) {
    Tensor rstd = ctx.empty({B * T, G_}, stat_dtype(dtype));
    ops::gated_rmsnorm_forward(ctx, s.y, s.z, norm_w_->value, G_, cfg_.layer_norm_epsilon, normed, rstd);
    out_proj_.backward(ctx, normed, dout, &d_normed, false, &s.out_proj);
    ops::gated_rmsnorm_backward(ctx, s.y, s.z, norm_w_->value, s.rstd, G_, d_normed, dy, dz, d_norm_w);
  } else {
    std::vector<std::function<void(Context&)>> dw_later;
    {  // an outer queue (tensor-parallel overlap) takes the dW as it would have anyway
      ScopedField<std::vector<std::function<void(Context&)>>*> defer(
          ctx.deferred_weight_grads, ctx.deferred_weight_grads ? ctx.deferred_weight_grads : &dw_later);
      out_proj_.backward(ctx, normed, dout, &d_normed, false, &s.out_proj);  // normed: written just below
    }
    ops::gated_rmsnorm_backward(ctx, s.y, s.z, norm_w_->value, s.rstd, G_, d_normed, dy, dz, d_norm_w, &normed);
    for (auto& dw : dw_later) dw(ctx);
  }

  // Scan: its inputs are the kept conv outputs and dt, recomputed from the saved pre-activations.
  const bool cp = s.context_split;
  const int64_t Bs = cp ? 2 * B : B, Ts = cp ? T / 2 : T, halo = K_ - 1;
  const Tensor &x = s.x, &Bm = s.Bm, &Cm = s.Cm;
  Tensor dt = compute_dt(ctx, s.dt_raw);
  Tensor a = A(ctx, dtype);
  ops::SsdScanArgs args{x.view({Bs, Ts, nH_, P_}), dt.view({Bs, Ts, nH_}), a, Bm.view({Bs, Ts, G_, N_}),
                        Cm.view({Bs, Ts, G_, N_}), D_->value, Tensor(), cfg_.chunk_size,
                        s.seq_idx.defined() ? s.seq_idx.view({Bs, Ts}) : Tensor()};
  Tensor dx = ctx.empty({B, T, d_}, dtype), ddt = ctx.empty({B, T, nH_}, stat_dtype(dtype));
  Tensor dBm = ctx.empty({B, T, GN_}, dtype), dCm = ctx.empty({B, T, GN_}, dtype), dA = ctx.zeros({nH_}, grad_dtype(dtype));
  ops::SsdScanGrads g{dx.view({Bs, Ts, nH_, P_}), ddt.view({Bs, Ts, nH_}), dBm.view({Bs, Ts, G_, N_}),
                      dCm.view({Bs, Ts, G_, N_}), dA, grad_sink(ctx, *D_), Tensor()};
  if (cp) context_scan_backward(ctx, args, *s.chain, dy.view({Bs, Ts, nH_, P_}), g);
  else ops::ssd_scan_backward(ctx, args, dy.view({Bs, Ts, nH_, P_}), nullptr, g);

  if (A_log_->requires_grad) ops::mamba_a_backward(ctx, a, dA, A_log_->grad);  // dA_log += dA * A

  // dt path and conv, back to the in_proj outputs.
  Tensor d_part[kNumParts];
  d_part[kZ] = dz;
  d_part[kDt] = ctx.empty({B, T, nH_}, dtype);
  Tensor d_dt_bias = grad_sink(ctx, *dt_bias_);
  ops::dt_softplus_backward(ctx, s.dt_raw, dt_bias_->value, cfg_.time_step_limit_min, cfg_.time_step_limit_max, ddt,
                            d_part[kDt], d_dt_bias);
  // The three convs' backward in one launch. Context parallelism: the halo rows get no output
  // gradient; their input gradient goes back to the rank whose chunk tail they are.
  const Tensor raw[3] = {s.x_raw, s.B_raw, s.C_raw};
  const Tensor* d_act[3] = {&dx, &dBm, &dCm};
  Tensor d_out[3], d_in[3];
  for (int i = 0; i < 3; ++i) {
    d_out[i] = cp ? context_halo_pad(ctx, *d_act[i], halo) : *d_act[i];
    d_in[i] = ctx.empty(raw[i].shape(), dtype);
  }
  Tensor d_conv_w = grad_sink(ctx, *conv_w_), d_conv_b = conv_b_ ? grad_sink(ctx, *conv_b_) : Tensor();
  ops::causal_conv1d_backward_parts(ctx, raw, conv_w_->value, conv_b_ ? conv_b_->value : Tensor(), d_out, d_in,
                                    d_conv_w, d_conv_b, cp ? s.conv_seq_idx : s.seq_idx);
  for (Part p : {kX, kB, kC}) d_part[p] = cp ? context_halo_reduce(ctx, d_in[p - kX], halo) : d_in[p - kX];

  // in_proj: du = sum over parts of d_part W_part; dW_part += d_part^T u.
  Tensor du = ctx.empty({B, T, H_}, dtype);
  in_proj_.backward_rows(ctx, s.u, in_blocks(), d_part, &du, false, &s.in_proj);
  return du;
}

namespace {

struct Mamba2DecodeState : LayerDecodeState {
  Tensor conv[3];  // x, B, C windows [slots, K-1, width]
  Tensor ssm;      // [slots, nH, P, N]
  void release(int64_t slot) override {
    for (Tensor& c : conv) {
      Tensor w = c.slice(slot, slot + 1);
      w.zero_();
    }
    Tensor s = ssm.slice(slot, slot + 1);
    s.zero_();
  }
  void fork(Context& ctx, const ForkPlan& plan) override {
    for (Tensor& c : conv) copy_rows(ctx, c, plan.from_slots, plan.to_slots);
    copy_rows(ctx, ssm, plan.from_slots, plan.to_slots);
  }
  int64_t bytes() const override {
    return static_cast<int64_t>(conv[0].nbytes() + conv[1].nbytes() + conv[2].nbytes() + ssm.nbytes());
  }
  std::vector<Tensor> slot_tensors() const override { return {conv[0], conv[1], conv[2], ssm}; }
};

}  // namespace

std::unique_ptr<LayerDecodeState> Mamba2Mixer::make_decode_state(const DecodeConfig& cfg, Backend& backend,
                                                                 DType dtype) const {
  auto s = std::make_unique<Mamba2DecodeState>();
  const int64_t width[3] = {d_, GN_, GN_};
  for (int p = 0; p < 3; ++p) s->conv[p] = Tensor::zeros({cfg.max_slots, K_ - 1, width[p]}, dtype, backend);
  s->ssm = Tensor::zeros({cfg.max_slots, nH_, P_, N_}, stat_dtype(dtype), backend);
  return s;
}

Tensor Mamba2Mixer::extend(Context& ctx, const Tensor& u, LayerDecodeState* state, const DecodeBatch& batch) {
  auto* s = dynamic_cast<Mamba2DecodeState*>(state);
  NM_CHECK(s, "{}: extend needs this layer's decode state", prefix_);
  const int64_t T = batch.total_tokens;
  NM_CHECK(u.numel() == T * H_, "{}: extend expects u [1, {}, {}], got {}", prefix_, T, H_, u.shape().str());
  const DType dtype = u.dtype();
  const Tensor u3 = u.view({1, T, H_});
  const int64_t width[kNumParts] = {d_, d_, GN_, GN_, nH_};
  Tensor part_out[kNumParts];
  for (int p = 0; p < kNumParts; ++p) part_out[p] = ctx.empty({1, T, width[p]}, dtype);
  in_proj_.forward_rows(ctx, u3, in_blocks(), part_out);
  Tensor conv_out[3];
  for (Part p : {kX, kB, kC}) {
    Rows r = conv_rows(p);
    Tensor& out = conv_out[p - kX];
    out = ctx.empty({T, width[p]}, dtype);
    ops::causal_conv1d_decode(ctx, part_out[p].view({T, width[p]}), conv_w_->value.slice(r.begin, r.end),
                              conv_b_ ? conv_b_->value.slice(r.begin, r.end) : Tensor(), s->conv[p - kX], batch.slot_ids,
                              batch.cu_seqlens, out);
  }
  Tensor dt = compute_dt(ctx, part_out[kDt]);
  Tensor y = ctx.empty({1, T, d_}, dtype);
  if (batch.scan_chunk > 0) {
    scan_prompts(ctx, conv_out, dt, batch, s->ssm, y);
  } else {
    ops::SsdDecodeArgs args{conv_out[0].view({T, nH_, P_}), dt.view({T, nH_}),       A(ctx, dtype),
                            conv_out[1].view({T, G_, N_}),  conv_out[2].view({T, G_, N_}), D_->value,
                            batch.slot_ids,                 batch.cu_seqlens};
    Tensor y3 = y.view({T, nH_, P_});
    ops::ssd_decode(ctx, args, s->ssm, y3);
  }

  Tensor normed = ctx.empty({1, T, d_}, dtype), rstd = ctx.empty({T, G_}, stat_dtype(dtype));
  ops::gated_rmsnorm_forward(ctx, y, part_out[kZ], norm_w_->value, G_, cfg_.layer_norm_epsilon, normed, rstd);
  Tensor out = ctx.empty({1, T, H_}, dtype);
  const RowBlock all_out{0, H_};
  out_proj_.forward_rows(ctx, normed, {&all_out, 1}, {&out, 1});  // the single-row GEMV path in decode
  return out;
}

// A step with prompts (model/prefill_layout.h): the chunked scan over one padded row per prompt,
// each from its slot's state (gathered when one continues a cached sequence; fresh slots are
// zero) and leaving its final state in the slot as the state after its last chunk; the single
// tokens through ops/ssd_decode.h on their rows after the scan's. Padding rows read row T of the
// inputs, outside each table: zeros, so dt = 0 there and the state stands still. When the rows
// are the tokens as they are (equal prompts, no single tokens) nothing is gathered.
void Mamba2Mixer::scan_prompts(Context& ctx, const Tensor conv_out[3], const Tensor& dt, const DecodeBatch& batch,
                               Tensor& ssm, Tensor& y) const {
  const int64_t T = batch.total_tokens, R = batch.scan_seqs, L = batch.scan_len, Tp = batch.scan_tokens;
  const DType dtype = y.dtype();
  const bool gathered = batch.scan_rows.defined();
  const int64_t rows = gathered ? batch.scan_rows.numel() : T;
  auto gather = [&](const Tensor& t, int64_t width) {
    if (!gathered) return t.view({T, width});
    Tensor out = ctx.empty({rows, width}, t.dtype());
    ops::embedding_forward_range(ctx, batch.scan_rows, t.view({T, width}), 0, T + 1, out, /*prechecked=*/true);
    return out;
  };
  const Tensor x = gather(conv_out[0], d_), Bm = gather(conv_out[1], GN_), Cm = gather(conv_out[2], GN_),
               dtg = gather(dt, nH_), a = A(ctx, dtype);
  const int64_t PN = P_ * N_;
  Tensor init;
  if (batch.scan_init_slots.defined()) {
    init = ctx.empty({R, nH_, P_, N_}, ssm.dtype());
    Tensor flat = init.view({R, nH_ * PN});
    ops::embedding_forward_prechecked(ctx, batch.scan_init_slots, ssm.view({ssm.dim(0), nH_ * PN}), flat);
  }
  ops::SsdScanArgs args{x.slice(0, Tp).view({R, L, nH_, P_}),  dtg.slice(0, Tp).view({R, L, nH_}), a,
                        Bm.slice(0, Tp).view({R, L, G_, N_}), Cm.slice(0, Tp).view({R, L, G_, N_}), D_->value,
                        init,                                 batch.scan_chunk};
  Tensor yr = gathered ? ctx.empty({rows, d_}, dtype) : y.view({T, d_});
  Tensor y4 = yr.slice(0, Tp).view({R, L, nH_, P_});
  ops::SsdChunkStates states{ssm, batch.scan_chunk_slots};
  ops::ssd_scan_forward(ctx, args, y4, nullptr, &states);
  if (rows > Tp) {  // the single tokens
    const int64_t n = rows - Tp;
    ops::SsdDecodeArgs dec{x.slice(Tp, rows).view({n, nH_, P_}),  dtg.slice(Tp, rows).view({n, nH_}), a,
                           Bm.slice(Tp, rows).view({n, G_, N_}), Cm.slice(Tp, rows).view({n, G_, N_}), D_->value,
                           batch.decode_slot_ids,                batch.decode_cu};
    Tensor y3 = yr.slice(Tp, rows).view({n, nH_, P_});
    ops::ssd_decode(ctx, dec, ssm, y3);
  }
  if (gathered) {
    Tensor y2 = y.view({T, d_});
    ops::embedding_forward_prechecked(ctx, batch.scan_unpad, yr, y2);
  }
}

double Mamba2Mixer::forward_flops_per_token(int64_t T) const {
  const double Q = static_cast<double>(T > 0 ? std::min(cfg_.chunk_size, T) : cfg_.chunk_size);
  const double proj = static_cast<double>(H_) * static_cast<double>(2 * d_ + 2 * GN_ + nH_) +
                      static_cast<double>(d_) * static_cast<double>(H_);
  const double scan = static_cast<double>(G_) * Q * static_cast<double>(N_) +
                      static_cast<double>(nH_) * (Q * static_cast<double>(P_) + 2.0 * static_cast<double>(P_ * N_));
  return 2.0 * (proj + scan);
}

}  // namespace nemotron::model
