#include "train/adamw.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace nemotron::train {

// The rank's slices of the flat gradient buffer's buckets and the state that lives only for them.
struct AdamW::Shard {
  parallel::Communicator* group = nullptr;
  const void* buffer = nullptr;    // the store's gradient buffer this layout was made over
  int64_t buffer_numel = 0;        // N: a multiple of 64 D
  int64_t size = 0;                // S = N / D, the elements a rank owns
  std::vector<GradBucket> buckets;  // each a multiple of 64 D; shard_at: the rank's slice in S
  std::vector<int64_t> offset;     // by parameter: its gradient's offset in the buffer; -1 = frozen
  std::vector<int> bucket_of;      // by parameter: the bucket it lies in; -1 = frozen
  // Parameter `param`'s flat elements [begin, begin + length) are the shard's [at, at + length).
  struct Piece {
    size_t param;
    int64_t begin, length, at;
  };
  std::vector<Piece> pieces;
  std::vector<int> piece_of;   // by parameter: its piece's index, -1 = none on this rank
  Tensor grad, master, m, v;   // S float32 elements each; master only for a store with masters
  Tensor value;                // full parameter sharding: S elements in the compute dtype
  bool by_layer = false;       // FSDP: one bucket per trunk layer (gradients in layer slots)
  // every = each rank's `mine` (S elements, laid out as grad) in the flat buffer's layout (N),
  // one all-gather per bucket.
  void all_gather(const Tensor& mine, Tensor& every) const {
    for (const GradBucket& b : buckets) {
      const int64_t s = (b.end - b.begin) / group->size();
      Tensor out = every.slice(b.begin, b.end);
      group->all_gather(mine.slice(b.shard_at, b.shard_at + s), out);
    }
  }
};

namespace {

constexpr int64_t kShardAlign = 64;  // elements: keeps every piece 16-byte aligned (float4 kernels)

Tensor flat(const Tensor& t) { return t.view({t.numel()}); }

Context store_context(const model::ParamStore& params) {
  return Context{&params.backend(), nullptr, params.dtype()};
}

// What the multi-tensor list depends on: which parameters train and where their masters and
// gradients are (a freeze, an unfreeze or create_masters() since the last build changes it).
std::vector<const void*> list_key(const model::ParamStore& params, bool experts) {
  std::vector<const void*> out;
  for (const model::Param* p : params.all()) {
    if (p->is_expert() != experts) continue;
    out.push_back(p->master.defined() ? p->master.raw() : nullptr);
    out.push_back(p->requires_grad && p->grad.defined() ? p->grad.raw() : nullptr);
  }
  return out;
}

// Megatron's rule: scale by max_norm / (norm + 1e-6) when the norm exceeds max_norm.
double clip_factor(double norm, double max_norm) { return max_norm > 0 && norm > max_norm ? max_norm / (norm + 1e-6) : 1.0; }

}  // namespace

