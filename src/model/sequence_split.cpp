#include "model/sequence_split.h"

#include "parallel/process_groups.h"

namespace nemotron::model {

Tensor gather_sequence(Context& ctx, const Tensor& local, const Shape& rows) {
  parallel::Communicator& tp = *parallel::groups_of(ctx).tensor;
  const int64_t H = local.dim(-1);
  NM_CHECK(rows.rank() == 2 && local.numel() * tp.size() == rows.numel() * H,
           "sequence parallel: {} rows of {} ranks for a call of {}", local.shape().str(), tp.size(), rows.str());
  Tensor whole = ctx.empty({rows[0], rows[1], H}, local.dtype());
  tp.all_gather(local, whole);
  return whole;
}

Tensor scatter_sequence(Context& ctx, const Tensor& partial, bool async) {
  parallel::Communicator& tp = *parallel::groups_of(ctx).tensor;
  const int64_t H = partial.dim(-1), N = partial.numel() / H;
  NM_CHECK(N % tp.size() == 0, "sequence parallel: {} rows over {} ranks", N, tp.size());
  Tensor local = ctx.empty({1, N / tp.size(), H}, partial.dtype());
  if (async) tp.reduce_scatter_async(partial, local);
  else tp.reduce_scatter(partial, local);
  return local;
}

Tensor local_sequence(Context& ctx, const Tensor& whole) {
  parallel::Communicator& tp = *parallel::groups_of(ctx).tensor;
  const int64_t H = whole.dim(-1), N = whole.numel() / H, n = N / tp.size();
  NM_CHECK(N % tp.size() == 0, "sequence parallel: {} rows over {} ranks", N, tp.size());
  return whole.view({N, H}).slice(tp.rank() * n, (tp.rank() + 1) * n).view({1, n, H});
}

}  // namespace nemotron::model
