// Context parallelism in the Mamba-2 mixer (model/context_split.h: rank r holds chunks r and
// 2C-1-r of every row). Here the local rows [B, 2L, .] are viewed as 2B rows of one chunk each
// (row 2b + j = local chunk j of row b), so each op runs on both chunks in one call.
//  - conv1d: a chunk's first K-1 outputs read the K-1 inputs before it, held by the rank of the
//    previous chunk: every rank's chunk tails are all-gathered (small) into a halo before each
//    chunk ([2B, K-1+L, .], zeros before chunk 0); the halo rows' gradients go back the same way
//    and are added to the tails they came from.
//  - SSD scan: the state runs through the chunks in sequence order, and the scan is affine in its
//    initial state with a per-(row, head) decay. Each rank scans its chunks from a zero state (final
//    state F_g) and computes each chunk's decay D_g = exp(A sum dt) (ops/context_scan_states.h; 0
//    where a sequence starts inside the chunk); F, D (and the packed-sequence ids) are all-gathered
//    and every rank composes the incoming states S_0 = 0, S_{g+1} = F_g + D_g S_g (0 where chunk g+1
//    starts a new sequence) on its device, then scans its chunks from S_g. Backward, the adjoint: a
//    first backward gives each chunk's d S_g for a zero final-state gradient, the reverse
//    composition dF_g = dS_{g+1}, dS_g += D_g dF_g gives every chunk's final-state gradient, and the
//    second backward with it is the exact gradient.
// Everything stays on the tensors' device and stream (NCCL or MPI all-gathers, no host copies).
#pragma once
#include <memory>

#include "core/context.h"
#include "ops/ssd_scan.h"

namespace nemotron::model {

// raw [B, 2L, W] -> [2B, halo + L, W]: each local chunk after the `halo` rows before it in its row.
// seq_idx [B, 2L] int32 extends the same way.
Tensor context_halo_extend(Context& ctx, const Tensor& raw, int64_t halo);
// [2B, halo + L, W] -> [B, 2L, W]: the chunks' own rows (a conv output without its halo rows).
Tensor context_halo_drop(Context& ctx, const Tensor& ext, int64_t halo);
// d [B, 2L, W] -> [2B, halo + L, W] with zero halo rows: the adjoint of context_halo_drop.
Tensor context_halo_pad(Context& ctx, const Tensor& d, int64_t halo);
// d_ext [2B, halo + L, W] -> d raw [B, 2L, W]: the chunks' own rows plus the gradient of the rows
// other ranks read as their halo: the adjoint of context_halo_extend.
Tensor context_halo_reduce(Context& ctx, const Tensor& d_ext, int64_t halo);

// What the scan's backward needs of its forward's composition.
struct ContextScanChain {
  Tensor initial_state;  // [2B, nH, P, N] each local chunk's incoming state
  Tensor decay;          // [C, 2B, nH]: every rank's chunks' D_g (gathered, rank order)
  Tensor seq;            // [C, 2B, L] int32: every rank's chunks' seq_idx, or undefined
};

// args: the local chunks as 2B rows ([2B, L, .]; initial_state undefined); y [2B, L, nH, P].
// Fills `chain` for the backward.
void context_scan_forward(Context& ctx, const ops::SsdScanArgs& args, Tensor& y, ContextScanChain& chain);
// The gradients of <y, dy> through the whole sequence's scan, for this rank's chunks (grads as
// ssd_scan_backward's; d_initial_state unused).
void context_scan_backward(Context& ctx, const ops::SsdScanArgs& args, const ContextScanChain& chain,
                           const Tensor& dy, ops::SsdScanGrads& grads);

}  // namespace nemotron::model