AdamW::AdamW(model::ParamStore& params, AdamWConfig cfg, parallel::Communicator* shard_over,
             parallel::Communicator* expert_group, parallel::Communicator* tensor_group, int64_t bucket_elements,
             Fsdp fsdp)
    : params_(&params), cfg_(cfg), expert_group_(expert_group), tensor_group_(tensor_group) {
  m_.resize(params.all().size());
  v_.resize(params.all().size());
  if (!shard_over || shard_over->size() == 1) {
    params.allocate_grads();  // a store that deferred them (ParamStore's defer_grads)
    if (params.masters_deferred()) params.create_masters();  // ... or its masters: whole here
    ensure_moments();
    return;
  }
  const int D = shard_over->size();
  // FSDP cuts at every layer's first parameter: each must start at 64 D.
  const bool by_layer = fsdp != Fsdp::off;
  const int64_t align = by_layer ? kShardAlign * D : kShardAlign, pad_to = kShardAlign * D;
  // Sharded gradients: the layout from shapes; the whole buffer is never allocated (the gradients
  // live in GradSlots' layer slots), and whole per-parameter ones a store did not defer are
  // dropped here, before the shard's state is allocated. Otherwise the flat buffer, made here.
  const model::GradLayout layout = params.grad_layout(align, pad_to);  // make_grads_contiguous' too
  if (by_layer) {
    for (size_t k = 0; k < params.all().size(); ++k) {
      model::Param& p = *params.all()[k];
      if (layout.offset[k] >= 0) p.grad = Tensor();
      else if (p.requires_grad && !p.grad.defined()) params.set_requires_grad(p, true);  // an expert: its own
    }
    params.release_grad_buffer();  // one an earlier layout made
  } else {
    params.make_grads_contiguous(align, pad_to);
  }
  auto sh = std::make_unique<Shard>();
  sh->group = shard_over;
  sh->buffer = by_layer ? nullptr : params.grad_buffer().raw();
  sh->buffer_numel = layout.numel;
  sh->buckets = grad_buckets(params, layout, bucket_elements, kShardAlign * D, by_layer);  // each a multiple of 64 D
  for (GradBucket& b : sh->buckets) {
    NM_CHECK((b.end - b.begin) % (kShardAlign * D) == 0, "bucket [{}, {}) is not a multiple of {}", b.begin, b.end,
             kShardAlign * D);
    b.shard_at = sh->size;
    sh->size += (b.end - b.begin) / D;
  }
  const auto& all = params.all();
  sh->offset.assign(all.size(), -1);
  sh->bucket_of.assign(all.size(), -1);
  sh->piece_of.assign(all.size(), -1);
  Backend& be = params.backend();
  sh->grad = Tensor::zeros({sh->size}, layout.dtype, be);
  sh->m = Tensor::zeros({sh->size}, layout.dtype, be);
  sh->v = Tensor::zeros({sh->size}, layout.dtype, be);
  for (size_t k = 0; k < all.size(); ++k) {
    const model::Param& p = *all[k];
    if (!p.requires_grad) continue;
    if (p.is_expert()) {  // whole on its rank (see the header)
      if (params.masters_deferred() && p.value.dtype() == DType::bf16) all[k]->master = p.value.to_host(DType::f32).to(be);
      m_[k] = Tensor::zeros(p.value.shape(), p.grad.dtype(), p.grad.backend());
      v_[k] = Tensor::zeros(p.value.shape(), p.grad.dtype(), p.grad.backend());
      continue;
    }
    NM_CHECK(layout.offset[k] >= 0, "{}: a trainable gradient outside the flat buffer", p.name);
    // One dtype for the values' all-gather: a trainable `stat` parameter (float32 in a bf16
    // store) would need a second one; none trains today (the MoE correction bias is frozen).
    if (p.value.dtype() != params.dtype())
      throw InputError(fmt::format("ddp.use_distributed_optimizer: parameter {} trains in {} while the model computes in "
                                   "{}; the distributed optimizer gathers one dtype (set ddp.use_distributed_optimizer=false)",
                                   p.name, dtype_name(p.value.dtype()), dtype_name(params.dtype())));
    const int64_t off = layout.offset[k];
    sh->offset[k] = off;
    size_t i = 0;
    while (i < sh->buckets.size() && !(sh->buckets[i].begin <= off && off < sh->buckets[i].end)) ++i;
    NM_CHECK(i < sh->buckets.size() && off + p.value.numel() <= sh->buckets[i].end, "{}: not inside one bucket", p.name);
    sh->bucket_of[k] = static_cast<int>(i);
    const GradBucket& bk = sh->buckets[i];
    const int64_t s = (bk.end - bk.begin) / D, lo = bk.begin + static_cast<int64_t>(shard_over->rank()) * s;
    const int64_t a = std::max(off, lo), b = std::min(off + p.value.numel(), lo + s);
    if (a >= b) continue;
    const int64_t at = bk.shard_at + (a - lo);
    sh->piece_of[k] = static_cast<int>(sh->pieces.size());
    sh->pieces.push_back({k, a - off, b - a, at});
    m_[k] = sh->m.slice(at, at + (b - a));
    v_[k] = sh->v.slice(at, at + (b - a));
  }
  if (fsdp == Fsdp::grads_params) sh->value = Tensor::zeros({sh->size}, params.dtype(), be);
  sh->by_layer = by_layer;
  shard_ = std::move(sh);
  shard_masters();
  take_deferred_masters();
  take_value_pieces();
}

