// Sequence parallelism (Megatron's, with tensor parallelism; model.sequence_parallel): between the
// split mixers, where every tensor rank would hold the same [N, H] activations, each holds only
// its N / TP rows (rank t rows [t N / TP, (t + 1) N / TP) of the flattened B x T rows): norms,
// residual adds and per-token layers run on those. A split mixer's input is all-gathered over the
// tensor group and its partial output reduce-scattered back to rows (in place of the all-reduce),
// and the same in reverse in the backward. A rank's rows are a [1, N / TP, H] tensor; the whole
// call's shape travels in SequenceLayout::rows.
#pragma once
#include "core/context.h"
#include "model/mixer.h"

namespace nemotron::model {

// local [1, N / TP, H] of every tensor rank -> the whole [B, T, H] (`rows` = {B, T}).
Tensor gather_sequence(Context& ctx, const Tensor& local, const Shape& rows);
// partial [B, T, H] (or [N, H]) summed over the tensor group, this rank's rows: [1, N / TP, H].
// `async`: queued by reduce_scatter_async; read the result only after the group's wait_pending().
Tensor scatter_sequence(Context& ctx, const Tensor& partial, bool async = false);
// This rank's rows of a tensor every rank holds whole (no communication): a view.
Tensor local_sequence(Context& ctx, const Tensor& whole);

}  // namespace nemotron::model
