#include "model/mtp.h"

#include <fmt/format.h>

#include <iterator>

#include "model/finite_check.h"
#include "model/hybrid_model.h"
#include "ops/embedding.h"
#include "model/vocab_parallel.h"
#include "model/sequence_split.h"
#include "ops/matmul.h"
#include "ops/rmsnorm.h"

namespace nemotron::model {

namespace {

Tensor on(Tensor host, Backend& backend) { return backend.device().is_cpu() ? host : host.to(backend); }

// Row permutations between two [N, H] blocks stacked as [2N, H] (a then b) and their concat
// along the last dim, [N, 2H] viewed as [2N, H]: concat row 2n+j is stacked row j*N+n. Our
// tensors have no strides, so the concat (and its split in the backward) is one row gather with
// the embedding op, on any backend.
Tensor interleave_ids(int64_t N, bool to_concat, Backend& backend) {
  std::vector<int32_t> ids(static_cast<size_t>(2 * N));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < 2; ++j) {
      const int64_t c = 2 * n + j, s = j * N + n;
      ids[static_cast<size_t>(to_concat ? c : s)] = static_cast<int32_t>(to_concat ? s : c);
    }
  return on(Tensor::from_vector<int32_t>({2 * N}, ids), backend);
}

}  // namespace

namespace {

// A batch's per-token values as rows of `len` tokens each followed by `ext` more: whole rows
// (ext 0), or under context parallelism each local chunk followed by the tokens after it.
struct TokenRows {
  int64_t rows = 0, len = 0, ext = 0;
  std::vector<double> ids, labels, w, seq;  // rows x (len + ext)
};

TokenRows token_rows(const Batch& mb, const Tensor& weights) {
  TokenRows r;
  const int64_t B = mb.input_ids.dim(0), T = mb.input_ids.dim(1);
  std::vector<double> ids = mb.input_ids.to_f64_vector(), labels = mb.labels.to_f64_vector();
  std::vector<double> w = weights.defined() ? weights.to_f64_vector() : std::vector<double>();
  std::vector<double> seq = mb.seq_idx.defined() ? mb.seq_idx.to_f64_vector() : std::vector<double>();
  if (!mb.context_split) {
    r.rows = B, r.len = T;
    r.ids = std::move(ids), r.labels = std::move(labels), r.w = std::move(w), r.seq = std::move(seq);
    return r;
  }
  NM_CHECK(mb.ahead && mb.ahead->input_ids.dim(0) == B, "context parallel MTP: no tokens after the chunks");
  // The loss weights of the tokens after a chunk are their loss mask (the masked cross-entropy's).
  NM_CHECK(weights.defined() == mb.loss_mask.defined() && (!weights.defined() || weights.raw() == mb.loss_mask.raw()),
           "context parallel MTP: loss weights other than the loss mask");
  const Batch& a = *mb.ahead;
  const std::vector<double> aids = a.input_ids.to_f64_vector(), alab = a.labels.to_f64_vector();
  const std::vector<double> aw = w.empty() ? w : a.loss_mask.to_f64_vector();
  const std::vector<double> aseq = seq.empty() ? seq : a.seq_idx.to_f64_vector();
  r.rows = 2 * B, r.len = T / 2, r.ext = a.input_ids.dim(1) / 2;
  const int64_t S = r.len + r.ext;
  auto join = [&](const std::vector<double>& local, const std::vector<double>& after, std::vector<double>& out) {
    if (local.empty()) return;
    out.resize(static_cast<size_t>(r.rows * S));
    for (int64_t row = 0; row < r.rows; ++row) {  // row = 2b + j: chunk j of row b
      std::copy_n(local.begin() + row * r.len, r.len, out.begin() + row * S);
      std::copy_n(after.begin() + row * r.ext, r.ext, out.begin() + row * S + r.len);
    }
  };
  join(ids, aids, r.ids), join(labels, alab, r.labels), join(w, aw, r.w), join(seq, aseq, r.seq);
  return r;
}

}  // namespace