// The rank's slices of deferred masters (ParamStore::defer_masters), one piece at a time from the
// values: the same float32 values create_masters() would give, without the whole ones existing.
void AdamW::take_deferred_masters() {
  if (!params_->masters_deferred()) return;
  params_->masters_taken();
  if (params_->dtype() != DType::bf16) return;  // full precision: the values are the truth
  Shard& sh = *shard_;
  NM_CHECK(!sh.master.defined(), "AdamW: masters both deferred and made");
  sh.master = Tensor::zeros({sh.size}, DType::f32, params_->backend());
  const auto& all = params_->all();
  for (const Shard::Piece& pc : sh.pieces)
    sh.master.slice(pc.at, pc.at + pc.length)
        .copy_from(flat(all[pc.param]->value).slice(pc.begin, pc.begin + pc.length).to_host(DType::f32));
  list_.reset();
}

bool AdamW::shards_values() const { return shard_ && shard_->value.defined(); }

bool AdamW::shards_grads() const { return shard_ && shard_->by_layer; }

Tensor AdamW::value_shard() const { return shards_values() ? shard_->value : Tensor(); }

int64_t AdamW::buffer_offset(size_t k) const { return shard_ ? shard_->offset[k] : -1; }

void AdamW::take_value_pieces() {
  if (!shards_values()) return;
  const auto& all = params_->all();
  for (const Shard::Piece& pc : shard_->pieces)
    shard_->value.slice(pc.at, pc.at + pc.length).copy_from(flat(all[pc.param]->value).slice(pc.begin, pc.begin + pc.length));
}

AdamW::~AdamW() = default;

void AdamW::ensure_moments() {
  if (shard_) return;  // every piece has its moments from construction; the layout is checked per step
  const auto& all = params_->all();
  NM_CHECK(all.size() == m_.size(), "AdamW: the store has {} parameters, the optimizer was built for {}", all.size(),
           m_.size());
  for (size_t k = 0; k < all.size(); ++k) {
    const model::Param& p = *all[k];
    if (!p.requires_grad || m_[k].defined()) continue;
    m_[k] = Tensor::zeros(p.value.shape(), p.grad.dtype(), p.grad.backend());
    v_[k] = Tensor::zeros(p.value.shape(), p.grad.dtype(), p.grad.backend());
  }
}

namespace {

// The trainable parameters of the store that are (experts) or are not expert-parallel experts.
std::unique_ptr<ops::AdamWTensors> make_list(model::ParamStore& params, std::vector<Tensor>& m, std::vector<Tensor>& v,
                                             bool experts) {
  std::vector<ops::AdamWParam> ps;
  const auto& all = params.all();
  for (size_t k = 0; k < all.size(); ++k) {
    model::Param& p = *all[k];
    if (p.requires_grad && p.is_expert() == experts) ps.push_back({p.value, p.master, p.grad, m[k], v[k], p.weight_decay});
  }
  return std::make_unique<ops::AdamWTensors>(std::move(ps));
}

}  // namespace

ops::AdamWTensors& AdamW::list() {
  std::vector<const void*> key = list_key(*params_, false);
  if (list_ && key == list_key_) return *list_;
  ensure_moments();
  list_ = make_list(*params_, m_, v_, false);
  list_key_ = std::move(key);
  return *list_;
}

ops::AdamWTensors* AdamW::expert_list() {
  std::vector<const void*> key = list_key(*params_, true);
  if (key.empty()) return nullptr;
  if (expert_list_ && key == expert_key_) return expert_list_.get();
  ensure_moments();
  expert_list_ = make_list(*params_, m_, v_, true);
  expert_key_ = std::move(key);
  return expert_list_.get();
}

void AdamW::step(double lr) {
  ++step_;
  Context ctx = store_context(*params_);
  const ops::AdamWHyper h{lr, cfg_.beta1, cfg_.beta2, cfg_.eps, cfg_.weight_decay, step_, pending_grad_scale_};
  ops::adamw_update(ctx, shard_ ? shard_list() : list(), h);
  if (ops::AdamWTensors* experts = expert_list()) ops::adamw_update(ctx, *experts, h);
  pending_grad_scale_ = 1;
  if (shard_ && !shards_values()) gather_values();  // full sharding: gathered where read (param_gather.h)
}

std::vector<const model::Param*> AdamW::owners(bool experts) const {
  std::vector<const model::Param*> out;
  const auto& all = params_->all();
  if (shard_ && !experts) {
    for (const Shard::Piece& pc : shard_->pieces) out.push_back(all[pc.param]);
    return out;
  }
  for (const model::Param* p : all)
    if (p->requires_grad && p->is_expert() == experts) out.push_back(p);
  return out;
}

