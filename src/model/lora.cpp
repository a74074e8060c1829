#include "model/lora.h"

#include <cmath>
#include <memory>
#include <optional>

#include <fmt/ranges.h>

#include "core/error.h"
#include "model/context_split.h"
#include "model/layer_spec.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "ops/transpose_blocks.h"
#include "parallel/process_groups.h"

namespace nemotron::model {

namespace {

Tensor b_rows(const LoraAdapter& lora, int64_t begin, int64_t end) {
  const Tensor& b = lora.b->value;
  return begin == 0 && end == b.dim(0) ? b : b.slice(begin, end);
}

// This adapter's mask in a training micro-batch (none when dropout is 0 or outside training):
// Philox(run seed, stream) with the stream mixing the adapter's name stream with (iteration,
// micro-batch), so every adapter and micro-batch draws its own mask.
std::optional<ops::DropoutMask> dropout_mask(const Context& ctx, const LoraAdapter& lora) {
  if (!(lora.dropout > 0) || !ctx.dropout.active) return std::nullopt;
  const auto mix = [](uint64_t z) {  // splitmix64's finaliser
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  const uint64_t draw = mix(mix(ctx.dropout.iteration) ^ (ctx.dropout.micro + 0x9E3779B97F4A7C15ull));
  return ops::DropoutMask{lora.dropout, ctx.dropout.seed, mix(lora.stream ^ draw)};
}

// out = drop(x) (out += when accumulate) for x [rows, w] with `mask`, the mask of the whole input
// width: a row split's x (columns [in_offset, + w) of in_global) is placed into a zero
// [rows, in_global] tensor, so each element draws the word of its place in one process's x.
// That costs in_global / w times x's memory while the mask is applied, with dropout only.
void apply_mask(Context& ctx, const LoraAdapter& lora, const ops::DropoutMask& mask, const Tensor& x, Tensor& out,
                bool accumulate) {
  const int64_t rows = x.dim(0), w = x.dim(1);
  if (lora.in_global == 0 || lora.in_global == w) return ops::dropout_apply(ctx, x, mask, out, accumulate);
  NM_CHECK(lora.in_global % w == 0 && lora.in_offset % w == 0, "lora: columns [{}, +{}) of {}", lora.in_offset, w,
           lora.in_global);
  const int64_t parts = lora.in_global / w, part = lora.in_offset / w;
  Tensor blocks = ctx.zeros(Shape({parts, rows, w}), x.dtype());  // [parts, rows, w] -> [rows, parts * w]
  blocks.select(part).copy_from(x);
  Tensor wide = ctx.empty(Shape({rows, lora.in_global}), x.dtype());
  ops::transpose_blocks(ctx, blocks, parts, rows, wide);
  ops::dropout_apply(ctx, wide, mask, wide);  // elementwise: in place
  ops::transpose_blocks(ctx, wide, rows, parts, blocks);
  const Tensor mine = blocks.select(part);
  if (accumulate) {
    ops::add_inplace(ctx, out, mine);
  } else {
    out.copy_from(mine);
  }
}

// apply_mask for rows that may hold only this context rank's chunks of each row
// (ctx.dropout.context_sequences = B > 0; model/context_split.h): x's B x 2L rows are placed at
// their rows of the whole B x 2CL, zero elsewhere, so each token draws the words of its place in
// one process's input. That costs C times x's memory while the mask is applied, with dropout only.
void apply_mask_in_rows(Context& ctx, const LoraAdapter& lora, const ops::DropoutMask& mask, const Tensor& x,
                        Tensor& out, bool accumulate) {
  const int64_t B = ctx.dropout.context_sequences;
  if (B == 0 || parallel::groups_of(ctx).context->size() == 1) return apply_mask(ctx, lora, mask, x, out, accumulate);
  const int64_t rows = x.dim(0), w = x.dim(1);
  NM_CHECK(rows % B == 0, "lora: {} rows are not {} context-split sequences", rows, B);
  Tensor whole = pad_context_rows(ctx, x.view({B, rows / B, w}));
  Tensor flat = whole.view({whole.numel() / w, w});
  apply_mask(ctx, lora, mask, flat, flat, false);  // elementwise: in place
  const Tensor mine = local_context_rows(ctx, whole).view({rows, w});
  if (accumulate) {
    ops::add_inplace(ctx, out, mine);
  } else {
    out.copy_from(mine);
  }
}

const std::string kSuffixA = ".lora_A.weight", kSuffixB = ".lora_B.weight";

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// True when `weight` (a Hub name) is `<...>.mixer.<module>.weight` or, for the MLP modules,
// `<...>.mixer.shared_experts.<module>.weight` (never a routed expert's `experts.<e>.<module>`).
bool covers(const std::string& weight, const std::string& module, bool mlp) {
  if (ends_with(weight, ".mixer." + module + ".weight")) return true;
  return mlp && ends_with(weight, ".mixer.shared_experts." + module + ".weight");
}

// Gives the adapter's factors `w`'s tensor-parallel split (see attach_lora): B's rows follow a
// column split of W (row blocks included: Mamba's in_proj), A's columns a row split.
void split_like(const Param& w, LoraAdapter& lora) {
  Param &a = *lora.a, &b = *lora.b;
  a.shard.replicas = b.shard.replicas = w.shard.replicas;
  if (!w.tensor_split()) {
    a.shard.grad_partial_over_tensor = b.shard.grad_partial_over_tensor = w.shard.grad_partial_over_tensor;
    return;
  }
  const Shape g = w.global_shape();
  const std::vector<int64_t> offset = w.global_offset();
  const int64_t r = lora.rank;
  if (g[0] != w.value.dim(0)) {  // column: dh = dy B is this rank's part, so dA is partial
    NM_CHECK(g[1] == w.value.dim(1), "lora: {} is split on both dims", w.name);
    b.shard.global_shape = Shape({g[0], r});
    b.shard.row_blocks = w.shard.row_blocks;
    if (w.shard.row_blocks.empty()) b.shard.offset = {offset[0], 0};
    a.shard.grad_partial_over_tensor = true;
  } else {  // row: h = drop(x) A^T is partial, so dB = dy^T h is
    a.shard.global_shape = Shape({r, g[1]});
    a.shard.offset = {0, offset[1]};
    b.shard.grad_partial_over_tensor = true;
    lora.in_offset = offset[1];
    lora.in_global = g[1];
  }
}

}  // namespace

Tensor lora_down(Context& ctx, const LoraAdapter& lora, const Tensor& x2) {
  Tensor h = ctx.empty(Shape({x2.dim(0), lora.rank}), x2.dtype());
  const Tensor* in = &x2;
  Tensor dropped;
  if (const auto mask = dropout_mask(ctx, lora)) {
    dropped = ctx.empty(x2.shape(), x2.dtype());  // only while h is computed
    apply_mask_in_rows(ctx, lora, *mask, x2, dropped, false);
    in = &dropped;
  }
  ops::matmul(ctx, *in, false, lora.a->value, true, h, lora.scale, 0.0);
  return h;
}

void lora_up(Context& ctx, const LoraAdapter& lora, const Tensor& h, int64_t begin, int64_t end, Tensor& y2) {
  ops::matmul(ctx, h, false, b_rows(lora, begin, end), true, y2, 1.0, 1.0);
}

void lora_up_backward(Context& ctx, const LoraAdapter& lora, const Tensor& h, int64_t begin, int64_t end,
                      const Tensor& dy2, Tensor& dh, bool accumulate) {
  if (lora.b->requires_grad) {
    const bool all = begin == 0 && end == lora.b->value.dim(0);
    Tensor db = all ? lora.b->grad : lora.b->grad.slice(begin, end);
    ops::matmul(ctx, dy2, true, h, false, db, 1.0, 1.0);
  }
  ops::matmul(ctx, dy2, false, b_rows(lora, begin, end), false, dh, 1.0, accumulate ? 1.0 : 0.0);
}

void lora_down_backward(Context& ctx, const LoraAdapter& lora, const Tensor& x2, const Tensor& dh, Tensor* dx2) {
  const auto mask = dropout_mask(ctx, lora);
  if (lora.a->requires_grad) {
    if (mask) {
      Tensor dropped = ctx.empty(x2.shape(), x2.dtype());
      apply_mask_in_rows(ctx, lora, *mask, x2, dropped, false);
      ops::matmul(ctx, dh, true, dropped, false, lora.a->grad, lora.scale, 1.0);
    } else {
      ops::matmul(ctx, dh, true, x2, false, lora.a->grad, lora.scale, 1.0);
    }
  }
  if (!dx2) return;
  if (mask) {  // d drop(x) / dx is the mask again: dx += drop(scale * dh A)
    Tensor t = ctx.empty(dx2->shape(), dx2->dtype());
    ops::matmul(ctx, dh, false, lora.a->value, false, t, lora.scale, 0.0);
    apply_mask_in_rows(ctx, lora, *mask, t, *dx2, /*accumulate=*/true);
  } else {
    ops::matmul(ctx, dh, false, lora.a->value, false, *dx2, lora.scale, 1.0);
  }
}

const std::vector<std::string>& lora_target_names() {
  static const std::vector<std::string> names = {"linear_qkv", "linear_proj", "linear_fc1",
                                                 "linear_fc2", "in_proj",     "out_proj"};
  return names;
}

std::vector<std::string> lora_hf_modules(const std::string& target) {
  if (target == "linear_qkv") return {"q_proj", "k_proj", "v_proj"};
  if (target == "linear_proj") return {"o_proj"};
  if (target == "linear_fc1") return {"gate_proj", "up_proj"};
  if (target == "linear_fc2") return {"down_proj"};
  if (target == "in_proj" || target == "out_proj") return {target};
  return {};
}

bool is_lora_param(const std::string& name) { return ends_with(name, kSuffixA) || ends_with(name, kSuffixB); }

bool has_lora(const ParamStore& store) {
  for (const Param* p : store.all())
    if (is_lora(*p)) return true;
  return false;
}

std::vector<std::string> attach_lora(ParamStore& store, const LoraConfig& cfg, uint64_t seed,
                                     const std::string& source) {
  NM_CHECK(cfg.dim > 0, "lora: dim {}", cfg.dim);
  NM_CHECK(cfg.dropout >= 0 && cfg.dropout < 1, "lora: dropout {}", cfg.dropout);
  const std::vector<Param*> base = store.all();  // adding adapters grows the store's list
  std::vector<bool> wrap(base.size(), false);
  for (const std::string& target : cfg.target_modules) {
    if (target == "experts" || target == "linear_fc1_experts" || target == "linear_fc2_experts")
      throw InputError(fmt::format("{}: peft.target_modules: {}: the routed experts run as one grouped GEMM that takes "
                                   "no adapter; target linear_fc1/linear_fc2 (the dense MLP and the shared expert)",
                                   source, target));
    const std::vector<std::string> modules = lora_hf_modules(target);
    if (modules.empty())
      throw InputError(fmt::format("{}: peft.target_modules: unknown module {} (expected some of {})", source, target,
                                   fmt::join(lora_target_names(), ", ")));
    const bool mlp = target == "linear_fc1" || target == "linear_fc2";
    bool found = false;
    for (size_t i = 0; i < base.size(); ++i)
      for (const std::string& m : modules)
        if (base[i]->value.rank() == 2 && covers(base[i]->name, m, mlp)) wrap[i] = found = true;
    if (!found)
      throw InputError(fmt::format("{}: peft.target_modules: {} names no module of this model (no {} layer)", source,
                                   target, fmt::join(modules, "/")));
  }
  std::vector<std::string> attached;
  for (size_t i = 0; i < base.size(); ++i) {
    Param& w = *base[i];
    store.set_requires_grad(w, false);
    if (!wrap[i]) continue;
    const std::string module = w.name.substr(0, w.name.size() - std::string(".weight").size());
    auto lora = std::make_shared<LoraAdapter>();
    lora->a = &store.add(module + kSuffixA, {cfg.dim, w.value.dim(1)});
    lora->b = &store.add(module + kSuffixB, {w.value.dim(0), cfg.dim});
    lora->a->trunk_layer = lora->b->trunk_layer = w.trunk_layer;  // the layer whose backward completes them
    lora->rank = cfg.dim;
    lora->scale = cfg.scale();
    lora->dropout = cfg.dropout;
    lora->stream = name_stream(lora->a->name);
    split_like(w, *lora);
    const double bound = 1.0 / std::sqrt(static_cast<double>(w.global_shape()[1]));  // kaiming_uniform(a=sqrt(5)), as PEFT
    init_uniform(*lora->a, seed, -bound, bound);
    init_constant(*lora->b, 0.0);
    w.lora = std::move(lora);
    attached.push_back(w.name);
  }
  return attached;
}

int64_t lora_param_count(const ModelConfig& cfg_all, const LoraConfig& cfg, int64_t tensor_size) {
  const int64_t H = cfg_all.hidden_size, r = cfg.dim, T = tensor_size;
  NM_CHECK(T >= 1, "lora_param_count: tensor size {}", T);
  const auto wants = [&](const char* t) {
    for (const std::string& x : cfg.target_modules)
      if (x == t) return true;
    return false;
  };
  const auto pair = [&](int64_t in, int64_t out) { return r * (in + out); };  // A [r, in] + B [out, r]
  const auto column = [&](int64_t in, int64_t out) { return pair(in, out / T); };  // B split by rows
  const auto row = [&](int64_t in, int64_t out) { return pair(in / T, out); };     // A split by columns
  int64_t n = 0;
  for (const LayerSpec& spec : layer_specs(cfg_all)) {
    const ModelConfig m = sized_for(cfg_all, spec);  // this layer's KV heads and FFN width
    switch (spec.kind) {
      case LayerKind::mamba: {
        const int64_t d = m.mamba_num_heads * m.mamba_head_dim, gn = m.n_groups * m.ssm_state_size;
        if (wants("in_proj")) n += column(H, 2 * d + 2 * gn + m.mamba_num_heads);
        if (wants("out_proj")) n += row(d, H);
        break;
      }
      case LayerKind::attention: {
        const int64_t hd = m.attn_head_dim(), q = m.num_attention_heads * hd, kv = m.num_key_value_heads * hd;
        // k/v stay whole when the KV groups are fewer than the tensor ranks (attention_mixer.cpp).
        const bool shared_kv = m.num_key_value_heads % T != 0;
        if (wants("linear_qkv")) n += column(H, q) + 2 * (shared_kv ? pair(H, kv) : column(H, kv));
        if (wants("linear_proj")) n += row(q, H);
        break;
      }
      case LayerKind::mlp: {
        const int64_t F = m.intermediate_size;
        if (wants("linear_fc1")) n += (m.gated_mlp() ? 2 : 1) * column(H, F);
        if (wants("linear_fc2")) n += row(F, H);
        break;
      }
      case LayerKind::moe: {
        const int64_t F = m.moe_shared_expert_intermediate_size * m.n_shared_experts;
        if (F <= 0) break;
        if (wants("linear_fc1")) n += column(H, F);
        if (wants("linear_fc2")) n += row(F, H);
        break;
      }
      case LayerKind::linear: break;  // DeciLM linear replacements take no adapters
    }
  }
  return n;
}

void merge_lora(ParamStore& store) {
  for (Param* w : store.all()) {
    if (!w->lora) continue;
    const LoraAdapter& l = *w->lora;
    const int64_t out = w->value.dim(0), in = w->value.dim(1), r = l.rank;
    Tensor wt = w->truth().to_host(DType::f64);
    const Tensor a = l.a->truth().to_host(DType::f64), b = l.b->truth().to_host(DType::f64);
    double* W = wt.data<double>();
    const double *A = a.data<double>(), *B = b.data<double>();
    for (int64_t o = 0; o < out; ++o)
      for (int64_t k = 0; k < r; ++k) {
        const double s = l.scale * B[o * r + k];
        for (int64_t i = 0; i < in; ++i) W[o * in + i] += s * A[k * in + i];
      }
    w->truth().copy_from(wt.to_host(w->truth().dtype()));
    w->refresh_value();
    w->lora.reset();
  }
}

}  // namespace nemotron::model
