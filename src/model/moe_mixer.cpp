#include "model/moe_mixer.h"

#include "ops/dispatch.h"

namespace nemotron::model {

namespace {

// The seq_aux_loss (A.7.4) on the host: scores s [B*S, E] -> aux, and the per-sequence counts
// sum_t m_ti [B, E] that its backward needs.
template <class T>
double seq_aux_forward(const T* s, int64_t B, int64_t S, int64_t E, int64_t K, double coeff,
                       std::vector<double>& counts) {
  counts.assign(static_cast<size_t>(B * E), 0.0);
  std::vector<double> psum(static_cast<size_t>(B * E), 0.0);
  std::vector<char> taken(static_cast<size_t>(E));
  for (int64_t n = 0; n < B * S; ++n) {
    const T* row = s + n * E;
    const int64_t b = n / S;
    double z = 0;
    for (int64_t i = 0; i < E; ++i) z += static_cast<double>(row[i]);
    z = K > 1 ? z + 1e-20 : 1.0;
    for (int64_t i = 0; i < E; ++i) psum[b * E + i] += static_cast<double>(row[i]) / z;
    std::fill(taken.begin(), taken.end(), 0);
    for (int64_t j = 0; j < K; ++j) {  // top-K of p = top-K of s; strict > keeps the lowest index
      int64_t arg = -1;
      for (int64_t i = 0; i < E; ++i)
        if (!taken[i] && (arg < 0 || row[i] > row[arg])) arg = i;
      taken[arg] = 1;
      counts[b * E + arg] += 1.0;
    }
  }
  double total = 0;
  for (int64_t k = 0; k < B * E; ++k) total += counts[k] * psum[k];
  const double Sd = static_cast<double>(S);
  return coeff / static_cast<double>(B) * static_cast<double>(E) / (static_cast<double>(K) * Sd * Sd) * total;
}

// dlogits += w * d/dlogits sum_b sum_i c_bi sum_t p_ti, w = grad_scale * coeff * E / (K S^2 B):
// g_i = w c_bi = dL/dp_ti; through p = s / Z: ds_j = g_j / Z - (sum_i g_i s_i) / Z^2; through the
// sigmoid: dlogit_j = ds_j s_j (1 - s_j).
template <class T>
void seq_aux_backward(const T* s, int64_t B, int64_t S, int64_t E, int64_t K, double w,
                      const std::vector<double>& counts, T* dlogits) {
  for (int64_t n = 0; n < B * S; ++n) {
    const T* row = s + n * E;
    const double* c = counts.data() + (n / S) * E;
    double z = 0, dot = 0;
    for (int64_t i = 0; i < E; ++i) z += static_cast<double>(row[i]), dot += w * c[i] * static_cast<double>(row[i]);
    for (int64_t j = 0; j < E; ++j) {
      const double sj = static_cast<double>(row[j]);
      const double ds = K > 1 ? w * c[j] / (z + 1e-20) - dot / ((z + 1e-20) * (z + 1e-20)) : w * c[j];
      dlogits[n * E + j] += static_cast<T>(ds * sj * (1.0 - sj));
    }
  }
}

}  // namespace

MoeMixer::MoeMixer(const ModelConfig& cfg, ParamStore& store, const std::string& prefix, int64_t layer_index)
    : H_(cfg.hidden_size), d_e_(cfg.moe_expert_dim()), init_std_(cfg.initializer_range), out_std_(output_init_std(cfg)) {
  router_.num_experts = cfg.n_routed_experts;
  router_.top_k = cfg.num_experts_per_tok;
  router_.n_group = cfg.n_group;
  router_.topk_group = cfg.topk_group;
  router_.norm_topk_prob = cfg.norm_topk_prob;
  router_.routed_scaling_factor = cfg.routed_scaling_factor;
  router_.validate();
  if (cfg.moe_intermediate_size <= 0)
    throw InputError(fmt::format("moe_intermediate_size: expected a positive width, got {}", cfg.moe_intermediate_size));
  if (cfg.moe_latent_size < 0)
    throw InputError(fmt::format("moe_latent_size: expected 0 (none) or a positive width, got {}", cfg.moe_latent_size));
  const int64_t E = router_.num_experts;
  gate_ = Linear(store, prefix + "gate.", H_, E, false);
  correction_bias_ = &store.add(prefix + "gate.e_score_correction_bias", {E}, false, /*stat=*/true);
  correction_bias_->trainable = false;
  const MlpSpec expert{d_e_, cfg.moe_intermediate_size, false, cfg.mlp_bias};
  for (int64_t e = 0; e < E; ++e)
    experts_.push_back(
        std::make_unique<MlpMixer>(cfg, store, fmt::format("{}experts.{}.", prefix, e), layer_index, expert));
  const int64_t F_sh = cfg.moe_shared_expert_intermediate_size * cfg.n_shared_experts;
  if (cfg.moe_shared_expert_intermediate_size > 0 && cfg.n_shared_experts > 0)
    shared_ = std::make_unique<MlpMixer>(cfg, store, prefix + "shared_experts.", layer_index,
                                         MlpSpec{H_, F_sh, false, cfg.mlp_bias});
  if (cfg.moe_latent_size > 0) {
    fc1_latent_ = Linear(store, prefix + "fc1_latent_proj.", H_, cfg.moe_latent_size, false);
    fc2_latent_ = Linear(store, prefix + "fc2_latent_proj.", cfg.moe_latent_size, H_, false);
  }
}

void MoeMixer::init(uint64_t seed) {
  gate_.init(seed, init_std_);
  init_constant(*correction_bias_, 0.0);
  for (auto& e : experts_) e->init(seed);
  if (shared_) shared_->init(seed);
  if (fc1_latent_.defined()) {
    fc1_latent_.init(seed, init_std_);
    fc2_latent_.init(seed, out_std_);
  }
}

Tensor MoeMixer::forward(Context& ctx, const Tensor& u, std::unique_ptr<MixerSaved>* saved) {
  NM_CHECK(u.rank() == 3 && u.dim(2) == H_, "moe: expected u [B, T, {}], got {}", H_, u.shape().str());
  const int64_t N = u.dim(0) * u.dim(1), E = router_.num_experts, K = router_.top_k;
  const DType dt = u.dtype();
  Tensor x = u.view({N, H_});

  // Route (A.7.2 steps 1-3).
  Tensor logits = gate_.forward(ctx, x);
  Tensor scores = ctx.empty({N, E}, dt);
  ops::moe_router_scores(ctx, logits, scores);
  std::vector<double> aux_counts;
  last_aux_loss_ = 0;
  if (aux_coeff_ > 0) {
    ops::require_cpu(scores, "moe seq_aux_loss");
    ops::dispatch_float(dt, "moe seq_aux_loss", [&](auto zero) {
      using T = decltype(zero);
      last_aux_loss_ = seq_aux_forward<T>(scores.data<T>(), u.dim(0), u.dim(1), E, K, aux_coeff_, aux_counts);
    });
  }
  Tensor topk_idx;
  if (forced_) {
    NM_CHECK(forced_->shape() == Shape({N, K}), "moe: forced selection {} for {} tokens of top-{}",
             forced_->shape().str(), N, K);
    topk_idx = *forced_;
  } else {
    topk_idx = ctx.empty({N, K}, DType::i32);
    ops::moe_select_experts(ctx, router_, scores, correction_bias_->value, topk_idx);
  }
  Tensor topk_w = ctx.empty({N, K}, dt);
  ops::moe_topk_weights(ctx, router_, scores, topk_idx, topk_w);
  ops::MoeDispatch dispatch = ops::moe_make_dispatch(ctx, topk_idx, E);
  last_tokens_per_expert_ = dispatch.tokens_per_expert;
  last_selection_ = topk_idx.clone();  // outlives the workspace

  // Routed experts on their rows (steps 4-5), expert-major.
  Tensor x_lat = fc1_latent_.defined() ? fc1_latent_.forward(ctx, x) : x;
  Tensor xs = ctx.empty({dispatch.num_slots(), d_e_}, dt);
  Tensor ys = ctx.empty({dispatch.num_slots(), d_e_}, dt);
  ops::moe_dispatch_forward(ctx, dispatch, x_lat, xs);
  std::vector<std::unique_ptr<MixerSaved>> expert_saved(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) {
    const int64_t a = dispatch.expert_offset[e], b = dispatch.expert_offset[e + 1];
    if (a == b) continue;
    Tensor ye = ys.slice(a, b);
    experts_[e]->forward_into(ctx, xs.slice(a, b), ye, saved ? &expert_saved[e] : nullptr);
  }

  // Weighted combine, fc2_latent (step 6), shared expert (step 7).
  Tensor out = ctx.empty({N, H_}, dt);
  Tensor routed;
  if (fc2_latent_.defined()) {
    routed = ctx.empty({N, d_e_}, dt);
    ops::moe_combine_forward(ctx, dispatch, ys, topk_w, routed);
    fc2_latent_.forward(ctx, routed, out);
  } else {
    ops::moe_combine_forward(ctx, dispatch, ys, topk_w, out);
  }
  std::unique_ptr<MixerSaved> shared_saved;
  if (shared_) shared_->forward_into(ctx, x, out, saved ? &shared_saved : nullptr, true);

  if (saved) {
    auto s = std::make_unique<MoeSaved>();
    s->x = x;
    s->scores = scores;
    s->topk_idx = topk_idx;
    s->topk_w = topk_w;
    s->dispatch = std::move(dispatch);
    s->ys = ys;
    s->experts = std::move(expert_saved);
    s->routed = routed;
    s->shared = std::move(shared_saved);
    s->aux_counts = std::move(aux_counts);
    s->aux_sequences = u.dim(0);
    const double S = static_cast<double>(u.dim(1));
    s->aux_grad_weight = aux_grad_scale_ * aux_coeff_ * static_cast<double>(E) /
                         (static_cast<double>(K) * S * S * static_cast<double>(u.dim(0)));
    *saved = std::move(s);
  }
  return out.view(u.shape());
}

Tensor MoeMixer::backward(Context& ctx, const MixerSaved& saved_base, const Tensor& dout) {
  const auto& s = dynamic_cast<const MoeSaved&>(saved_base);
  const ops::MoeDispatch& m = s.dispatch;
  const int64_t N = s.x.dim(0), E = router_.num_experts, K = router_.top_k;
  const DType dt = dout.dtype();
  Tensor dy = dout.view({N, H_});
  Tensor du = ctx.empty({N, H_}, dt);

  // Back through fc2_latent and the combine: dys = w dr per slot, dw = <dr, expert output>.
  Tensor dr = dy;
  if (fc2_latent_.defined()) {
    dr = ctx.empty({N, d_e_}, dt);
    fc2_latent_.backward(ctx, s.routed, dy, &dr);
  }
  Tensor dys = ctx.empty({m.num_slots(), d_e_}, dt), dw = ctx.empty({N, K}, dt);
  ops::moe_combine_backward(ctx, m, s.ys, s.topk_w, dr, dys, dw);

  // Experts, then the inverse permutation (and fc1_latent) into du.
  Tensor dxs = ctx.empty({m.num_slots(), d_e_}, dt);
  for (int64_t e = 0; e < E; ++e) {
    const int64_t a = m.expert_offset[e], b = m.expert_offset[e + 1];
    if (a == b) continue;
    Tensor dxe = dxs.slice(a, b);
    experts_[e]->backward_into(ctx, *s.experts[e], dys.slice(a, b), dxe);
  }
  if (fc1_latent_.defined()) {
    Tensor dx_lat = ctx.empty({N, d_e_}, dt);
    ops::moe_dispatch_backward(ctx, m, dxs, dx_lat);
    fc1_latent_.backward(ctx, s.x, dx_lat, &du);
  } else {
    ops::moe_dispatch_backward(ctx, m, dxs, du);
  }

  // Router: only the chosen scores get gradient (A.7.3); the correction bias gets none.
  Tensor dlogits = ctx.empty({N, E}, dt);
  ops::moe_router_backward(ctx, router_, s.scores, s.topk_idx, dw, dlogits);
  if (!s.aux_counts.empty()) {
    const int64_t B = s.aux_sequences, S = N / B;
    ops::dispatch_float(dt, "moe seq_aux_loss", [&](auto zero) {
      using T = decltype(zero);
      seq_aux_backward<T>(s.scores.data<T>(), B, S, E, K, s.aux_grad_weight, s.aux_counts, dlogits.data<T>());
    });
  }
  gate_.backward(ctx, s.x, dlogits, &du, true);

  if (shared_) shared_->backward_into(ctx, *s.shared, dy, du, true);
  return du.view(dout.shape());
}

double MoeMixer::forward_flops_per_token(int64_t T) const {
  double f = gate_.flops_per_row() + static_cast<double>(router_.top_k) * experts_[0]->forward_flops_per_token(T);
  if (shared_) f += shared_->forward_flops_per_token(T);
  if (fc1_latent_.defined()) f += fc1_latent_.flops_per_row() + fc2_latent_.flops_per_row();
  return f;
}

}  // namespace nemotron::model
