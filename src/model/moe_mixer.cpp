#include "model/moe_mixer.h"

#include "model/finite_check.h"
#include "ops/activations.h"
#include "ops/bias.h"
#include "ops/elementwise.h"
#include "ops/grouped_matmul.h"
#include "ops/moe_aux_loss.h"
#include "parallel/process_groups.h"

namespace nemotron::model {

namespace {

std::vector<Tensor> values(const std::vector<Linear>& ls) {
  std::vector<Tensor> v;
  for (const Linear& l : ls) v.push_back(l.weight().value);
  return v;
}

// The experts' weight gradients for grouped_linear_backward: empty (no dW GEMMs) when every
// expert is frozen; a dropped scratch for a frozen expert among trainable ones.
std::vector<Tensor> grads(Context& ctx, const std::vector<Linear>& ls) {
  std::vector<Tensor> v;
  bool any = false;
  for (const Linear& l : ls) any = any || l.weight().requires_grad;
  if (!any) return v;
  for (const Linear& l : ls) v.push_back(grad_sink(ctx, l.weight()));
  return v;
}

// Experts with biases (mlp_bias): y[rows_e] += b_e per non-empty expert.
void add_expert_biases(Context& ctx, const std::vector<Linear>& ls, const std::vector<int64_t>& offsets, Tensor& y) {
  for (size_t e = 0; e < ls.size(); ++e) {
    if (!ls[e].bias() || offsets[e] == offsets[e + 1]) continue;
    Tensor ye = y.slice(offsets[e], offsets[e + 1]);
    ops::bias_add(ctx, ye, ls[e].bias()->value);
  }
}

void expert_bias_grads(Context& ctx, const std::vector<Linear>& ls, const std::vector<int64_t>& offsets,
                       const Tensor& dy) {
  for (size_t e = 0; e < ls.size(); ++e) {
    if (!ls[e].bias() || !ls[e].bias()->requires_grad || offsets[e] == offsets[e + 1]) continue;
    ops::bias_backward(ctx, dy.slice(offsets[e], offsets[e + 1]), ls[e].bias()->grad);
  }
}

}  // namespace

MoeMixer::MoeMixer(const ModelConfig& cfg, ParamStore& store, const std::string& prefix, int64_t layer_index,
                   const ModelShard& shard)
    : H_(cfg.hidden_size), d_e_(cfg.moe_expert_dim()), F_moe_(cfg.moe_intermediate_size),
      init_std_(cfg.initializer_range), out_std_(output_init_std(cfg)), split_(shard.tensor_parallel()),
      tensor_rank_(shard.tensor_rank) {
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
  store.set_requires_grad(*correction_bias_, false);
  ep_size_ = shard.expert_size;
  NM_CHECK(ep_size_ >= 1 && shard.expert_rank >= 0 && shard.expert_rank < ep_size_ && E % ep_size_ == 0,
           "moe: expert rank {} of {} for {} experts", shard.expert_rank, ep_size_, E);
  first_expert_ = shard.expert_rank * (E / ep_size_);
  for (int64_t e = first_expert_; e < first_expert_ + E / ep_size_; ++e) {  // the order an MlpMixer per expert registered
    const std::string p = fmt::format("{}experts.{}.", prefix, e);
    up_.emplace_back(store, p + "up_proj.", d_e_, F_moe_, cfg.mlp_bias, TensorSplit::column(shard));
    down_.emplace_back(store, p + "down_proj.", F_moe_, d_e_, cfg.mlp_bias, TensorSplit::row(shard));
    if (ep_size_ == 1) continue;  // replicated over the data group, as every other weight
    for (const Linear* l : {&up_.back(), &down_.back()}) {
      l->weight().shard.replicas = ParamReplicas::expert_data;
      if (l->bias()) l->bias()->shard.replicas = ParamReplicas::expert_data;
    }
  }
  const int64_t F_sh = cfg.moe_shared_expert_intermediate_size * cfg.n_shared_experts;
  if (cfg.moe_shared_expert_intermediate_size > 0 && cfg.n_shared_experts > 0)
    shared_ = std::make_unique<MlpMixer>(cfg, store, prefix + "shared_experts.", layer_index,
                                         MlpSpec{H_, F_sh, false, cfg.mlp_bias}, shard);
  if (cfg.moe_latent_size > 0) {
    fc1_latent_ = Linear(store, prefix + "fc1_latent_proj.", H_, cfg.moe_latent_size, false);
    fc2_latent_ = Linear(store, prefix + "fc2_latent_proj.", cfg.moe_latent_size, H_, false);
    // Whole on every tensor rank, but fed (fc2) or differentiated (fc1) through the experts'
    // partial sums: their gradients are partial over the tensor group.
    if (split_)
      for (const Linear* l : {&fc1_latent_, &fc2_latent_}) l->weight().shard.grad_partial_over_tensor = true;
  }
  F_moe_ = up_.front().out_features();  // this rank's part of the experts' width
}

void MoeMixer::init(uint64_t seed) {
  gate_.init(seed, init_std_);
  init_constant(*correction_bias_, 0.0);
  for (Linear& l : up_) l.init(seed, init_std_);
  for (Linear& l : down_) l.init(seed, out_std_);
  if (shared_) shared_->init(seed);
  if (fc1_latent_.defined()) {
    fc1_latent_.init(seed, init_std_);
    fc2_latent_.init(seed, out_std_);
  }
}

Tensor MoeMixer::forward(Context& ctx, const Tensor& u, std::unique_ptr<MixerSaved>* saved, MoeLayerStats* stats,
                         const SequenceLayout& layout) {
  NM_CHECK(u.rank() == 3 && u.dim(2) == H_, "moe: expected u [B, T, {}], got {}", H_, u.shape().str());
  const int64_t B = u.dim(0), N = B * u.dim(1), E = router_.num_experts, K = router_.top_k;
  parallel::Communicator* context = layout.context_split ? parallel::groups_of(ctx).context.get() : nullptr;
  // The aux loss's sequence length: the whole row's when context ranks hold parts of it.
  const double seq_len = static_cast<double>(u.dim(1) * (context ? context->size() : 1));
  const DType dt = u.dtype(), st = stat_dtype(dt);
  Tensor x = u.view({N, H_});

  // Route (A.7.2 steps 1-3): logits in the compute dtype, everything after in float32.
  Tensor logits = gate_.forward(ctx, x);
  check_finite(logits, "moe router logits");
  Tensor scores = ctx.empty({N, E}, st);
  ops::moe_router_scores(ctx, logits, scores);
  Tensor aux_counts, aux_psum;
  if (aux_coeff_ > 0) {
    aux_counts = ctx.empty({B, E}, st), aux_psum = ctx.empty({B, E}, st);
    ops::moe_seq_aux_forward(ctx, K, scores, B, aux_counts, aux_psum);
    if (context) context->all_reduce(aux_counts);  // the whole rows' counts (exact: small integers)
  }
  Tensor topk_idx;
  if (forced_) {
    NM_CHECK(forced_->shape() == Shape({N, K}), "moe: forced selection {} for {} tokens of top-{}",
             forced_->shape().str(), N, K);
    topk_idx = forced_->device() == ctx.backend->device() ? *forced_ : forced_->to(*ctx.backend);
  } else {
    topk_idx = ctx.empty({N, K}, DType::i32);
    ops::moe_select_experts(ctx, router_, scores, correction_bias_->value, topk_idx);
  }
  Tensor topk_w = ctx.empty({N, K}, st);
  ops::moe_topk_weights(ctx, router_, scores, topk_idx, topk_w);
  // Routed experts' buffers (steps 4-5), expert-major slots.
  const int64_t S = N * K;
  Tensor x_lat = fc1_latent_.defined() ? fc1_latent_.forward(ctx, x) : x;
  // The held experts' buffers: these S slots' (expert parallelism sizes them below, by the rows the
  // exchange brings).
  Tensor xs = ctx.empty({S, d_e_}, dt), up, act, ys;
  if (ep_size_ == 1) up = ctx.empty({S, F_moe_}, dt), act = ctx.empty({S, F_moe_}, dt), ys = ctx.empty({S, d_e_}, dt);
  // The one host synchronisation: the expert GEMMs are sized by the token counts. Inference
  // (decode, scoring) skips it where the grouped GEMM reads the counts on the device; training
  // keeps the host counts for the backward, the statistics and the range check.
  const bool counts_on_device = ep_size_ == 1 && !saved && !stats && !forced_ && !up_[0].bias() && !down_[0].bias() &&
                                ops::grouped_linear_counted_on_device(xs, values(up_), up) &&
                                ops::grouped_linear_counted_on_device(act, values(down_), ys);
  ops::MoeDispatch dispatch = ops::moe_make_dispatch(ctx, topk_idx, E, !counts_on_device);
  if (stats) {
    stats->tokens_per_expert = dispatch.tokens_per_expert;
    stats->selection = topk_idx;
    stats->aux_loss = 0;
    if (aux_coeff_ > 0) {  // a [B, E] dot product on the host (for logging; the gradient needs none)
      std::vector<double> c = aux_counts.to_f64_vector(), p = aux_psum.to_f64_vector();
      double total = 0;
      for (size_t k = 0; k < c.size(); ++k) total += c[k] * p[k];
      stats->aux_loss = aux_coeff_ / static_cast<double>(B) * static_cast<double>(E) /
                        (static_cast<double>(K) * seq_len * seq_len) * total;
    }
  }

  // Routed experts on their rows (steps 4-5), expert-major: up, relu2, down as grouped GEMMs.
  ops::moe_dispatch_forward(ctx, dispatch, x_lat, xs);
  std::shared_ptr<const ExpertExchange> exchange;
  std::unique_ptr<MixerSaved> shared_saved;
  Tensor shared_out;  // expert parallelism: the shared expert's output, computed during the exchange
  if (ep_size_ > 1) {  // the rows go to their experts' ranks, and the held experts' rows come here
    const parallel::ProcessGroups& g = parallel::groups_of(ctx);
    NM_CHECK(g.expert->size() == ep_size_ && g.expert->rank() * local_experts() == first_expert_,
             "moe: built with experts {}.. of {} ranks, the expert group has {} (this rank {})", first_expert_,
             ep_size_, g.expert->size(), g.expert->rank());
    exchange = std::make_shared<ExpertExchange>(ctx, *g.expert, dispatch.tokens_per_expert);
    ExpertExchange::InFlight dispatched = exchange->to_experts_async(ctx, xs);
    // The shared expert needs nothing routed: it runs while the rows travel (Megatron's
    // shared-expert overlap), into its own buffer, added after the combine.
    if (shared_) {
      shared_out = ctx.empty({N, H_}, dt);
      shared_->forward_into(ctx, x, shared_out, saved ? &shared_saved : nullptr, false);
    }
    xs = dispatched.finish();
    const int64_t rows = exchange->received_rows();
    up = ctx.empty({rows, F_moe_}, dt), act = ctx.empty({rows, F_moe_}, dt);
    Tensor ys_local = ctx.empty({rows, d_e_}, dt);
    const std::vector<int64_t>& off = exchange->local_offsets();
    ops::grouped_linear_forward(ctx, xs, off, values(up_), up);
    add_expert_biases(ctx, up_, off, up);
    ops::relu2_forward(ctx, up, act);
    ops::grouped_linear_forward(ctx, act, off, values(down_), ys_local);
    if (tensor_rank_ == 0) add_expert_biases(ctx, down_, off, ys_local);
    ys = exchange->from_experts(ctx, ys_local);
  } else if (counts_on_device) {
    ops::grouped_linear_forward_counted(ctx, xs, dispatch.counts, values(up_), up);
    ops::relu2_forward(ctx, up, act);
    ops::grouped_linear_forward_counted(ctx, act, dispatch.counts, values(down_), ys);
  } else {
    const std::vector<int64_t>& off = dispatch.expert_offset;
    ops::grouped_linear_forward(ctx, xs, off, values(up_), up);
    add_expert_biases(ctx, up_, off, up);
    ops::relu2_forward(ctx, up, act);
    ops::grouped_linear_forward(ctx, act, off, values(down_), ys);
    if (tensor_rank_ == 0) add_expert_biases(ctx, down_, off, ys);
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
  if (shared_out.defined())
    ops::add_inplace(ctx, out, shared_out);
  else if (shared_)
    shared_->forward_into(ctx, x, out, saved ? &shared_saved : nullptr, true);

  if (saved) {
    auto s = std::make_unique<MoeSaved>();
    s->x = x;
    s->scores = scores;
    s->topk_idx = topk_idx;
    s->topk_w = topk_w;
    s->dispatch = std::move(dispatch);
    s->exchange = std::move(exchange);
    s->xs = xs;
    s->act = act;
    s->ys = ys;
    s->routed = routed;
    s->shared = std::move(shared_saved);
    s->aux_counts = aux_counts;
    s->aux_grad_weight = aux_grad_scale_ * aux_coeff_ * static_cast<double>(E) /
                         (static_cast<double>(K) * seq_len * seq_len * static_cast<double>(B));
    *saved = std::move(s);
  }
  return out.view(u.shape());
}

Tensor MoeMixer::backward(Context& ctx, const MixerSaved& saved_base, const Tensor& dout) {
  const auto& s = dynamic_cast<const MoeSaved&>(saved_base);
  const ops::MoeDispatch& m = s.dispatch;
  // The held experts' rows: this rank's slots, or what the exchange brought (expert parallelism).
  const std::vector<int64_t>& off = s.exchange ? s.exchange->local_offsets() : m.expert_offset;
  const int64_t N = s.x.dim(0), E = router_.num_experts, K = router_.top_k, S = m.num_slots();
  const int64_t R = s.xs.dim(0);
  const DType dt = dout.dtype();
  Tensor dy = dout.view({N, H_});
  Tensor du = ctx.empty({N, H_}, dt);

  // Back through fc2_latent and the combine: dys = w dr per slot, dw = <dr, expert output>.
  Tensor dr = dy;
  if (fc2_latent_.defined()) {
    dr = ctx.empty({N, d_e_}, dt);
    fc2_latent_.backward(ctx, s.routed, dy, &dr);
  }
  Tensor dys = ctx.empty({S, d_e_}, dt), dw = ctx.empty({N, K}, stat_dtype(dt));
  ops::moe_combine_backward(ctx, m, s.ys, s.topk_w, dr, dys, dw);
  // Tensor parallelism: ys holds this rank's partial expert outputs, so dw = <dr, ys> is partial.
  if (split_) parallel::groups_of(ctx).tensor->all_reduce(dw);
  // Expert parallelism: the adjoint of from_experts; the shared expert's backward (which needs
  // only dy) runs while the rows travel, into its own input gradient, added at the end.
  Tensor du_shared;
  if (s.exchange) {
    ExpertExchange::InFlight there = s.exchange->to_experts_async(ctx, dys);
    if (shared_) {
      du_shared = ctx.empty({N, H_}, dt);
      shared_->backward_into(ctx, *s.shared, dy, du_shared, false);
    }
    dys = there.finish();
  }

  // Experts: down (its input, relu2's output, kept), relu2, up; then the inverse permutation (and
  // fc1_latent) into du.
  const Tensor& act = s.act;
  Tensor dact = ctx.empty({R, F_moe_}, dt);
  std::vector<Tensor> down_grads = grads(ctx, down_), up_grads = grads(ctx, up_);
  Tensor dxs = ctx.empty({R, d_e_}, dt);
  if (s.exchange) {
    // Expert parallelism: the input gradients first, so that their exchange back (the adjoint of
    // to_experts) runs while the weight gradients, which need nothing exchanged, are computed.
    std::vector<Tensor> no_grads;
    ops::grouped_linear_backward(ctx, act, off, values(down_), dys, dact, no_grads);
    ops::relu2_backward_from_output(ctx, act, dact, dact);  // in place: dact becomes dup
    ops::grouped_linear_backward(ctx, s.xs, off, values(up_), dact, dxs, no_grads);
    ExpertExchange::InFlight back = s.exchange->from_experts_async(ctx, dxs);
    Tensor none;
    if (!down_grads.empty()) ops::grouped_linear_backward(ctx, act, off, values(down_), dys, none, down_grads);
    expert_bias_grads(ctx, down_, off, dys);
    expert_bias_grads(ctx, up_, off, dact);
    if (!up_grads.empty()) ops::grouped_linear_backward(ctx, s.xs, off, values(up_), dact, none, up_grads);
    dxs = back.finish();
  } else {
    ops::grouped_linear_backward(ctx, act, off, values(down_), dys, dact, down_grads);
    expert_bias_grads(ctx, down_, off, dys);
    ops::relu2_backward_from_output(ctx, act, dact, dact);  // in place: dact becomes dup
    expert_bias_grads(ctx, up_, off, dact);
    ops::grouped_linear_backward(ctx, s.xs, off, values(up_), dact, dxs, up_grads);
  }
  if (fc1_latent_.defined()) {
    Tensor dx_lat = ctx.empty({N, d_e_}, dt);
    ops::moe_dispatch_backward(ctx, m, dxs, dx_lat);
    fc1_latent_.backward(ctx, s.x, dx_lat, &du);
  } else {
    ops::moe_dispatch_backward(ctx, m, dxs, du);
  }

  // Router: only the chosen scores get gradient (A.7.3); the correction bias gets none. The aux
  // loss adds its gradient to every logit.
  Tensor dlogits = ctx.empty({N, E}, dt);
  ops::moe_router_backward(ctx, router_, s.scores, s.topk_idx, dw, dlogits);
  if (s.aux_counts.defined()) ops::moe_seq_aux_backward(ctx, K, s.scores, s.aux_counts, s.aux_grad_weight, dlogits);
  // The router runs whole on every tensor rank: its input gradient joins the sum over the group once.
  gate_.backward(ctx, s.x, dlogits, tensor_rank_ == 0 ? &du : nullptr, true);

  if (du_shared.defined())
    ops::add_inplace(ctx, du, du_shared);
  else if (shared_)
    shared_->backward_into(ctx, *s.shared, dy, du, true);
  return du.view(dout.shape());
}

double MoeMixer::forward_flops_per_token(int64_t T) const {
  double f = gate_.flops_per_row() + static_cast<double>(router_.top_k) * 2.0 * up_[0].flops_per_row();
  if (shared_) f += shared_->forward_flops_per_token(T);
  if (fc1_latent_.defined()) f += fc1_latent_.flops_per_row() + fc2_latent_.flops_per_row();
  return f;
}

}  // namespace nemotron::model
