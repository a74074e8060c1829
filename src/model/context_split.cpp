#include "model/context_split.h"

#include <vector>

#include "ops/elementwise.h"
#include "parallel/process_groups.h"

namespace nemotron::model {

namespace {

int64_t trailing(const Tensor& t) { return t.numel() / (t.dim(0) * t.dim(1)); }

// `like`'s shape with dim 1 = rows.
Shape with_rows(const Tensor& like, int64_t rows) {
  std::vector<int64_t> d = like.shape().dims();
  d[1] = rows;
  return Shape(d);
}

}  // namespace

ContextChunks context_chunks(const Context& ctx, int64_t local_rows) {
  const parallel::Communicator& cp = *parallel::groups_of(ctx).context;
  NM_CHECK(local_rows % 2 == 0, "context parallel: {} local rows are not two chunks", local_rows);
  return {cp.size(), cp.rank(), local_rows / 2};
}

void copy_row_block(Tensor& dst, int64_t d0, const Tensor& src, int64_t s0, int64_t n) {
  const int64_t B = dst.dim(0), Td = dst.dim(1), Ts = src.dim(1), R = trailing(dst);
  NM_CHECK(src.dim(0) == B && trailing(src) == R && src.dtype() == dst.dtype() && d0 + n <= Td && s0 + n <= Ts,
           "row block of {} rows from {} at {} into {} at {}", n, src.describe(), s0, dst.describe(), d0);
  Tensor d = dst.view({B * Td, R});
  const Tensor s = src.view({B * Ts, R});
  for (int64_t b = 0; b < B; ++b) d.slice(b * Td + d0, b * Td + d0 + n).copy_from(s.slice(b * Ts + s0, b * Ts + s0 + n));
}

Tensor row_block(Context& ctx, const Tensor& src, int64_t s0, int64_t n) {
  const int64_t B = src.dim(0), T = src.dim(1), R = trailing(src);
  if (s0 == 0 && n == T) return src;
  if (B == 1) return src.view({T, R}).slice(s0, s0 + n).view(with_rows(src, n));
  Tensor out = ctx.empty(with_rows(src, n), src.dtype());
  copy_row_block(out, 0, src, s0, n);
  return out;
}

void add_row_block(Context& ctx, Tensor& dst, int64_t d0, const Tensor& src, int64_t s0, int64_t n) {
  const int64_t B = dst.dim(0), Td = dst.dim(1), Ts = src.dim(1), R = trailing(dst);
  Tensor d = dst.view({B * Td, R});
  const Tensor s = src.view({B * Ts, R});
  for (int64_t b = 0; b < B; ++b) {
    Tensor rows = d.slice(b * Td + d0, b * Td + d0 + n);
    ops::add_inplace(ctx, rows, s.slice(b * Ts + s0, b * Ts + s0 + n));
  }
}

Tensor gather_context(Context& ctx, const Tensor& local) {
  parallel::Communicator& cp = *parallel::groups_of(ctx).context;
  const ContextChunks c = context_chunks(ctx, local.dim(1));
  std::vector<int64_t> d = local.shape().dims();
  d.insert(d.begin(), c.size);
  Tensor all = ctx.empty(Shape(d), local.dtype());  // [C, B, 2L, ...], rank order
  cp.all_gather(local, all);
  Tensor whole = ctx.empty(with_rows(local, 2 * c.size * c.L), local.dtype());
  for (int q = 0; q < c.size; ++q)
    for (int j = 0; j < 2; ++j) copy_row_block(whole, c.chunk_of(q, j) * c.L, all.select(q), j * c.L, c.L);
  return whole;
}

Tensor reduce_scatter_context(Context& ctx, const Tensor& whole) {
  parallel::Communicator& cp = *parallel::groups_of(ctx).context;
  NM_CHECK(whole.dim(1) % (2 * cp.size()) == 0, "context parallel: {} rows over {} ranks", whole.dim(1), cp.size());
  const ContextChunks c = context_chunks(ctx, whole.dim(1) / cp.size());
  std::vector<int64_t> d = with_rows(whole, 2 * c.L).dims();
  d.insert(d.begin(), c.size);
  Tensor arranged = ctx.empty(Shape(d), whole.dtype());  // [C, B, 2L, ...], rank order
  for (int q = 0; q < c.size; ++q) {
    Tensor part = arranged.select(q);
    for (int j = 0; j < 2; ++j) copy_row_block(part, j * c.L, whole, c.chunk_of(q, j) * c.L, c.L);
  }
  Tensor local = ctx.empty(with_rows(whole, 2 * c.L), whole.dtype());
  cp.reduce_scatter(arranged, local);
  return local;
}

Tensor local_context_rows(Context& ctx, const Tensor& whole) {
  const int C = parallel::groups_of(ctx).context->size();
  const ContextChunks c = context_chunks(ctx, whole.dim(1) / C);
  Tensor local = ctx.empty(with_rows(whole, 2 * c.L), whole.dtype());
  for (int j = 0; j < 2; ++j) copy_row_block(local, j * c.L, whole, c.chunk(j) * c.L, c.L);
  return local;
}

Tensor pad_context_rows(Context& ctx, const Tensor& local) {
  const ContextChunks c = context_chunks(ctx, local.dim(1));
  Tensor whole = ctx.zeros(with_rows(local, 2 * c.size * c.L), local.dtype());
  for (int j = 0; j < 2; ++j) copy_row_block(whole, c.chunk(j) * c.L, local, j * c.L, c.L);
  return whole;
}

}  // namespace nemotron::model