double AdamW::counted_square_sum(Context& ctx, const ops::AdamWTensors& list,
                                 const std::vector<const model::Param*>& owners) {
  if (!tensor_group_ || tensor_group_->size() == 1 || tensor_group_->rank() == 0) {
    const double n = ops::grad_norm(ctx, list);
    return n * n;
  }
  NM_CHECK(owners.size() == list.params().size(), "AdamW: {} owners for {} norm entries", owners.size(),
           list.params().size());
  std::vector<ops::AdamWParam> split;
  for (size_t i = 0; i < owners.size(); ++i)
    if (owners[i]->tensor_split()) split.push_back(list.params()[i]);
  if (split.empty()) return 0;
  const double n = ops::grad_norm(ctx, ops::AdamWTensors(std::move(split)));
  return n * n;
}

double AdamW::clip_grad_norm(double max_norm) {
  Context ctx = store_context(*params_);
  // The sum over ranks of each rank's sum of squares over its pieces (ZeRO) or its whole state.
  double sq = counted_square_sum(ctx, shard_ ? shard_list() : list(), owners(false));
  if (shard_) sq = shard_->group->all_reduce_host(sq);
  if (ops::AdamWTensors* experts = expert_list()) {  // every expert once: summed over the ranks that hold them
    const double local = counted_square_sum(ctx, *experts, owners(true));
    sq += expert_group_ ? expert_group_->all_reduce_host(local) : local;
  }
  // Tensor parallelism: each member's parts of the split parameters (the whole ones counted on
  // its rank 0).
  if (tensor_group_ && tensor_group_->size() > 1) sq = tensor_group_->all_reduce_host(sq);
  const double norm = std::sqrt(sq);
  pending_grad_scale_ = clip_factor(norm, max_norm);
  return norm;
}

ops::AdamWTensors& AdamW::shard_list() {
  Shard& sh = *shard_;
  const auto& all = params_->all();
  // The layout holds while the trainable set and the gradient buffer are those it was made over.
  // (Sharded gradients: the buffer is released, each gradient in its layer's slot.)
  const bool slots = shards_grads();
  bool same = slots || (params_->grad_buffer().defined() && params_->grad_buffer().raw() == sh.buffer);
  for (size_t k = 0; same && k < all.size(); ++k) {
    const model::Param& p = *all[k];
    if (p.is_expert()) continue;  // outside the buffer, whole (expert_list)
    same = p.requires_grad == (sh.offset[k] >= 0) &&
           (!p.requires_grad || slots ||
            p.grad.raw() == static_cast<const char*>(sh.buffer) +
                                sh.offset[k] * static_cast<int64_t>(dtype_size(p.grad.dtype())));
  }
  if (!same)
    throw Error(
        "ddp.use_distributed_optimizer: the trainable parameters or their gradient buffer changed after the "
        "distributed optimizer was laid out (freezing or unfreezing during a run needs "
        "ddp.use_distributed_optimizer=false)");
  shard_masters();  // masters made since (create_masters after construction) join the shard
  if (list_) return *list_;
  std::vector<ops::AdamWParam> ps;
  for (const Shard::Piece& pc : sh.pieces) {
    model::Param& p = *all[pc.param];
    const int64_t e = pc.at + pc.length;
    ps.push_back({sh.value.defined() ? sh.value.slice(pc.at, e) : flat(p.value).slice(pc.begin, pc.begin + pc.length),
                  sh.master.defined() ? sh.master.slice(pc.at, e) : Tensor(), sh.grad.slice(pc.at, e),
                  m_[pc.param], v_[pc.param], p.weight_decay});
  }
  list_ = std::make_unique<ops::AdamWTensors>(std::move(ps));
  return *list_;
}

