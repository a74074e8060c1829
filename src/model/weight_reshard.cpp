#include "model/weight_reshard.h"

#include <set>

#include "core/error.h"
#include "ops/transpose_blocks.h"

namespace nemotron::model {

namespace {

// The dim a parameter's value is cut along (-1: whole). A fused tensor split block by block
// (row_blocks) is cut along its rows; otherwise the one dim where the value is smaller than the
// whole tensor (tensor_split.h cuts one dim).
int split_dim(const Param& p) {
  if (!p.tensor_split()) return -1;
  if (!p.shard.row_blocks.empty()) return 0;
  const Shape g = p.global_shape(), l = p.value.shape();
  int dim = -1;
  for (int d = 0; d < g.rank(); ++d)
    if (g[d] != l[d]) {
      NM_CHECK(dim < 0, "{}: {} is cut along more than one dim of {}", p.name, l.str(), g.str());
      dim = d;
    }
  return dim;
}

// Elements of dims [from, rank) of s.
int64_t numel_from(const Shape& s, int from) {
  int64_t n = 1;
  for (int d = from; d < s.rank(); ++d) n *= s[d];
  return n;
}

// t viewed as [t.dim(0), everything else], so row boxes are leading-dim slices.
Tensor rows_of(const Tensor& t) { return t.view(Shape({t.dim(0), numel_from(t.shape(), 1)})); }

// The whole tensor of p, from every member's part (its own at p's shard, rank r's at the same
// boxes moved by r - rank() box extents along the split dim: tensor_split.h gives member r block r
// of each cut).
Tensor gather_whole(Context& ctx, const Param& p, parallel::Communicator& group, int64_t& gathered_bytes) {
  const int dim = split_dim(p);
  if (dim < 0) return p.value;
  const int R = group.size(), me = group.rank();
  const Shape global = p.global_shape();
  const Tensor& local = p.value;
  Tensor all = Tensor::empty(Shape({R * local.numel()}), local.dtype(), local.backend());
  group.all_gather(local.view(Shape({local.numel()})), all);
  gathered_bytes += static_cast<int64_t>(all.nbytes());
  Tensor whole = Tensor::empty(global, local.dtype(), local.backend());
  if (dim == 0) {
    Tensor dst = rows_of(whole);
    for (int r = 0; r < R; ++r) {
      const Tensor part = rows_of(all.slice(r * local.numel(), (r + 1) * local.numel()).view(local.shape()));
      for (const ParamBox& b : p.boxes()) {
        const int64_t rows = b.box[0], at = b.offset[0] + (r - me) * rows;
        dst.slice(at, at + rows).copy_from(part.slice(b.local_row, b.local_row + rows));
      }
    }
    return whole;
  }
  // Cut along dim >= 1: `all` is [R, outer, inner] (member-major), the whole [outer, R, inner].
  NM_CHECK(p.global_offset()[dim] == me * local.dim(dim), "{}: member {} does not hold block {}", p.name, me, me);
  ops::transpose_blocks(ctx, all, R, numel_from(global, 0) / numel_from(global, dim), whole);
  return whole;
}

// p's part of `whole` (its global tensor) into p's value.
void cut_part(Context& ctx, const Tensor& whole, Param& p) {
  const int dim = split_dim(p);
  if (dim < 0) {
    p.value.copy_from(whole);
    return;
  }
  const Shape global = p.global_shape();
  if (dim == 0) {
    Tensor dst = rows_of(p.value);
    const Tensor src = rows_of(whole);
    for (const ParamBox& b : p.boxes())
      dst.slice(b.local_row, b.local_row + b.box[0]).copy_from(src.slice(b.offset[0], b.offset[0] + b.box[0]));
    return;
  }
  // The whole [outer, R, inner] -> [R, outer, inner]: block `mine` is then contiguous.
  const int64_t R = global[dim] / p.value.dim(dim), mine = p.global_offset()[dim] / p.value.dim(dim);
  Tensor blocks = Tensor::empty(Shape({R, p.value.numel()}), whole.dtype(), whole.backend());
  ops::transpose_blocks(ctx, whole, numel_from(global, 0) / numel_from(global, dim), R, blocks);
  p.value.copy_from(blocks.select(mine).view(p.value.shape()));
}

// Where a routed expert's index sits in its name ("backbone.layers.3.mixer.experts.5.up_proj.weight":
// 5; the shared experts' "shared_experts." never matches).
struct ExpertIndex {
  size_t at = 0, len = 0;
  int64_t index = 0;
};
ExpertIndex expert_index(const std::string& name) {
  static const std::string kExperts = ".experts.";
  const size_t k = name.rfind(kExperts);
  NM_CHECK(k != std::string::npos, "reshard {}: a routed expert's parameter without \"{}\" in its name", name, kExperts);
  ExpertIndex e;
  e.at = k + kExperts.size();
  while (e.at + e.len < name.size() && name[e.at + e.len] >= '0' && name[e.at + e.len] <= '9') ++e.len;
  NM_CHECK(e.len > 0, "reshard {}: no expert index after \"{}\"", name, kExperts);
  e.index = std::stoll(name.substr(e.at, e.len));
  return e;
}

// p (a routed expert's parameter) as every member of `group` holds it: member r holds expert
// block r (routed_experts / size experts, model_shard.h), so its parameter in p's place is the
// same slot of its own block. One all-gather; each copy named for its expert, with p's tensor
// shard (the members share their tensor coordinate).
std::vector<Param> expert_copies(const Param& p, parallel::Communicator& group, int64_t routed_experts,
                                 int64_t& gathered_bytes) {
  const int R = group.size(), me = group.rank();
  NM_CHECK(routed_experts > 0 && routed_experts % R == 0, "reshard {}: {} routed experts over an expert group of {}",
           p.name, routed_experts, R);
  const int64_t per = routed_experts / R, n = p.value.numel();
  const ExpertIndex e = expert_index(p.name);
  NM_CHECK(e.index / per == me, "reshard {}: expert {} is not in member {}'s block", p.name, e.index, me);
  Tensor all = Tensor::empty(Shape({R * n}), p.value.dtype(), p.value.backend());
  group.all_gather(p.value.view(Shape({n})), all);
  gathered_bytes += static_cast<int64_t>(all.nbytes());
  std::vector<Param> copies(static_cast<size_t>(R), p);
  for (int r = 0; r < R; ++r) {
    Param& c = copies[static_cast<size_t>(r)];
    c.name = p.name.substr(0, e.at) + std::to_string(r * per + e.index % per) + p.name.substr(e.at + e.len);
    c.value = all.slice(r * n, (r + 1) * n).view(p.value.shape());
  }
  return copies;
}

}  // namespace

int64_t reshard_values(Context& ctx, const ReshardSource& from, ParamStore& to) {
  parallel::Communicator* expert = from.expert && from.expert->size() > 1 ? from.expert : nullptr;
  int64_t gathered_bytes = 0;
  std::set<std::string> filled;
  // Every member gathers every source part in the same order (the collectives pair up) and keeps
  // the parts its target holds.
  auto place = [&](const Param& src) {
    Param* dst = to.find(src.name) ? &to.get(src.name) : nullptr;
    if (dst)
      NM_CHECK(src.global_shape() == dst->global_shape() && src.value.dtype() == dst->value.dtype(),
               "reshard {}: {} {} into {} {}", src.name, dtype_name(src.value.dtype()), src.global_shape().str(),
               dtype_name(dst->value.dtype()), dst->global_shape().str());
    const Tensor whole = gather_whole(ctx, src, from.tensor, gathered_bytes);
    if (!dst) return;
    cut_part(ctx, whole, *dst);
    NM_CHECK(filled.insert(src.name).second, "reshard {}: filled twice", src.name);
  };
  for (const Param* src : from.params.all()) {
    if (expert && src->is_expert())
      for (const Param& copy : expert_copies(*src, *expert, from.routed_experts, gathered_bytes)) place(copy);
    else
      place(*src);
  }
  if (filled.size() != to.all().size())
    for (const Param* p : to.all())
      NM_CHECK(filled.count(p->name), "reshard {}: the source holds no part of it ({} of the target's {} parameters "
               "filled; experts held elsewhere need the source's expert group)", p->name, filled.size(), to.all().size());
  return gathered_bytes;
}

}  // namespace nemotron::model
