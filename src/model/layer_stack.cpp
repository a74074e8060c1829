#include "model/layer_stack.h"

#include "core/scoped_field.h"
#include "model/finite_check.h"
#include "model/mixer_factory.h"
#include "model/sequence_split.h"
#include "ops/elementwise.h"
#include "ops/rmsnorm.h"
#include "parallel/process_groups.h"

namespace nemotron::model {

LayerStack::LayerStack(const ModelConfig& cfg, const std::vector<LayerSpec>& specs, ParamStore& store,
                       int64_t first_index, const ModelShard& shard)
    : H_(cfg.hidden_size), eps_(cfg.layer_norm_epsilon), first_index_(first_index), sequence_split_(shard.sequence_split()) {
  // The trunk numbers its layers from 0; an MTP block's come after the trunk's (not trunk layers).
  const bool trunk = first_index < cfg.num_layers();
  for (size_t i = 0; i < specs.size(); ++i) {
    const size_t registered = store.all().size();
    norms_.push_back(&store.add(specs[i].norm, {cfg.hidden_size}, false));
    mixers_.push_back(make_mixer(cfg, specs[i], store, first_index + static_cast<int64_t>(i), shard));
    if (trunk)
      for (size_t k = registered; k < store.all().size(); ++k) store.all()[k]->trunk_layer = first_index + static_cast<int64_t>(i);
    moe_.push_back(dynamic_cast<MoeMixer*>(mixers_.back().get()));
    // Sequence parallelism: the norm sees this rank's rows only, and so does a whole (unsplit)
    // per-token mixer.
    if (sequence_split_) {
      norms_.back()->shard.grad_partial_over_tensor = true;
      if (!mixers_.back()->split_over_tensor())
        for (Param* p : store.all())
          if (p->name.rfind(specs[i].prefix, 0) == 0) p->shard.grad_partial_over_tensor = true;
    }
  }
}

namespace {

// Whether a split mixer's collectives overlap its compute: ctx.overlap_tensor_comm with a tensor
// group of several. On the host the "async" collectives are synchronous and the reordered GEMMs
// compute the same sums, so a CPU run takes this path too, with the same results.
bool overlaps(const Context& ctx) { return ctx.overlap_tensor_comm && parallel::groups_of(ctx).tensor->size() > 1; }

}  // namespace

// A split mixer on the normed rows h: under sequence parallelism on the rows every tensor rank
// gathers, its partial output summed back into this rank's rows; otherwise on h, summed over the
// group (Megatron's row-parallel all-reduce). A whole mixer runs on h as it is.
// Overlap: the mixer's output projection (Linear::forward_output) hands its row chunks over as
// they are computed, and each chunk's all-reduce runs while the next computes.
Tensor LayerStack::run_mixer(Context& ctx, size_t i, const Tensor& h, std::unique_ptr<MixerSaved>* ms,
                             std::vector<MoeLayerStats>* stats, const SequenceLayout& layout) {
  Mixer& m = *mixers_[i];
  const bool split = m.split_over_tensor();
  const Tensor in = split && sequence_split_ ? gather_sequence(ctx, h, layout.rows) : h;
  parallel::Communicator& tp = *parallel::groups_of(ctx).tensor;
  bool chunked = false;
  const std::function<void(Tensor&)> reduce_rows = [&](Tensor& rows) {
    tp.all_reduce_async(rows);
    chunked = true;
  };
  const bool overlap = split && !sequence_split_ && overlaps(ctx);
  Tensor out;
  {
    ScopedField<const std::function<void(Tensor&)>*> hook(ctx.on_output_rows, overlap ? &reduce_rows : nullptr);
    if (stats && moe_[i]) {
      stats->emplace_back();
      out = moe_[i]->forward(ctx, in, ms, &stats->back(), layout);
    } else {
      out = m.forward(ctx, in, ms, layout);
    }
  }
  if (!split) return out;
  if (sequence_split_) return scatter_sequence(ctx, out);
  if (chunked) tp.wait_pending();
  else tp.all_reduce(out);
  return out;
}

// A split mixer's backward: dout (this rank's rows gathered under sequence parallelism) down to
// its partial input gradient, summed over the group (into this rank's rows under sequence
// parallelism). Overlap: the weight-gradient GEMMs wait until du is complete and run while its
// collective does (Megatron's async gradient all-reduce); the compute stream waits for it after.
Tensor LayerStack::backward_split(Context& ctx, size_t i, const MixerSaved& ms, const Tensor& dout,
                                  const SequenceLayout& layout) {
  Mixer& m = *mixers_[i];
  parallel::Communicator& tp = *parallel::groups_of(ctx).tensor;
  const Tensor dy = sequence_split_ ? gather_sequence(ctx, dout, layout.rows) : dout;
  if (!overlaps(ctx)) {
    Tensor du = m.backward(ctx, ms, dy);
    if (sequence_split_) return scatter_sequence(ctx, du);
    tp.all_reduce(du);
    return du;
  }
  std::vector<std::function<void(Context&)>> weight_grads;
  Tensor du;
  {
    ScopedField<std::vector<std::function<void(Context&)>>*> defer(ctx.deferred_weight_grads, &weight_grads);
    du = m.backward(ctx, ms, dy);
  }
  if (sequence_split_) du = scatter_sequence(ctx, du, /*async=*/true);
  else tp.all_reduce_async(du);
  for (auto& grad : weight_grads) grad(ctx);
  tp.wait_pending();
  return du;
}

void LayerStack::init(uint64_t seed) {
  for (Param* p : norms_) init_constant(*p, 1.0);
  for (auto& m : mixers_) m->init(seed);
}

// Layer i's pre-norm also adds layer i-1's output to the residual stream (one fused pass); the
// last layer's output is added after the loop.
Tensor LayerStack::forward(Context& ctx, Tensor x, std::vector<LayerSaved>* saved, std::vector<MoeLayerStats>* stats,
                           const SequenceLayout& layout, bool recompute) {
  const Shape shape = x.shape();
  const int64_t H = H_, N = x.numel() / H;
  const DType dt = x.dtype();
  if (saved) saved->resize(mixers_.size());
  Tensor out;  // the previous layer's mixer output, not yet added to x
  for (size_t i = 0; i < mixers_.size(); ++i) {
    const int64_t li = first_index_ + static_cast<int64_t>(i);
    notify(li, false);
    Tensor h = ctx.empty(shape, dt), rstd = ctx.empty({N}, stat_dtype(dt));
    if (out.defined()) {
      Tensor sum = ctx.empty(shape, dt);
      ops::add_rmsnorm_forward(ctx, x, out, norms_[i]->value, eps_, sum, h, rstd);
      x = sum;
    } else {
      ops::rmsnorm_forward(ctx, x, norms_[i]->value, eps_, h, rstd);
    }
    // Full recomputation keeps only x_in and rstd here; backward reruns the mixer's forward.
    const bool keep = saved && !recompute;
    check_finite(h, "layer {} normed input", li);
    std::unique_ptr<MixerSaved>* ms = keep ? &(*saved)[i].mixer : nullptr;
    out = run_mixer(ctx, i, h, ms, stats, layout);
    check_finite(out, "layer {} ({}) output", li, layer_kind_name(kind(i)));
    if (saved) (*saved)[i].x_in = x, (*saved)[i].rstd = rstd;
  }
  if (out.defined()) {
    Tensor next = ctx.empty(shape, dt);
    ops::add(ctx, x, out, next);
    x = next;
  }
  return x;
}

void LayerStack::backward(Context& ctx, std::vector<LayerSaved>& saved, Tensor& dx, const SequenceLayout& layout) {
  NM_CHECK(saved.size() == mixers_.size(), "backward: activations of {} layers for a stack of {}", saved.size(),
           mixers_.size());
  const int64_t H = H_;
  for (size_t i = mixers_.size(); i-- > 0;) {
    const int64_t li = first_index_ + static_cast<int64_t>(i);
    LayerSaved& s = saved[i];
    notify(li, true);
    const int64_t N = s.x_in.numel() / H;
    if (!s.mixer) {  // recompute: the normed input, then the mixer's forward with its saved state
      Tensor h = ctx.empty(s.x_in.shape(), s.x_in.dtype()), rstd = ctx.empty({N}, stat_dtype(s.x_in.dtype()));
      ops::rmsnorm_forward(ctx, s.x_in, norms_[i]->value, eps_, h, rstd);
      const bool gather = sequence_split_ && mixers_[i]->split_over_tensor();
      mixers_[i]->forward(ctx, gather ? gather_sequence(ctx, h, layout.rows) : h, &s.mixer, layout);
    }
    check_finite(dx, "layer {} output gradient", li);
    // The adjoints of run_mixer's: a split mixer's output gradient gathered (sequence parallel),
    // its partial input gradient (each rank's column-parallel projections give part of du) summed
    // over the group into this rank's rows, or whole.
    Tensor du = mixers_[i]->split_over_tensor() ? backward_split(ctx, i, *s.mixer, dx, layout)
                                                : mixers_[i]->backward(ctx, *s.mixer, dx);
    check_finite(du, "layer {} ({}) input gradient", li, layer_kind_name(kind(i)));
    s.mixer.reset();
    // The residual join, fused and in place: dx_in = dx_out + d(norm branch).
    Tensor dx2 = dx.view({N, H});
    Tensor d_norm = grad_sink(ctx, *norms_[i]);
    ops::rmsnorm_backward(ctx, s.x_in.view({N, H}), norms_[i]->value, s.rstd, du.view({N, H}), dx2, d_norm, &dx2);
    if (ctx.on_layer_backward && *ctx.on_layer_backward) (*ctx.on_layer_backward)(li);
  }
  saved.clear();
}

}  // namespace nemotron::model
