// Token embedding lookup: y[n, :] = W[ids[n], :]. ids are int32 or int64 in [0, V); the op
// checks the range and names the offending position (on CUDA with device ids: a flag the kernel
// sets, read back once per call, which waits for the stream). Backward scatters:
// dW[ids[n]] += dy[n], with dW a parameter gradient in grad_dtype (float32 for bf16 dy).
// Deterministic on both devices: repeated ids add in position order (CUDA sorts the ids).
// The _range forms serve a vocabulary split over tensor-parallel ranks: W holds only the rows
// [vocab_begin, vocab_begin + W.rows) of a vocabulary of vocab_size.
#pragma once
#include "core/context.h"

namespace nemotron::ops {

// ids [N] (any shape, flattened), W [V, D] -> y [N, D] (y may be viewed as [B, T, D]).
void embedding_forward(Context& ctx, const Tensor& ids, const Tensor& w, Tensor& y);
void embedding_backward(Context& ctx, const Tensor& ids, const Tensor& dy, Tensor& dw);
// embedding_forward for ids the caller has already checked on the host: on CUDA nothing is read
// back, so the call never waits for the stream (a decode step captured as a CUDA graph,
// engine/decode_graphs.h). An id outside [0, V) gives a zero row there (the CPU still refuses it).
void embedding_forward_prechecked(Context& ctx, const Tensor& ids, const Tensor& w, Tensor& y);
// embedding_backward for ids already checked (the training forward checked these very ids): on
// CUDA no flag is read back, so the backward does not wait for the stream mid-step. Out-of-range
// ids add nothing there (the CPU still refuses them).
void embedding_backward_prechecked(Context& ctx, const Tensor& ids, const Tensor& dy, Tensor& dw);

// y[n] = W[ids[n] - vocab_begin] when ids[n] is in this range, else 0 (the caller sums y over
// the group). ids are checked against [0, vocab_size) as embedding_forward checks them. Backward
// adds only the in-range rows, dW[ids[n] - vocab_begin] += dy[n], deterministic like
// embedding_backward (its ids are those the forward checked: only negative ones are refused).
// vocab_begin 0 and vocab_size == W.rows give embedding_forward / embedding_backward.
// `prechecked`: the caller checked the ids on the host; on CUDA nothing is read back (as
// embedding_forward_prechecked: a decode step captured as a CUDA graph under tensor parallelism).
void embedding_forward_range(Context& ctx, const Tensor& ids, const Tensor& w, int64_t vocab_begin, int64_t vocab_size,
                             Tensor& y, bool prechecked = false);
void embedding_backward_range(Context& ctx, const Tensor& ids, const Tensor& dy, int64_t vocab_begin, Tensor& dw,
                              bool prechecked = false);

}  // namespace nemotron::ops
