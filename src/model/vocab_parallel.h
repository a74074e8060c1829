// The vocabulary under tensor parallelism (Megatron's VocabParallelEmbedding and vocab-parallel
// cross-entropy): the embedding table and the LM head split by vocabulary rows over the tensor
// group (model/tensor_split.h), rank t holding ids [t V / T, (t + 1) V / T). Each helper takes a
// table that may or may not be split; with a whole table it is the plain op (today's path).
#pragma once
#include "core/context.h"
#include "model/param.h"

namespace nemotron::model {

// x [N, H] (any shape of N rows) = table[ids]: each rank looks up the ids in its rows (zeros for
// the others) and the sum over the tensor group is the whole lookup. ids in [0, vocab_size).
// `partial`: leave x as this rank's part of the sum (the caller reduce-scatters it: sequence
// parallelism). `prechecked`: the ids were checked on the host, nothing is read back on CUDA.
void embed_tokens(Context& ctx, const Tensor& ids, const Param& table, int64_t vocab_size, Tensor& x,
                  bool partial = false, bool prechecked = false);
// table.grad[ids] += dx for the ids in this rank's rows (dx whole on every rank). The ids are the
// ones embed_tokens took in the forward, which checked them: nothing is read back on CUDA (the
// backward does not wait for the stream).
void embed_tokens_backward(Context& ctx, const Tensor& ids, const Tensor& dx, Param& table);

// Per row: loss = mask (logsumexp(logits) - logits[target]) over the whole vocabulary, from this
// rank's logits [n, Vl] of a split head (one all-gather of three numbers per row); with dlogits,
// the gradient of grad_scale * sum(loss) in place of the logits (ops/cross_entropy.h's contract).
void head_cross_entropy(Context& ctx, const Param& head, int64_t vocab_size, Tensor& logits, const Tensor& targets,
                        const Tensor& mask, double grad_scale, Tensor& losses, bool dlogits);

// The whole vocabulary's logits [R, V] from this rank's [R, Vl] of a split head (every rank gets
// them): scoring and inference paths, not the training step. One all-gather and a block
// transpose on the logits' device (no host copy); the result is a fresh tensor (not the
// workspace), since callers keep it past the step.
Tensor gather_vocab(Context& ctx, const Param& head, const Tensor& logits);

}  // namespace nemotron::model