MtpTargets mtp_targets(const Batch& mb, const Tensor& weights, int64_t k, Backend& backend) {
  NM_CHECK(k >= 1, "MTP depth {}", k);
  const int64_t B = mb.input_ids.dim(0), T = mb.input_ids.dim(1);
  const TokenRows tr = token_rows(mb, weights);
  NM_CHECK(!mb.context_split || k <= tr.ext, "MTP depth {} beyond the {} tokens known after each chunk", k, tr.ext);
  const int64_t S = tr.len + tr.ext;
  std::vector<int32_t> rid(static_cast<size_t>(B * T), 0), rlab(rid.size(), -1);
  std::vector<double> rw(tr.w.empty() ? 0 : rid.size(), 0.0);
  MtpTargets out;
  for (int64_t row = 0; row < tr.rows; ++row)
    for (int64_t t = 0; t < tr.len && t + k < S; ++t) {
      const size_t o = static_cast<size_t>(row * tr.len + t), n = static_cast<size_t>(row * S + t),
                   m = n + static_cast<size_t>(k);
      rid[o] = static_cast<int32_t>(tr.ids[m]);
      if (!tr.seq.empty() && tr.seq[m] != tr.seq[n]) continue;  // the target lies in the next packed sequence
      rlab[o] = static_cast<int32_t>(tr.labels[m]);
      if (!tr.w.empty()) rw[o] = tr.w[m];
      if (tr.labels[m] >= 0) out.tokens += tr.w.empty() ? 1.0 : tr.w[m];
    }
  out.ids = on(Tensor::from_vector<int32_t>({B, T}, rid), backend);
  out.labels = on(Tensor::from_vector<int32_t>({B, T}, rlab), backend);
  if (!tr.w.empty()) out.weights = on(Tensor::from_vector<double>(weights.shape(), rw).to_host(weights.dtype()), backend);
  return out;
}

MtpBlock::MtpBlock(const ModelConfig& cfg, ParamStore& store, int64_t b, const ModelShard& shard)
    : H_(cfg.hidden_size), vocab_size_(cfg.vocab_size), eps_(cfg.layer_norm_epsilon), init_std_(cfg.initializer_range) {
  const std::string& pattern = cfg.mtp_hybrid_override_pattern;
  const int64_t P = static_cast<int64_t>(pattern.size()), first = b * P;
  auto name = [](int64_t j) { return fmt::format("mtp.layers.{}.", j); };
  enorm_ = &store.add(name(first) + "enorm.weight", {H_}, false);
  hnorm_ = &store.add(name(first) + "hnorm.weight", {H_}, false);
  eh_proj_ = &store.add(name(first) + "eh_proj.weight", {H_, 2 * H_}, true);
  stack_ = std::make_unique<LayerStack>(cfg, mtp_layer_specs(cfg, b), store,
                                        cfg.num_layers() + first, shard);
  final_norm_ = &store.add(name(first + P - 1) + "final_layernorm.weight", {H_}, false);
  // Sequence parallelism: the block's own norms and eh_proj see this rank's rows only.
  sequence_split_ = shard.sequence_split();
  for (Param* p : {enorm_, hnorm_, eh_proj_, final_norm_}) p->shard.grad_partial_over_tensor = sequence_split_;
}

void MtpBlock::init(uint64_t seed) {
  init_constant(*enorm_, 1.0);
  init_constant(*hnorm_, 1.0);
  init_constant(*final_norm_, 1.0);
  init_normal(*eh_proj_, seed, init_std_);  // an "input" linear (A.9)
  stack_->init(seed);
}

