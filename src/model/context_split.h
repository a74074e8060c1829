// Context parallelism (model.context_parallel_size = C; Megatron's load-balanced causal split):
// every row of T tokens is cut into 2C chunks of L = T / 2C, and context rank r holds chunks r and
// 2C-1-r back to back (local rows [B, 2L], chunk r first), so each rank gets the same share of
// causal attention work. Per-token layers (norms, MLP, MoE, the head) run on these rows as they
// are; attention and Mamba exchange over ctx's context group (attention_mixer.cpp,
// mamba_context.h). A batch split this way says so in its SequenceLayout (context_split); rows that
// are whole (inference, a run without CP) never touch the group.
// Tensors here are [B, rows, ...] with any trailing dims, the rows of each b contiguous.
#pragma once
#include <utility>

#include "core/context.h"

namespace nemotron::model {

struct ContextChunks {
  int size = 1, rank = 0;  // C and this rank
  int64_t L = 0;           // tokens per chunk
  // The global chunk index of local chunk j (0 or 1).
  int64_t chunk(int j) const { return chunk_of(rank, j); }
  int64_t chunk_of(int r, int j) const { return j == 0 ? r : 2 * size - 1 - r; }
  // {rank, local index} of global chunk g.
  std::pair<int, int> owner(int64_t g) const {
    return g < size ? std::pair<int, int>{static_cast<int>(g), 0} : std::pair<int, int>{static_cast<int>(2 * size - 1 - g), 1};
  }
};

// The chunks of ctx's context group for local rows of `local_rows` tokens (two chunks).
ContextChunks context_chunks(const Context& ctx, int64_t local_rows);

// dst[b, d0 : d0 + n] = src[b, s0 : s0 + n] for every b (same B, dtype and trailing size).
void copy_row_block(Tensor& dst, int64_t d0, const Tensor& src, int64_t s0, int64_t n);

// src[b, s0 : s0 + n] for every b as a new [B, n, ...] tensor (a view when that is contiguous: B = 1
// or the whole rows).
Tensor row_block(Context& ctx, const Tensor& src, int64_t s0, int64_t n);
// dst[b, d0 : d0 + n] += src[b, s0 : s0 + n] for every b.
void add_row_block(Context& ctx, Tensor& dst, int64_t d0, const Tensor& src, int64_t s0, int64_t n);

// local [B, 2L, ...] of every context rank -> the whole [B, 2CL, ...] in sequence order.
Tensor gather_context(Context& ctx, const Tensor& local);
// whole [B, 2CL, ...] summed over the context group -> this rank's rows [B, 2L, ...]: the adjoint
// of gather_context.
Tensor reduce_scatter_context(Context& ctx, const Tensor& whole);
// This rank's rows of a whole [B, 2CL, ...] (a copy; no communication).
Tensor local_context_rows(Context& ctx, const Tensor& whole);
// local [B, 2L, ...] placed at its rows of a whole [B, 2CL, ...] that is zero elsewhere: the
// adjoint of local_context_rows.
Tensor pad_context_rows(Context& ctx, const Tensor& local);

}  // namespace nemotron::model
