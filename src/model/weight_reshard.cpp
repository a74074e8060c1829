#include "model/weight_reshard.h"

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

}  // namespace

int64_t reshard_values(Context& ctx, const ParamStore& from, parallel::Communicator& from_tensor, ParamStore& to) {
  NM_CHECK(from.all().size() == to.all().size(), "reshard: {} parameters into {}", from.all().size(),
           to.all().size());
  int64_t gathered_bytes = 0;
  for (const Param* src : from.all()) {  // the same order on every member: the collectives pair up
    Param& dst = to.get(src->name);
    NM_CHECK(src->global_shape() == dst.global_shape() && src->value.dtype() == dst.value.dtype(),
             "reshard {}: {} {} into {} {}", src->name, dtype_name(src->value.dtype()), src->global_shape().str(),
             dtype_name(dst.value.dtype()), dst.global_shape().str());
    NM_CHECK(!src->is_expert(), "reshard {}: experts split over an expert group are not resharded", src->name);
    const Tensor whole = gather_whole(ctx, *src, from_tensor, gathered_bytes);
    cut_part(ctx, whole, dst);
  }
  return gathered_bytes;
}

}  // namespace nemotron::model
