// The incoming SSM states of context parallelism's chunks (model/mamba_context.h): the scan is
// affine in its initial state, S_out = F + D S_in, with F the chunk's final state from a zero state
// and D a scalar per (row, head): D = exp(A_h sum_t dt_t) over the chunk (ops/ssd_scan.h), 0 when a
// sequence starts inside the chunk (the state is dropped there). These ops compose the chunks'
// states in sequence order from tensors gathered over the context group, on the device.
//
// Layout: the load-balanced split of model/context_split.h. Of C context ranks, rank q holds
// chunks q and 2C-1-q of each of the B rows as its local rows 2b and 2b+1; every tensor below is
// gathered in rank order, [C, 2B, ...]. S = nH P N state elements per row, head-major (element i
// belongs to head i / (S / nH)). seq [C, 2B, L] int32 (each chunk's packed-sequence ids, L tokens)
// or undefined (one sequence per row): chunk g continues chunk g-1's sequence iff
// seq(g-1)[L-1] == seq(g)[0] (never for g = 0), and D_g counts only if seq(g)[0] == seq(g)[L-1].
// Dtypes: one float dtype for dt, A, decay, states and gradients (stat_dtype of the compute dtype:
// float32 under bf16). CUDA runs one thread per (row, state element), the chunks in order.
#pragma once
#include "core/context.h"

namespace nemotron::ops {

// dt [R, L, nH], A [nH] -> decay [R, nH] = exp(A_h sum_t dt[r, t, h]) (overwritten).
void chunk_decay(Context& ctx, const Tensor& dt, const Tensor& A, Tensor& decay);

// Forward composition: S_0 = 0, S_{g+1} = link_{g+1} (F_g + D_g S_g) over the 2C chunks; writes this
// rank's chunks' incoming states into `incoming` [2B, nH, P, N] (overwritten).
// F [C, 2B, nH, P, N], decay [C, 2B, nH], seq [C, 2B, L] or undefined.
void context_states_forward(Context& ctx, const Tensor& F, const Tensor& decay, const Tensor& seq, int rank,
                            Tensor& incoming);

// Its adjoint: from each chunk's state gradient d0 [C, 2B, nH, P, N] for a zero final-state
// gradient (a first scan backward), dF_g = link_{g+1} dS_{g+1}, dS_g = d0_g + D_g dF_g in reverse
// chunk order; writes this rank's chunks' final-state gradients into d_final [2B, nH, P, N].
void context_states_backward(Context& ctx, const Tensor& d0, const Tensor& decay, const Tensor& seq, int rank,
                             Tensor& d_final);

}  // namespace nemotron::ops
