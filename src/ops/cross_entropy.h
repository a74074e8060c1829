// Softmax cross-entropy over the vocabulary, fused with its gradient (one pass over the logits,
// no probabilities kept). Per row n with target y_n and mask m_n:
//   loss[n]    = m_n * (logsumexp(logits[n]) - logits[n, y_n])
//   dlogits[n] = grad_scale * m_n * (softmax(logits[n]) - onehot(y_n))
// A negative target (e.g. -100, as in transformers) is ignored like m_n = 0. dlogits may alias
// logits (the gradient then overwrites them in place, which saves a [N, V] buffer).
#pragma once
#include "core/context.h"

namespace nemotron::ops {

// logits [N, V] float (T); targets [N] int32/int64; mask [N] in T or float32, or undefined (all
// ones); losses [N] in stat_dtype(T) (float32 for bf16 logits); dlogits [N, V] in T or undefined
// (forward only). On CUDA, labels >= V on the device are found by the kernel and read back once
// per call (which waits for the stream); labels on the host are checked there.
void softmax_cross_entropy(Context& ctx, const Tensor& logits, const Tensor& targets, const Tensor& mask,
                           double grad_scale, Tensor& losses, Tensor* dlogits);

}  // namespace nemotron::ops
