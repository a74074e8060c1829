// Cross-entropy over a vocabulary split over the T ranks of a tensor-parallel group (Megatron's
// vocab-parallel cross-entropy): rank t holds the logits of global columns [vocab_begin,
// vocab_begin + Vl). Three stages around one all-gather of [N, 3] statistics per rank, so no rank
// ever holds the whole [N, V] row:
//   stats (per rank) -> all-gather (the caller) -> combine (every rank) -> grad (per rank).
// Together they equal softmax_cross_entropy (cross_entropy.h) on the concatenated logits.
// Targets are global ids in [0, V); a negative target is ignored (loss and gradient 0). The ops do
// not know V: pass vocab_size to vocab_shard_stats to have targets >= V rejected.
#pragma once
#include "core/context.h"

namespace nemotron::ops {

// logits [N, Vl] float (T); targets [N] int32/int64 in global ids. Per row, this rank's part:
// stats [N, 3] in stat_dtype(T) (float32 for bf16) = {m = max_j l[n,j], s = sum_j exp(l[n,j] - m),
// t = l[n, y_n - vocab_begin] if y_n is in this rank's range else 0}.
// vocab_size > 0: a target >= vocab_size is an InputError naming its position (on CUDA with device
// targets the kernel flags it and one 8-byte read-back waits for the stream); 0: not checked.
void vocab_shard_stats(Context& ctx, const Tensor& logits, const Tensor& targets, int64_t vocab_begin, Tensor& stats,
                       int64_t vocab_size = 0);

// gathered [T, N, 3] every rank's stats, rank-major (the all-gather's output). With M = max_r m_r:
//   lse[n]    = log(sum_r s_r exp(m_r - M)) + M, in the stats dtype, [N] (ignored rows too);
//   losses[n] = mask_n * (lse[n] - sum_r t_r), in the stats dtype, [N]; 0 for ignored targets.
// mask [N] float (the logits dtype or float32), or undefined (all ones).
void vocab_shard_combine(Context& ctx, const Tensor& gathered, const Tensor& targets, const Tensor& mask, Tensor& lse,
                         Tensor& losses);

// dlogits[n, j] = grad_scale * mask_n * (exp(l[n,j] - lse[n]) - [vocab_begin + j == y_n]); 0 for
// ignored rows. dlogits [N, Vl] in the logits dtype, overwritten (=); it may alias logits (in place).
void vocab_shard_grad(Context& ctx, const Tensor& logits, const Tensor& targets, const Tensor& mask, const Tensor& lse,
                      int64_t vocab_begin, double grad_scale, Tensor& dlogits);

}  // namespace nemotron::ops