// Gather bucket by bucket and copy out, rather than keeping the values in one contiguous buffer:
// each parameter keeps its own value tensor, which the loaders, LoRA and the generation engine
// hold; the price is a temporary of the largest bucket in the compute dtype and one copy per
// parameter, small beside a step.
void AdamW::gather_values() {
  Shard& sh = *shard_;
  const auto& all = params_->all();
  Backend& be = params_->backend();
  Tensor mine = Tensor::zeros({sh.size}, params_->dtype(), be);
  for (const Shard::Piece& pc : sh.pieces)
    mine.slice(pc.at, pc.at + pc.length).copy_from(flat(all[pc.param]->value).slice(pc.begin, pc.begin + pc.length));
  int64_t largest = 0;
  for (const GradBucket& b : sh.buckets) largest = std::max(largest, b.end - b.begin);
  Tensor every = Tensor::empty({largest}, params_->dtype(), be);
  const int D = sh.group->size();
  for (size_t i = 0; i < sh.buckets.size(); ++i) {
    const GradBucket& b = sh.buckets[i];
    const int64_t s = (b.end - b.begin) / D;
    Tensor out = every.slice(0, b.end - b.begin);
    sh.group->all_gather(mine.slice(b.shard_at, b.shard_at + s), out);
    for (size_t k = 0; k < all.size(); ++k) {
      if (sh.bucket_of[k] != static_cast<int>(i)) continue;
      Tensor v = flat(all[k]->value);
      v.copy_from(out.slice(sh.offset[k] - b.begin, sh.offset[k] - b.begin + v.numel()));
    }
  }
}

void AdamW::set_moments(size_t k, const Tensor& exp_avg, const Tensor& exp_avg_sq) {
  NM_CHECK(k < m_.size(), "set_moments({}) of {} parameters", k, m_.size());
  if (!shard_ || params_->all()[k]->is_expert()) {
    m_[k].copy_from(exp_avg);
    v_[k].copy_from(exp_avg_sq);
    return;
  }
  const int i = shard_->piece_of[k];
  if (i < 0) return;
  const Shard::Piece& pc = shard_->pieces[static_cast<size_t>(i)];
  m_[k].copy_from(flat(exp_avg).slice(pc.begin, pc.begin + pc.length));
  v_[k].copy_from(flat(exp_avg_sq).slice(pc.begin, pc.begin + pc.length));
}

std::pair<int64_t, int64_t> AdamW::state_range(size_t k) const {
  const model::Param& p = *params_->all()[k];
  if (!p.requires_grad) return {0, 0};
  if (!shard_ || p.is_expert()) return {0, p.value.numel()};  // expert-parallel experts: whole
  const int i = shard_->piece_of[k];
  if (i < 0) return {0, 0};
  const Shard::Piece& pc = shard_->pieces[static_cast<size_t>(i)];
  return {pc.begin, pc.begin + pc.length};
}

Tensor AdamW::master_piece(size_t k) const {
  if (!shards_masters() || shard_->piece_of[k] < 0) return Tensor();
  const Shard::Piece& pc = shard_->pieces[static_cast<size_t>(shard_->piece_of[k])];
  return shard_->master.slice(pc.at, pc.at + pc.length);
}

Tensor AdamW::truth_piece(size_t k) const { return shards_masters() ? master_piece(k) : value_piece(k); }

Tensor AdamW::value_piece(size_t k) const {
  if (!shards_values() || shard_->piece_of[k] < 0) return Tensor();
  const Shard::Piece& pc = shard_->pieces[static_cast<size_t>(shard_->piece_of[k])];
  return shard_->value.slice(pc.at, pc.at + pc.length);
}

int AdamW::shard_count() const { return shard_ ? shard_->group->size() : 1; }

Tensor AdamW::shard_grads() const { return shard_ ? shard_->grad : Tensor(); }

const std::vector<GradBucket>& AdamW::shard_buckets() const {
  static const std::vector<GradBucket> kNone;
  return shard_ ? shard_->buckets : kNone;
}

bool AdamW::shards_masters() const { return shard_ && shard_->master.defined(); }

int64_t AdamW::state_bytes() const {
  int64_t n = shard_ ? (shards_masters() ? 3 : 2) * shard_->size * 4 : 0;
  for (size_t k = 0; k < m_.size(); ++k) {
    if (shard_ && !params_->all()[k]->is_expert()) continue;  // in the shard, counted above
    if (m_[k].defined()) n += static_cast<int64_t>(m_[k].nbytes() + v_[k].nbytes());
    if (params_->all()[k]->master.defined()) n += static_cast<int64_t>(params_->all()[k]->master.nbytes());
  }
  return n;
}

int64_t AdamW::unsharded_state_bytes() const {
  if (!shard_) return state_bytes();
  return (shards_masters() ? 3 : 2) * params_->trainable_numel() * 4;
}