Tensor MtpBlock::forward(Context& ctx, const Tensor& h_prev, const Tensor& ids, const Param& embed,
                         MtpDepthSaved* saved, const SequenceLayout& layout, bool recompute,
                         std::vector<MoeLayerStats>* stats) {
  const Shape shape = h_prev.shape();
  const int64_t N = h_prev.numel() / H_;
  const DType dt = h_prev.dtype(), st = stat_dtype(dt);
  Tensor e;
  if (sequence_split_) {  // the call's lookups, summed into this rank's rows
    Tensor all = ctx.empty({ids.numel(), H_}, dt);
    embed_tokens(ctx, ids, embed, vocab_size_, all, true);
    e = scatter_sequence(ctx, all).view({N, H_});
  } else {
    e = ctx.empty({N, H_}, dt);
    embed_tokens(ctx, ids, embed, vocab_size_, e);
  }
  // enorm(e) and hnorm(h) stacked as [2N, H], then interleaved into the concat [N, 2H].
  Tensor stacked = ctx.empty({2 * N, H_}, dt), rstd_e = ctx.empty({N}, st), rstd_h = ctx.empty({N}, st);
  Tensor en = stacked.slice(0, N), hn = stacked.slice(N, 2 * N);
  ops::rmsnorm_forward(ctx, e, enorm_->value, eps_, en, rstd_e);
  ops::rmsnorm_forward(ctx, h_prev.view({N, H_}), hnorm_->value, eps_, hn, rstd_h);
  Tensor cat = ctx.empty({N, 2 * H_}, dt);
  Tensor cat_rows = cat.view({2 * N, H_});
  ops::embedding_forward(ctx, interleave_ids(N, true, *ctx.backend), stacked, cat_rows);
  Tensor u = ctx.empty({N, H_}, dt);
  ops::linear_forward(ctx, cat, eh_proj_->value, u);
  check_finite(u, "MTP eh_proj output");
  std::vector<MoeLayerStats> depth_stats;
  u = stack_->forward(ctx, u.view(shape), saved ? &saved->layers : nullptr, stats ? &depth_stats : nullptr, layout,
                      recompute);
  if (stats) stats->insert(stats->end(), std::make_move_iterator(depth_stats.begin()),
                           std::make_move_iterator(depth_stats.end()));
  Tensor h = ctx.empty(shape, dt), rstd_f = ctx.empty({N}, st);
  ops::rmsnorm_forward(ctx, u, final_norm_->value, eps_, h, rstd_f);
  if (saved) {
    saved->ids = ids, saved->e = e, saved->rstd_e = rstd_e, saved->h_prev = h_prev, saved->rstd_h = rstd_h;
    saved->cat = cat, saved->u = u, saved->rstd_f = rstd_f;
  }
  return h;
}

Tensor MtpBlock::backward(Context& ctx, MtpDepthSaved& s, const Tensor& dh, Param& embed,
                          const SequenceLayout& layout) {
  const int64_t N = s.u.numel() / H_;
  const DType dt = s.u.dtype();
  Tensor du = ctx.empty({N, H_}, dt);
  Tensor d_final = grad_sink(ctx, *final_norm_);
  ops::rmsnorm_backward(ctx, s.u.view({N, H_}), final_norm_->value, s.rstd_f, dh.view({N, H_}), du, d_final);
  Tensor du_stack = du.view(s.u.shape());
  stack_->backward(ctx, s.layers, du_stack, layout);  // in place: du becomes d(eh_proj output)
  check_finite(du, "MTP eh_proj output gradient");
  Tensor dcat = ctx.empty({N, 2 * H_}, dt);
  ops::linear_backward(ctx, s.cat, eh_proj_->value, du, &dcat,
                       eh_proj_->requires_grad ? &eh_proj_->grad : nullptr);
  Tensor dstacked = ctx.empty({2 * N, H_}, dt);
  ops::embedding_forward(ctx, interleave_ids(N, false, *ctx.backend), dcat.view({2 * N, H_}), dstacked);
  Tensor de = ctx.empty({N, H_}, dt), dh_prev = ctx.empty(s.h_prev.shape(), dt);
  Tensor dh_prev_rows = dh_prev.view({N, H_});
  Tensor d_enorm = grad_sink(ctx, *enorm_);
  ops::rmsnorm_backward(ctx, s.e, enorm_->value, s.rstd_e, dstacked.slice(0, N), de, d_enorm);
  Tensor d_hnorm = grad_sink(ctx, *hnorm_);
  ops::rmsnorm_backward(ctx, s.h_prev.view({N, H_}), hnorm_->value, s.rstd_h, dstacked.slice(N, 2 * N), dh_prev_rows,
                        d_hnorm);
  if (embed.requires_grad)
    embed_tokens_backward(ctx, s.ids, sequence_split_ ? gather_sequence(ctx, de, layout.rows) : de, embed);
  s = MtpDepthSaved{};
  return dh_prev;
}

}  // namespace nemotron::model
