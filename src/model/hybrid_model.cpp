#include "model/hybrid_model.h"

#include <algorithm>
#include <cmath>

#include "model/finite_check.h"
#include "model/mixer_factory.h"
#include "model/sequence_split.h"
#include "model/tensor_split.h"
#include "model/vocab_parallel.h"
#include "ops/cast.h"
#include "ops/cross_entropy.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/matmul.h"
#include "ops/rmsnorm.h"
#include "parallel/process_groups.h"

namespace nemotron::model {

namespace {
// {B, T} of a call from its targets (a flat [N] is one row of N).
Shape rows_of(const Tensor& targets) {
  return targets.rank() == 2 ? targets.shape() : Shape({1, targets.numel()});
}
}  // namespace

int64_t head_rows_per_chunk(int64_t vocab_size, DType dtype, int64_t tokens) {
  // 1 GiB of logits: few enough chunks that the LM head GEMMs stay large and the float32 dW is
  // read and written a few times per step, not once per 1024 rows.
  constexpr int64_t kLogitsBudgetBytes = int64_t{1} << 30;
  const int64_t rows = kLogitsBudgetBytes / (std::max<int64_t>(1, vocab_size) * static_cast<int64_t>(dtype_size(dtype)));
  return std::clamp<int64_t>(rows, 1, std::max<int64_t>(1, tokens));
}

HybridModel::HybridModel(const ModelConfig& cfg, Backend& backend, DType dtype, const ModelShard& shard,
                         bool trainable, bool defer_grads)
    : cfg_(cfg), shard_(shard), store_(backend, dtype, trainable, defer_grads) {
  validate(cfg_, "model");
  const int64_t V = cfg_.vocab_size, H = cfg_.hidden_size;
  const StackNames names = stack_names(cfg_);
  // Tensor parallelism splits the vocabulary of the embedding and the head (model/vocab_parallel.h).
  const TensorSplit vocab = TensorSplit::column(shard_);
  embed_ = &add_split(store_, names.embedding, {V, H}, vocab, true);
  trunk_ = std::make_unique<LayerStack>(cfg_, layer_specs(cfg_), store_, 0, shard_);
  norm_f_ = &store_.add(names.final_norm, {H}, false);
  norm_f_->shard.grad_partial_over_tensor = shard_.sequence_split();  // it sees this rank's rows
  if (!cfg_.tie_word_embeddings) lm_head_ = &add_split(store_, "lm_head.weight", {V, H}, vocab, true);
  for (int64_t b = 0; b < cfg_.num_nextn_predict_layers; ++b)
    mtp_.push_back(std::make_unique<MtpBlock>(cfg_, store_, b, shard_));
}

HybridModel::~HybridModel() = default;

void HybridModel::check_groups(const Context& ctx) const {
  const int tp = parallel::groups_of(ctx).tensor->size();
  NM_CHECK(tp == shard_.tensor_size,
           "a model split over {} tensor-parallel ranks run with a tensor group of {} (a context without the run's "
           "process groups?)",
           shard_.tensor_size, tp);
}

Param& HybridModel::head_weight() { return lm_head_ ? *lm_head_ : *embed_; }

void HybridModel::init(uint64_t seed) {
  init_normal(*embed_, seed, cfg_.initializer_range);
  if (lm_head_) init_normal(*lm_head_, seed, cfg_.initializer_range);
  trunk_->init(seed);
  init_constant(*norm_f_, 1.0);
  for (auto& b : mtp_) b->init(seed);
}

Tensor HybridModel::forward(Context& ctx, const Tensor& ids, Activations* act, ForwardStats* stats,
                            const SequenceLayout& layout) {
  NM_CHECK(ids.rank() == 2, "input_ids must be [B, T], got {}", ids.shape().str());
  check_groups(ctx);
  const int64_t B = ids.dim(0), T = ids.dim(1), H = cfg_.hidden_size;
  SequenceLayout lay = layout;
  if (shard_.sequence_split()) lay.rows = Shape({B, T});
  if (act) act->input_ids = ids, act->layout = lay;
  if (stats) stats->moe.clear(), stats->mtp_moe.clear();
  Tensor x = ctx.empty({B, T, H}, store_.dtype());
  // Sequence parallelism: the vocabulary's partial lookups summed into this rank's rows.
  embed_tokens(ctx, ids, *embed_, cfg_.vocab_size, x, shard_.sequence_split());
  if (shard_.sequence_split()) x = scatter_sequence(ctx, x);
  check_finite(x, "embedding output");
  return trunk_->forward(ctx, x, act ? &act->layers : nullptr, stats ? &stats->moe : nullptr, lay, recompute());
}

Tensor HybridModel::head(Context& ctx, const Tensor& x, const Tensor& targets, const Tensor& weights, double scale,
                         Tensor* dx) {
  const int64_t H = cfg_.hidden_size, N = x.numel() / H;
  DType dt = store_.dtype();
  Tensor xf = x.view({N, H});
  Tensor h = ctx.empty({N, H}, dt), rstd = ctx.empty({N}, stat_dtype(dt));
  ops::rmsnorm_forward(ctx, xf, norm_f_->value, cfg_.layer_norm_epsilon, h, rstd);
  // logits / t = W (h / t): the scale goes on h ([N, H]), not on the [N, V] logits (the main
  // head only: MTP depths, which GRPO does not train, run lm_head_loss untempered).
  const bool tempered = logit_temperature_ != 1.0;
  if (tempered) ops::scale_inplace(ctx, h, 1.0 / logit_temperature_);
  Tensor dh;
  Tensor out = lm_head_loss(ctx, h, targets, weights, scale, dx ? &dh : nullptr);
  if (dx) {
    if (tempered) ops::scale_inplace(ctx, dh, 1.0 / logit_temperature_);  // d(h / t) / dh
    Tensor dxf = ctx.empty({N, H}, dt);
    Tensor d_norm = grad_sink(ctx, *norm_f_);
    ops::rmsnorm_backward(ctx, xf, norm_f_->value, rstd, dh, dxf, d_norm);
    *dx = dxf.view(x.shape());
  }
  return out;
}

void HybridModel::set_logit_temperature(double t) {
  if (!(t > 0) || !std::isfinite(t)) throw InputError(fmt::format("logit temperature {}: expected a finite number > 0", t));
  logit_temperature_ = t;
}

Tensor HybridModel::lm_head_loss(Context& ctx, const Tensor& hin, const Tensor& targets, const Tensor& weights,
                                 double scale, Tensor* dhout) {
  Param& W = head_weight();
  // Sequence parallelism: h holds this rank's rows; the head runs on every row of the call.
  const bool rows_split = shard_.sequence_split();
  const Tensor hall = rows_split ? gather_sequence(ctx, hin, rows_of(targets)) : hin;
  const int64_t H = cfg_.hidden_size, V = W.value.dim(0), N = hall.numel() / H;  // V: this rank's vocabulary rows
  DType dt = store_.dtype();
  NM_CHECK(targets.numel() == N, "targets {} for {} tokens", targets.shape().str(), N);
  NM_CHECK(!weights.defined() || weights.numel() == N, "weights {} for {} tokens", weights.shape().str(), N);
  Tensor h = hall.view({N, H});
  Tensor labels = targets.view({N});
  Tensor mask = weights.defined() ? weights.view({N}) : Tensor();
  Tensor dh = dhout ? ctx.empty({N, H}, dt) : Tensor();
  Tensor* dW = W.requires_grad ? &W.grad : nullptr;
  // Per-token values stay on the device until the caller reads them: one read instead of one per chunk.
  Tensor out = ctx.empty({N}, stat_dtype(dt));
  parallel::Communicator& tp = *parallel::groups_of(ctx).tensor;
  const bool overlap = dhout && W.tensor_split() && ctx.overlap_tensor_comm && tp.size() > 1;
  Tensor dh_rows;  // this rank's rows of dh under sequence parallelism, when overlapped
  const int64_t chunk = head_rows_per_chunk(V, dt, N);
  for (int64_t r0 = 0; r0 < N; r0 += chunk) {
    int64_t r1 = std::min(N, r0 + chunk), n = r1 - r0;
    Tensor hc = h.slice(r0, r1);
    Tensor logits = ctx.empty({n, V}, dt), lc = out.slice(r0, r1);
    ops::linear_forward(ctx, hc, W.value, logits);
    Tensor mc = mask.defined() ? mask.slice(r0, r1) : Tensor();
    head_cross_entropy(ctx, W, cfg_.vocab_size, logits, labels.slice(r0, r1), mc, scale, lc, dhout != nullptr);
    if (dhout) {
      Tensor dhc = dh.slice(r0, r1);
      if (!overlap) {
        ops::linear_backward(ctx, hc, W.value, logits, &dhc, dW);
        continue;
      }
      // The chunk's dh first; its sum over the group (all of dh's, after the last chunk, under
      // sequence parallelism) then runs while the dW GEMM computes.
      ops::linear_backward(ctx, hc, W.value, logits, &dhc, nullptr);
      if (!rows_split) tp.all_reduce_async(dhc);
      else if (r1 == N) dh_rows = scatter_sequence(ctx, dh, /*async=*/true);
      if (dW) ops::linear_backward(ctx, hc, W.value, logits, nullptr, dW);
    }
  }
  // A split head: each rank's vocabulary rows give part of dh (summed into this rank's rows under
  // sequence parallelism).
  if (overlap) {
    tp.wait_pending();
    if (rows_split) dh = dh_rows.view(hin.shape());
  } else if (dhout && rows_split) {
    dh = scatter_sequence(ctx, dh).view(hin.shape());
  } else if (dhout && W.tensor_split()) {
    tp.all_reduce(dh);
  }
  if (dhout) *dhout = dh;
  return out;
}

// Forward every depth first (depth k's output is depth k+1's input), each depth's head loss with
// its gradient at once; then back from depth D, each depth's input gradient joining the head
// gradient of the depth below; depth 1's reaches the trunk through norm_f.
std::vector<double> HybridModel::mtp_loss(Context& ctx, const Tensor& x, const Batch& mb, const Tensor& weights,
                                          const std::vector<double>& scales, Tensor* dx, ForwardStats* stats) {
  const int64_t D = mtp_depths(), H = cfg_.hidden_size, N = x.numel() / H;
  NM_CHECK(D > 0, "mtp_loss: the model has no MTP block");
  NM_CHECK(static_cast<int64_t>(scales.size()) == D, "mtp_loss: {} scales for {} depths", scales.size(), D);
  const DType dt = store_.dtype();
  SequenceLayout layout = mb.layout();
  if (shard_.sequence_split()) layout.rows = Shape({mb.input_ids.dim(0), mb.input_ids.dim(1)});
  if (stats) stats->mtp_moe.clear();
  Tensor xf = x.view({N, H});
  Tensor h = ctx.empty(x.shape(), dt), rstd0 = ctx.empty({N}, stat_dtype(dt));
  Tensor hf = h.view({N, H});
  ops::rmsnorm_forward(ctx, xf, norm_f_->value, cfg_.layer_norm_epsilon, hf, rstd0);
  std::vector<MtpDepthSaved> saved(dx ? static_cast<size_t>(D) : 0);
  std::vector<Tensor> dh_head(static_cast<size_t>(D));
  std::vector<Tensor> values;
  for (int64_t k = 1; k <= D; ++k) {
    MtpTargets tg = mtp_targets(mb, weights, k, *ctx.backend);
    MtpBlock& block = *mtp_[static_cast<size_t>(cfg_.mtp_block_of_depth(k))];
    h = block.forward(ctx, h, tg.ids, *embed_, dx ? &saved[static_cast<size_t>(k - 1)] : nullptr, layout, recompute(),
                      stats ? &stats->mtp_moe : nullptr);
    check_finite(h, "MTP depth {} output", k);
    values.push_back(lm_head_loss(ctx, h, tg.labels, tg.weights, scales[static_cast<size_t>(k - 1)],
                                  dx ? &dh_head[static_cast<size_t>(k - 1)] : nullptr));
  }
  if (dx) {
    Tensor dh;
    for (int64_t k = D; k >= 1; --k) {
      Tensor g = dh_head[static_cast<size_t>(k - 1)].view(x.shape());
      if (dh.defined()) ops::add_inplace(ctx, g, dh);
      MtpBlock& block = *mtp_[static_cast<size_t>(cfg_.mtp_block_of_depth(k))];
      dh = block.backward(ctx, saved[static_cast<size_t>(k - 1)], g, *embed_, layout);
    }
    Tensor dxf = dx->view({N, H});
    Tensor d_norm = grad_sink(ctx, *norm_f_);
    ops::rmsnorm_backward(ctx, xf, norm_f_->value, rstd0, dh.view({N, H}), dxf, d_norm, &dxf);
  }
  std::vector<double> sums;
  for (const Tensor& v : values) {
    double s = 0;
    for (double e : v.to_f64_vector()) s += e;
    sums.push_back(s);
  }
  return sums;
}

Tensor HybridModel::token_logprobs(Context& ctx, const Tensor& ids, const Tensor& targets, ForwardStats* stats,
                                   const SequenceLayout& layout) {
  Tensor x = forward(ctx, ids, nullptr, stats, layout);
  Tensor lp = head(ctx, x, targets, Tensor(), 1.0, nullptr);
  ops::scale_inplace(ctx, lp, -1.0);
  return lp;
}

Tensor HybridModel::logits(Context& ctx, const Tensor& ids, const SequenceLayout& layout) {
  Tensor x = forward(ctx, ids, nullptr, nullptr, layout);
  if (shard_.sequence_split()) x = gather_sequence(ctx, x, Shape({ids.dim(0), ids.dim(1)}));
  const int64_t H = cfg_.hidden_size, V = cfg_.vocab_size, N = x.numel() / H;
  DType dt = store_.dtype();
  Tensor h = ctx.empty({N, H}, dt), rstd = ctx.empty({N}, stat_dtype(dt));
  ops::rmsnorm_forward(ctx, x.view({N, H}), norm_f_->value, cfg_.layer_norm_epsilon, h, rstd);
  const Param& W = head_weight();
  Tensor o2 = Tensor::empty({N, W.value.dim(0)}, dt, *ctx.backend);
  ops::linear_forward(ctx, h, W.value, o2);
  return gather_vocab(ctx, W, o2).view({ids.dim(0), ids.dim(1), V});
}

// Rows of xf [N, H] by index, one gather on the device (the embedding op with row ids).
Tensor HybridModel::gather_rows(Context& ctx, const Tensor& xf, const std::vector<int64_t>& rows) {
  const int64_t N = xf.dim(0), H = xf.dim(1), R = static_cast<int64_t>(rows.size());
  std::vector<int32_t> ids(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    NM_CHECK(rows[i] >= 0 && rows[i] < N, "gather_rows: row {} outside [0, {})", rows[i], N);
    ids[i] = static_cast<int32_t>(rows[i]);
  }
  Tensor ids_t = Tensor::from_vector<int32_t>({R}, ids);
  if (!ctx.backend->device().is_cpu()) ids_t = ids_t.to(*ctx.backend);
  Tensor out = ctx.empty({R, H}, xf.dtype());
  ops::embedding_forward(ctx, ids_t, xf, out);
  return out;
}

// The final norm and the LM head on x [R, H]: logits [R, V] in logits_dtype.
Tensor HybridModel::head_on_rows(Context& ctx, const Tensor& x, DType logits_dtype) {
  const Param& W = head_weight();
  const int64_t V = W.value.dim(0), R = x.dim(0), H = x.dim(1);  // V: this rank's vocabulary rows
  const DType dt = store_.dtype();
  Tensor h = ctx.empty({R, H}, dt), rstd = ctx.empty({R}, stat_dtype(dt));
  ops::rmsnorm_forward(ctx, x, norm_f_->value, cfg_.layer_norm_epsilon, h, rstd);
  Tensor logits = (dt == logits_dtype) ? Tensor::empty({R, V}, dt, *ctx.backend) : ctx.empty({R, V}, dt);
  ops::linear_forward(ctx, h, W.value, logits);
  logits = gather_vocab(ctx, W, logits);
  if (dt != logits_dtype) {
    Tensor cast = Tensor::empty(logits.shape(), logits_dtype, *ctx.backend);
    ops::cast(ctx, logits, cast);
    logits = cast;
  }
  return logits;
}

Tensor HybridModel::head_logits(Context& ctx, const Tensor& x, const std::vector<int64_t>& rows, DType logits_dtype) {
  const int64_t H = cfg_.hidden_size;
  // Sequence parallelism: forward() left this rank's rows; the rows asked for are the call's.
  const Tensor all = shard_.sequence_split() ? gather_sequence(ctx, x, Shape({1, x.numel() / H * shard_.tensor_size}))
                                             : x;
  return head_on_rows(ctx, gather_rows(ctx, all.view({all.numel() / H, H}), rows), logits_dtype);
}

DecodeState HybridModel::make_decode_state(const DecodeConfig& config) {
  config.validate();
  DecodeConfig cfg = config;
  std::vector<std::unique_ptr<LayerDecodeState>> layers;
  bool attention = false, mamba = false;
  for (const auto& m : trunk_->mixers()) {
    layers.push_back(m->make_decode_state(cfg, store_.backend(), store_.dtype()));
    attention = attention || m->kind() == LayerKind::attention;
    mamba = mamba || m->kind() == LayerKind::mamba;
  }
  cfg.scan_chunk = mamba && prefill_by_scan_ ? cfg_.chunk_size : 0;
  return DecodeState(cfg, std::move(layers), attention);
}

void HybridModel::check_token_ids(const std::vector<int64_t>& slots,
                                  const std::vector<std::vector<int32_t>>& tokens) const {
  const int64_t V = cfg_.vocab_size;
  for (size_t i = 0; i < tokens.size(); ++i)
    for (int32_t t : tokens[i])
      if (t < 0 || t >= V)
        throw InputError(fmt::format("extend: token id {} for slot {} outside the vocabulary [0, {})", t,
                                     i < slots.size() ? slots[i] : -1, V));
}

Tensor HybridModel::extend(Context& ctx, DecodeState& state, const std::vector<int64_t>& slots,
                           const std::vector<std::vector<int32_t>>& tokens, DType logits_dtype) {
  check_token_ids(slots, tokens);
  std::vector<int64_t> counts;
  std::vector<int32_t> ids;
  for (const std::vector<int32_t>& t : tokens) {
    counts.push_back(static_cast<int64_t>(t.size()));
    ids.insert(ids.end(), t.begin(), t.end());
  }
  check_groups(ctx);
  DecodeBatch batch = state.begin(*ctx.backend, slots, counts);
  Tensor ids_t = Tensor::from_vector<int32_t>({1, batch.total_tokens}, ids);
  if (!ctx.backend->device().is_cpu()) ids_t = ids_t.to(*ctx.backend);
  Tensor logits = extend_batch(ctx, state, batch, ids_t, logits_dtype);
  state.commit(batch);
  return logits;
}

// The forward() loop on the packed new tokens [1, Ntot, H] of all sequences, each stateful mixer
// continuing its slots; then the head on each sequence's last row only.
Tensor HybridModel::extend_batch(Context& ctx, DecodeState& state, const DecodeBatch& batch, const Tensor& ids_t,
                                 DType logits_dtype) {
  NM_CHECK(state.num_layers() == trunk_->size(), "extend: a decode state of {} layers for a model of {}",
           state.num_layers(), trunk_->size());
  check_groups(ctx);
  const int64_t H = cfg_.hidden_size, V = cfg_.vocab_size;
  const int64_t N = batch.total_tokens, S = batch.size();
  NM_CHECK(ids_t.numel() == N, "extend: {} token ids for a batch of {} tokens", ids_t.numel(), N);
  const DType dt = store_.dtype();
  Tensor x = ctx.empty({1, N, H}, dt);
  // The ids were checked on the host: the lookup reads nothing back (no wait for the stream).
  embed_tokens(ctx, ids_t, *embed_, V, x, /*partial=*/false, /*prechecked=*/true);
  Tensor out;
  const auto& mixers = trunk_->mixers();
  const auto& norms = trunk_->norms();
  for (size_t i = 0; i < mixers.size(); ++i) {
    Tensor h = ctx.empty({1, N, H}, dt), rstd = ctx.empty({N}, stat_dtype(dt));
    if (out.defined()) {
      Tensor sum = ctx.empty({1, N, H}, dt);
      ops::add_rmsnorm_forward(ctx, x, out, norms[i]->value, cfg_.layer_norm_epsilon, sum, h, rstd);
      x = sum;
    } else {
      ops::rmsnorm_forward(ctx, x, norms[i]->value, cfg_.layer_norm_epsilon, h, rstd);
    }
    out = mixers[i]->extend(ctx, h, state.layer(i), batch);
    // Tensor parallelism: a split mixer's part of the sum (every rank of the group decodes the same
    // batch in lockstep).
    if (mixers[i]->split_over_tensor()) parallel::groups_of(ctx).tensor->all_reduce(out);
  }
  // Each sequence's last row: x + out there. A decode step (one token each) has nothing to pick;
  // otherwise one gather rather than a copy per sequence, which would be 2 S launches per step
  // on a GPU.
  Tensor xf = x.view({N, H}), of = out.defined() ? out.view({N, H}) : Tensor();
  Tensor last_x = xf, last_out = of;
  if (N != S) {
    std::vector<int64_t> rows(static_cast<size_t>(S));
    for (int64_t i = 0; i < S; ++i) rows[static_cast<size_t>(i)] = batch.cu[i + 1] - 1;
    last_x = gather_rows(ctx, xf, rows);
    if (of.defined()) last_out = gather_rows(ctx, of, rows);
  }
  if (of.defined()) {
    Tensor sum = ctx.empty({S, H}, dt);
    ops::add(ctx, last_x, last_out, sum);
    last_x = sum;
  }
  return head_on_rows(ctx, last_x, logits_dtype);
}

void HybridModel::backward(Context& ctx, Activations& act, Tensor& dx) {
  trunk_->backward(ctx, act.layers, dx, act.layout);
  if (!embed_->requires_grad) return;
  // Sequence parallelism: every rank's rows of dx, for the lookups of this rank's vocabulary.
  const Tensor dall = shard_.sequence_split() ? gather_sequence(ctx, dx, act.layout.rows) : dx;
  embed_tokens_backward(ctx, act.input_ids, dall, *embed_);
}

double HybridModel::forward_flops_per_token(int64_t T) const {
  // LM head (this rank's vocabulary rows under tensor parallelism, as every mixer counts its part).
  const double V = static_cast<double>(lm_head_ ? lm_head_->value.dim(0) : embed_->value.dim(0));
  double f = 2.0 * static_cast<double>(cfg_.hidden_size) * V;
  for (const auto& m : trunk_->mixers()) f += m->forward_flops_per_token(T);
  // Training runs the MTP depths too: per depth eh_proj (2H -> H), the block's mixers, the head.
  for (int64_t k = 1; k <= mtp_depths(); ++k) {
    const MtpBlock& b = *mtp_[static_cast<size_t>(cfg_.mtp_block_of_depth(k))];
    f += 2.0 * static_cast<double>(cfg_.hidden_size) * (V + 2.0 * static_cast<double>(cfg_.hidden_size));
    for (const auto& m : b.stack().mixers()) f += m->forward_flops_per_token(T);
  }
  return f;
}

}  // namespace nemotron::model