void AdamW::shard_masters() {
  if (!shard_) return;
  Shard& sh = *shard_;
  const auto& all = params_->all();
  size_t with = 0, trainable = 0;
  for (size_t k = 0; k < all.size(); ++k)
    if (sh.offset[k] >= 0) ++trainable, with += all[k]->master.defined() ? 1 : 0;
  if (with == 0) return;
  NM_CHECK(with == trainable, "{} of {} trainable parameters have float32 masters", with, trainable);
  if (!sh.master.defined()) {
    sh.master = Tensor::zeros({sh.size}, DType::f32, params_->backend());
    list_.reset();  // the pieces' truth moves to the master shard
  }
  for (const Shard::Piece& pc : sh.pieces)
    sh.master.slice(pc.at, pc.at + pc.length)
        .copy_from(flat(all[pc.param]->master).slice(pc.begin, pc.begin + pc.length));
  for (size_t k = 0; k < all.size(); ++k)
    if (sh.offset[k] >= 0) all[k]->master = Tensor();
}

void AdamW::unshard_masters() {
  if (!shards_masters()) return;
  Shard& sh = *shard_;
  Tensor every = Tensor::empty({sh.buffer_numel}, DType::f32, params_->backend());
  sh.all_gather(sh.master, every);
  const auto& all = params_->all();
  for (size_t k = 0; k < all.size(); ++k) {
    model::Param* p = all[k];
    const int64_t off = sh.offset[k];
    if (off < 0) continue;
    p->master = Tensor::empty(p->value.shape(), DType::f32, params_->backend());
    flat(p->master).copy_from(every.slice(off, off + p->value.numel()));
  }
}

std::shared_ptr<const FullOptimizerState> AdamW::gather_state(int root) const {
  if (!shard_) return nullptr;
  const Shard& sh = *shard_;
  const auto& all = params_->all();
  const bool here = sh.group->rank() == root;
  auto st = std::make_shared<FullOptimizerState>();
  for (auto* v : {&st->masters, &st->exp_avg, &st->exp_avg_sq}) v->resize(all.size());
  // One flat buffer at a time through the device, kept on the host of `root` only.
  auto collect = [&](const Tensor& part, std::vector<Tensor>& out) {
    Tensor every = Tensor::empty({sh.buffer_numel}, part.dtype(), params_->backend());
    sh.all_gather(part, every);
    if (!here) return;
    const Tensor host = every.to(host_backend());
    for (size_t k = 0; k < all.size(); ++k)
      if (sh.offset[k] >= 0) out[k] = host.slice(sh.offset[k], sh.offset[k] + all[k]->value.numel()).view(all[k]->value.shape());
  };
  if (sh.master.defined()) collect(sh.master, st->masters);
  collect(sh.m, st->exp_avg);
  collect(sh.v, st->exp_avg_sq);
  if (!here) return nullptr;
  for (size_t k = 0; k < all.size(); ++k) {  // the experts this rank holds: whole, no exchange
    const model::Param& p = *all[k];
    if (!p.is_expert() || !p.requires_grad) continue;
    if (p.master.defined()) st->masters[k] = p.master.to(host_backend());
    st->exp_avg[k] = m_[k].to(host_backend());
    st->exp_avg_sq[k] = v_[k].to(host_backend());
  }
  return st;
}

double clip_grad_norm(model::ParamStore& params, double max_norm) {
  std::vector<ops::AdamWParam> ps;
  for (model::Param* p : params.all())
    if (p->requires_grad) ps.push_back({p->value, p->master, p->grad, Tensor(), Tensor(), p->weight_decay});
  ops::AdamWTensors list(std::move(ps));
  Context ctx = store_context(params);
  const double norm = ops::grad_norm(ctx, list);
  if (const double s = clip_factor(norm, max_norm); s != 1.0) ops::scale_grads(ctx, list, s);
  return norm;
}

std::string sharded_state_line(const AdamW& opt, const std::string& key) {
  if (!opt.sharded()) return "";
  const double mib = 1.0 / (1 << 20);
  return fmt::format("distributed optimizer ({}): fp32 {} 1/{} per rank: {:.2f} MiB of {:.2f} MiB{}\n", key,
                     opt.shards_masters() ? "masters + moments" : "moments", opt.shard_count(),
                     static_cast<double>(opt.state_bytes()) * mib, static_cast<double>(opt.unsharded_state_bytes()) * mib,
                     opt.shards_masters() ? "" : " (float32 weights are their own masters, replicated)");
}

}  // namespace nemotron::train
