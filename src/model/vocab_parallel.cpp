#include "model/vocab_parallel.h"

#include "ops/cross_entropy.h"
#include "ops/embedding.h"
#include "ops/transpose_blocks.h"
#include "ops/vocab_parallel_cross_entropy.h"
#include "parallel/process_groups.h"

namespace nemotron::model {

namespace {
int64_t vocab_begin(const Param& table) { return table.global_offset()[0]; }
}  // namespace

void embed_tokens(Context& ctx, const Tensor& ids, const Param& table, int64_t vocab_size, Tensor& x, bool partial,
                  bool prechecked) {
  if (!table.tensor_split())
    return prechecked ? ops::embedding_forward_prechecked(ctx, ids, table.value, x)
                      : ops::embedding_forward(ctx, ids, table.value, x);
  ops::embedding_forward_range(ctx, ids, table.value, vocab_begin(table), vocab_size, x, prechecked);
  if (!partial) parallel::groups_of(ctx).tensor->all_reduce(x);
}

void embed_tokens_backward(Context& ctx, const Tensor& ids, const Tensor& dx, Param& table) {
  if (!table.tensor_split()) return ops::embedding_backward_prechecked(ctx, ids, dx, table.grad);
  ops::embedding_backward_range(ctx, ids, dx, vocab_begin(table), table.grad, /*prechecked=*/true);
}

void head_cross_entropy(Context& ctx, const Param& head, int64_t vocab_size, Tensor& logits, const Tensor& targets,
                        const Tensor& mask, double grad_scale, Tensor& losses, bool dlogits) {
  if (!head.tensor_split())
    return ops::softmax_cross_entropy(ctx, logits, targets, mask, grad_scale, losses, dlogits ? &logits : nullptr);
  parallel::Communicator& tp = *parallel::groups_of(ctx).tensor;
  const int64_t n = logits.dim(0);
  const DType st = stat_dtype(logits.dtype());
  Tensor stats = ctx.empty({n, 3}, st), every = ctx.empty({tp.size(), n, 3}, st), lse = ctx.empty({n}, st);
  ops::vocab_shard_stats(ctx, logits, targets, vocab_begin(head), stats, vocab_size);
  tp.all_gather(stats, every);
  ops::vocab_shard_combine(ctx, every, targets, mask, lse, losses);
  if (dlogits) ops::vocab_shard_grad(ctx, logits, targets, mask, lse, vocab_begin(head), grad_scale, logits);
}

Tensor gather_vocab(Context& ctx, const Param& head, const Tensor& logits) {
  if (!head.tensor_split()) return logits;
  parallel::Communicator& tp = *parallel::groups_of(ctx).tensor;
  const int64_t R = logits.dim(0), Vl = logits.dim(1), T = tp.size();
  // All on the device: [T, R, Vl] (rank-major, as the all-gather leaves it) -> [R, T * Vl].
  Tensor every = ctx.empty({T, R, Vl}, logits.dtype());
  tp.all_gather(logits, every);
  Tensor whole = Tensor::empty({R, T * Vl}, logits.dtype(), *ctx.backend);
  ops::transpose_blocks(ctx, every, T, R, whole);
  return whole;
}

}  // namespace nemotron::model
