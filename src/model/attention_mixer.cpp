#include "model/attention_mixer.h"

#include <algorithm>
#include <vector>

#include "model/context_split.h"
#include "ops/attention.h"
#include "ops/attention_decode.h"
#include "ops/fused_projection.h"
#include "ops/kv_cache_decode.h"
#include "ops/qkv_rope_cache.h"
#include "ops/rope.h"

namespace nemotron::model {

AttentionMixer::AttentionMixer(const ModelConfig& cfg, ParamStore& store, const std::string& prefix, int64_t,
                               int64_t num_key_value_heads, const ModelShard& shard)
    : H_(cfg.hidden_size),
      nq_(cfg.num_attention_heads),
      nkv_(num_key_value_heads > 0 ? num_key_value_heads : cfg.num_key_value_heads),
      hd_(0),
      rope_(cfg.position_embedding_type == "rope"),
      rope_freq_(cfg.rope_freq()),
      init_std_(cfg.initializer_range),
      out_std_(output_init_std(cfg)) {
  if (nq_ <= 0) throw InputError(fmt::format("num_attention_heads: expected a positive count, got {}", nq_));
  if (nkv_ <= 0 || nq_ % nkv_ != 0)
    throw InputError(fmt::format("num_key_value_heads: {} does not divide num_attention_heads = {}", nkv_, nq_));
  if (cfg.position_embedding_type != "none" && !rope_)
    throw InputError(fmt::format("position_embedding_type: expected \"none\" or \"rope\", got \"{}\"",
                                 cfg.position_embedding_type));
  hd_ = cfg.attn_head_dim();
  if (hd_ <= 0 || (rope_ && hd_ % 2 != 0))
    throw InputError(fmt::format("head_dim: expected a positive{} size, got {}", rope_ ? " even" : "", hd_));
  split_ = shard.tensor_parallel();
  const TensorSplit column = TensorSplit::column(shard), row = TensorSplit::row(shard);
  // Fewer KV groups than tensor ranks (the layout checked that they divide the group): k and v
  // whole on every rank, each computing only the group its query heads read (rank t's heads all
  // fall in group t / (T / nkv)); the ranks sharing a group each give its weights the gradient of
  // their own heads, summed over the tensor group like every whole parameter fed by partial sums.
  const int64_t T = shard.tensor_size;
  const bool shared_kv = split_ && nkv_ % T != 0;
  // parallel::RankLayout refuses such a layout first, naming the recipe and its key.
  NM_CHECK(!shared_kv || T % nkv_ == 0, "{}num_key_value_heads: {} neither divides the tensor size {} nor is a multiple of it",
           prefix, nkv_, T);
  const TensorSplit kv_split = shared_kv ? TensorSplit{} : column;
  q_proj_ = Linear(store, prefix + "q_proj.", H_, nq_ * hd_, cfg.attention_bias, column);
  k_proj_ = Linear(store, prefix + "k_proj.", H_, nkv_ * hd_, cfg.attention_bias, kv_split);
  v_proj_ = Linear(store, prefix + "v_proj.", H_, nkv_ * hd_, cfg.attention_bias, kv_split);
  o_proj_ = Linear(store, prefix + "o_proj.", nq_ * hd_, H_, cfg.attention_bias, row);
  nq_ = split_extent(nq_, column, prefix + "num_attention_heads");
  if (shared_kv) {
    const int64_t group = shard.tensor_rank / (T / nkv_);
    kv_rows_ = {group * hd_, (group + 1) * hd_};
    nkv_ = 1;
    for (const Linear* l : {&k_proj_, &v_proj_}) {
      l->weight().shard.grad_partial_over_tensor = true;
      if (l->bias()) l->bias()->shard.grad_partial_over_tensor = true;
    }
  } else {
    nkv_ = split_extent(nkv_, column, prefix + "num_key_value_heads");
    qkv_ = FusedLinears({&q_proj_, &k_proj_, &v_proj_});
  }
}

Tensor AttentionMixer::project_kv(Context& ctx, const Linear& proj, const Tensor& u, LinearSaved* keep) const {
  if (kv_rows_.end == 0) return proj.forward(ctx, u, keep);
  std::vector<int64_t> dims = u.shape().dims();
  dims.back() = hd_;
  Tensor y = ctx.empty(Shape(std::move(dims)), u.dtype());
  proj.forward_rows(ctx, u, {&kv_rows_, 1}, {&y, 1}, keep);
  return y;
}

void AttentionMixer::project_kv_backward(Context& ctx, const Linear& proj, const Tensor& u, const Tensor& dy, Tensor& du,
                                         const LinearSaved& kept) const {
  if (kv_rows_.end == 0) return proj.backward(ctx, u, dy, &du, true, &kept);
  proj.backward_rows(ctx, u, {&kv_rows_, 1}, {&dy, 1}, &du, true, &kept);
}

void AttentionMixer::init(uint64_t seed) {
  q_proj_.init(seed, init_std_);
  k_proj_.init(seed, init_std_);
  v_proj_.init(seed, init_std_);
  o_proj_.init(seed, out_std_);
}

Tensor AttentionMixer::forward(Context& ctx, const Tensor& u, std::unique_ptr<MixerSaved>* saved,
                              const SequenceLayout& layout) {
  NM_CHECK(u.rank() == 3 && u.dim(2) == H_, "attention: expected u [B, T, {}], got {}", H_, u.shape().str());
  const int64_t B = u.dim(0), T = u.dim(1);
  LinearSaved kept[4];  // q, k, v, o
  LinearSaved* keep = saved ? kept : nullptr;
  Tensor q = q_proj_.forward(ctx, u, keep ? &kept[0] : nullptr).view({B, T, nq_, hd_});
  Tensor k = project_kv(ctx, k_proj_, u, keep ? &kept[1] : nullptr).view({B, T, nkv_, hd_});
  Tensor v = project_kv(ctx, v_proj_, u, keep ? &kept[2] : nullptr).view({B, T, nkv_, hd_});
  if (rope_) {
    ops::rope_forward(ctx, q, rope_freq_, q, 0, layout.position_ids);
    ops::rope_forward(ctx, k, rope_freq_, k, 0, layout.position_ids);
  }
  Tensor o, lse;
  if (layout.context_split) {
    // Context parallelism, all-gather of K/V (Megatron's cp_comm_type=all_gather): every rank's
    // keys and values in sequence order; each local chunk's queries attend over the keys up to the
    // chunk's end (ops/attention.h's query tail: the causal and packed-sequence masks at their
    // global positions), so a rank does its own share of the work and no more.
    const ContextChunks c = context_chunks(ctx, T);
    const Tensor kf = gather_context(ctx, k), vf = gather_context(ctx, v);
    const Tensor seq = layout.seq_idx.defined() ? gather_context(ctx, layout.seq_idx) : Tensor();
    o = ctx.empty({B, T, nq_, hd_}, u.dtype());
    lse = ctx.empty({2, B, nq_, c.L}, stat_dtype(u.dtype()));
    for (int j = 0; j < 2; ++j) {
      const int64_t keys = (c.chunk(j) + 1) * c.L;
      Tensor oj = ctx.empty({B, c.L, nq_, hd_}, u.dtype()), lj = lse.select(j);
      ops::attention_forward(ctx, row_block(ctx, q, j * c.L, c.L), row_block(ctx, kf, 0, keys),
                             row_block(ctx, vf, 0, keys), oj, lj, seq.defined() ? row_block(ctx, seq, 0, keys) : seq);
      copy_row_block(o, j * c.L, oj, 0, c.L);
    }
  } else {
    o = ctx.empty({B, T, nq_, hd_}, u.dtype());
    lse = ctx.empty({B, nq_, T}, stat_dtype(u.dtype()));
    ops::attention_forward(ctx, q, k, v, o, lse, layout.seq_idx);
  }
  Tensor out = o_proj_.forward_output(ctx, o.view({B, T, nq_ * hd_}), keep ? &kept[3] : nullptr);
  if (saved) {
    auto s = std::make_unique<AttentionSaved>();
    s->u = u;
    s->q = q;
    s->k = k;
    s->v = v;
    s->o = o;
    s->lse = lse;
    s->layout = layout;
    s->q_proj = std::move(kept[0]);
    s->k_proj = std::move(kept[1]);
    s->v_proj = std::move(kept[2]);
    s->o_proj = std::move(kept[3]);
    *saved = std::move(s);
  }
  return out;
}

Tensor AttentionMixer::backward(Context& ctx, const MixerSaved& saved_base, const Tensor& dout) {
  const auto& s = dynamic_cast<const AttentionSaved&>(saved_base);
  const int64_t B = s.u.dim(0), T = s.u.dim(1);
  const DType dt = dout.dtype();
  Tensor d_o = ctx.empty({B, T, nq_ * hd_}, dt);
  o_proj_.backward(ctx, s.o.view({B, T, nq_ * hd_}), dout, &d_o, false, &s.o_proj);
  Tensor dq, dk, dv;
  if (s.layout.context_split) {  // each chunk's call again; dK/dV summed back to their owners
    const ContextChunks c = context_chunks(ctx, T);
    const Tensor kf = gather_context(ctx, s.k), vf = gather_context(ctx, s.v);
    const Tensor seq = s.layout.seq_idx.defined() ? gather_context(ctx, s.layout.seq_idx) : Tensor();
    const Tensor d_o4 = d_o.view({B, T, nq_, hd_});
    dq = ctx.empty(s.q.shape(), dt);
    Tensor dkf = ctx.zeros(kf.shape(), dt), dvf = ctx.zeros(vf.shape(), dt);
    for (int j = 1; j >= 0; --j) {  // chunk 1's keys include chunk 0's: copy its, then add
      const int64_t keys = (c.chunk(j) + 1) * c.L;
      const Tensor kj = row_block(ctx, kf, 0, keys), vj = row_block(ctx, vf, 0, keys);
      Tensor dqj = ctx.empty({B, c.L, nq_, hd_}, dt), dkj = ctx.empty(kj.shape(), dt), dvj = ctx.empty(vj.shape(), dt);
      ops::attention_backward(ctx, row_block(ctx, s.q, j * c.L, c.L), kj, vj, row_block(ctx, s.o, j * c.L, c.L),
                              s.lse.select(j), row_block(ctx, d_o4, j * c.L, c.L), dqj, dkj, dvj,
                              seq.defined() ? row_block(ctx, seq, 0, keys) : seq);
      copy_row_block(dq, j * c.L, dqj, 0, c.L);
      if (j == 1) {
        copy_row_block(dkf, 0, dkj, 0, keys);
        copy_row_block(dvf, 0, dvj, 0, keys);
      } else {
        add_row_block(ctx, dkf, 0, dkj, 0, keys);
        add_row_block(ctx, dvf, 0, dvj, 0, keys);
      }
    }
    dk = reduce_scatter_context(ctx, dkf);
    dv = reduce_scatter_context(ctx, dvf);
  } else {
    dq = ctx.empty(s.q.shape(), dt), dk = ctx.empty(s.k.shape(), dt), dv = ctx.empty(s.v.shape(), dt);
    ops::attention_backward(ctx, s.q, s.k, s.v, s.o, s.lse, d_o.view({B, T, nq_, hd_}), dq, dk, dv, s.layout.seq_idx);
  }
  if (rope_) {
    ops::rope_backward(ctx, dq, rope_freq_, dq, 0, s.layout.position_ids);
    ops::rope_backward(ctx, dk, rope_freq_, dk, 0, s.layout.position_ids);
  }
  Tensor du = ctx.empty(s.u.shape(), dt);
  q_proj_.backward(ctx, s.u, dq.view({B, T, nq_ * hd_}), &du, false, &s.q_proj);
  project_kv_backward(ctx, k_proj_, s.u, dk.view({B, T, nkv_ * hd_}), du, s.k_proj);
  project_kv_backward(ctx, v_proj_, s.u, dv.view({B, T, nkv_ * hd_}), du, s.v_proj);
  return du;
}

namespace {

struct AttentionDecodeState : LayerDecodeState {
  Tensor k, v;  // [num_blocks, block_size, nkv, hd]
  void release(int64_t) override {}  // the blocks are DecodeState's; stale rows are never read
  void fork(Context& ctx, const ForkPlan& plan) override {  // full blocks are shared, not copied
    copy_rows(ctx, k, plan.from_blocks, plan.to_blocks);
    copy_rows(ctx, v, plan.from_blocks, plan.to_blocks);
  }
  int64_t bytes() const override { return static_cast<int64_t>(k.nbytes() + v.nbytes()); }
};

}  // namespace

std::unique_ptr<LayerDecodeState> AttentionMixer::make_decode_state(const DecodeConfig& cfg, Backend& backend,
                                                                    DType dtype) const {
  auto s = std::make_unique<AttentionDecodeState>();
  const Shape pool{cfg.resolved_num_blocks(), cfg.block_size, nkv_, hd_};
  s->k = Tensor::zeros(pool, dtype, backend);
  s->v = Tensor::zeros(pool, dtype, backend);
  return s;
}

Tensor AttentionMixer::extend(Context& ctx, const Tensor& u, LayerDecodeState* state, const DecodeBatch& batch) {
  auto* s = dynamic_cast<AttentionDecodeState*>(state);
  NM_CHECK(s, "attention extend: needs this layer's decode state");
  const int64_t N = batch.total_tokens;
  NM_CHECK(u.numel() == N * H_, "attention extend: expected u [1, {}, {}], got {}", N, H_, u.shape().str());
  // batch.seq_idx: a step of whole prompts (model/prefill_layout.h), built and uploaded once per
  // step. On the CPU the paged kernel serves it too.
  const bool whole_prompts = batch.seq_idx.defined() && !ctx.backend->device().is_cpu();
  Tensor q, k, v;
  if (qkv_.active() && !whole_prompts) {
    // Decode: the fused q/k/v GEMM's output split, rotated and written to the cache by one kernel
    // (ops/qkv_rope_cache.h) where five ran; k and v are read back from the cache below.
    q = ctx.empty({1, N, nq_, hd_}, u.dtype());
    ops::qkv_rope_cache_write(ctx, qkv_.forward(ctx, u.view({N, H_})), rope_ ? &rope_freq_ : nullptr,
                              batch.position_ids, batch.slot_mapping, q, s->k, s->v);
  } else {
    if (qkv_.active()) {
      q = ctx.empty({1, N, nq_, hd_}, u.dtype());
      k = ctx.empty({1, N, nkv_, hd_}, u.dtype());
      v = ctx.empty({1, N, nkv_, hd_}, u.dtype());
      Tensor blocks[] = {q.view({N, nq_ * hd_}), k.view({N, nkv_ * hd_}), v.view({N, nkv_ * hd_})};
      ops::split_columns(ctx, qkv_.forward(ctx, u.view({N, H_})), blocks);
    } else {
      q = q_proj_.forward(ctx, u).view({1, N, nq_, hd_});
      k = project_kv(ctx, k_proj_, u).view({1, N, nkv_, hd_});
      v = project_kv(ctx, v_proj_, u).view({1, N, nkv_, hd_});
    }
    if (rope_) {
      ops::rope_forward(ctx, q, rope_freq_, q, 0, batch.position_ids);
      ops::rope_forward(ctx, k, rope_freq_, k, 0, batch.position_ids);
    }
    ops::kv_cache_write_decode(ctx, k.view({N, nkv_, hd_}), batch.slot_mapping, s->k);
    ops::kv_cache_write_decode(ctx, v.view({N, nkv_, hd_}), batch.slot_mapping, s->v);
  }
  Tensor o = ctx.empty({N, nq_, hd_}, u.dtype());
  if (whole_prompts) {
    // Whole prompts: each sequence's keys are exactly its new tokens, so the packed training
    // kernel (flash, tensor cores, key blocks of other sequences skipped) gives what the paged
    // kernel would, without walking the cache one key per warp step. On an H100, 256 prompts x
    // 256 tokens of the 8B shape: the engine's prefill 28,013 -> 42,910 tokens/s, attention 78 ms
    // of a 1.54 s step (the GEMMs 84%).
    Tensor lse = ctx.empty({1, nq_, N}, stat_dtype(u.dtype()));
    Tensor o4 = o.view({1, N, nq_, hd_});
    ops::attention_forward(ctx, q, k, v, o4, lse, batch.seq_idx);
  } else {
    ops::attention_decode_forward(ctx, q.view({N, nq_, hd_}), s->k, s->v,
                                  {batch.block_table, batch.cu_seqlens, batch.context_lens}, o);
  }
  return o_proj_.forward(ctx, o.view({1, N, nq_ * hd_}));
}

double AttentionMixer::forward_flops_per_token(int64_t T) const {
  const double kv = kv_rows_.end == 0 ? k_proj_.flops_per_row() + v_proj_.flops_per_row()
                                      : 4.0 * static_cast<double>(H_) * static_cast<double>(hd_);  // the one group
  double proj = q_proj_.flops_per_row() + kv + o_proj_.flops_per_row();
  double attn = 4.0 * static_cast<double>(nq_ * hd_) * static_cast<double>(T + 1) / 2.0;
  return proj + attn;
}

}  // namespace nemotron::model
