// The Mamba-2 selective state-space scan (reference/architectures.md A.3.2 step 5, A.3.3, A.3.5).
// Per batch b and head h (group g(h) = h / (nH/G)), state S [P, N], S_{-1} = initial state or 0:
//   S_t = exp(dt_t A_h) S_{t-1} + dt_t x_t B_t^T,   y_t = S_t C_t + D_h x_t
// Shapes: x [B, T, nH, P], dt [B, T, nH] (already softplus'ed and clamped), A [nH] (negative),
// Bm, Cm [B, T, G, N], D [nH], initial/final state [B, nH, P, N].
// Dtypes (src/ops/CUDA.md), for a compute dtype T: x, Bm, Cm, D, y, dy, dx, dBm, dCm in T; dt, A,
// ddt, the initial/final states and their gradients in stat_dtype(T) (float32 on a bf16 call); dA
// and dD in grad_dtype(T), accumulated. On the CPU all of these coincide.
//
// ssd_scan_forward is the chunked SSD algorithm of A.3.3 (chunk length Q = chunk_size, the last
// chunk may be shorter, Q may exceed T): per chunk, C B^T and the masked decay matrix give the
// intra-chunk output, dense state products carry the state between chunks. ssd_scan_naive_forward
// is the plain sequential recurrence above, kept as the specification the chunked form is tested
// against. The backward is the chunked adjoint of the same function (not the sequential
// recurrence of A.3.5): it recomputes the chunk-entry states, then walks chunks in reverse with the
// state gradient, using the transposed products of the forward. Nothing beyond the inputs is saved
// between forward and backward; per-task scratch is O(Q^2 + Q(P+N) + (T/Q) (nH/G) P N).
// Work is parallel over (batch, group) so that C B^T is shared by the heads of a group and dBm/dCm
// (summed over those heads) have a single writer. The CUDA kernels (ssd_scan_cuda.cu) run the same
// chunked algorithm as tile GEMMs, deterministic (fixed-order reductions, no atomics).
//
// Packed rows (ops/seq_idx.h): with seq_idx [B, T] int32 given, the state restarts at zero at
// every sequence start t (seq_idx[b,t] != seq_idx[b,t-1]): S_{t-1} is replaced by 0 there. The
// initial state, if given, is the state before the row's first sequence only; final_state is the
// state after the row's last token, i.e. the last sequence's own state. A row of several
// sequences thus gives each the y it would have alone (the first one with initial_state). In the
// chunked form this masks the decay matrix where ids differ, drops a token's contribution to the
// chunk's outgoing state unless it belongs to the chunk's last sequence, and drops the carried
// state for tokens (and the outgoing state) of a later sequence than the one it belongs to; the
// backward is the adjoint of exactly that function (no gradient flows through masked products).
//
// Chunk-end states (the engine's whole-prompt prefill, model/mamba2_mixer.cpp): with an
// SsdChunkStates given, for every chunk c of row b with slots[b, c] >= 0 the forward writes
// states[slots[b, c]] = the state right after the chunk's last token min(T, (c+1) Q) - 1, of that
// token's sequence (packed rows: that sequence's own state, the one final_state gives for the
// row's last). A sequence that ends on a chunk end leaves its final state there: mamba_ssm's
// chunk_state_varlen for packed sequences laid out to end on chunk ends (the caller pads with
// dt = 0 tokens, which leave the state unchanged). Chunks of a row count from its token 0.
#pragma once
#include "core/context.h"

namespace nemotron::ops {

struct SsdScanArgs {
  Tensor x, dt, A, Bm, Cm, D;
  Tensor initial_state;   // [B, nH, P, N]; undefined = zeros
  int64_t chunk_size = 128;
  Tensor seq_idx = {};    // [B, T] int32 packed-sequence ids; undefined = one sequence per row
};

struct SsdScanGrads {
  Tensor dx, ddt, dBm, dCm;  // overwritten
  Tensor dA, dD;             // accumulated (+=)
  Tensor d_initial_state;    // overwritten; leave undefined when not needed (needs args.initial_state)
};

// states [R, nH, P, N] in stat_dtype (rows named by slots overwritten, the others untouched);
// slots [B, ceil(T / chunk_size)] int32, -1 = none, the others distinct and in [0, R).
struct SsdChunkStates {
  Tensor states;
  Tensor slots;
};

// y [B, T, nH, P] (overwritten); final_state [B, nH, P, N] (overwritten) when given.
void ssd_scan_forward(Context& ctx, const SsdScanArgs& args, Tensor& y, Tensor* final_state = nullptr,
                      SsdChunkStates* chunk_states = nullptr);
void ssd_scan_naive_forward(Context& ctx, const SsdScanArgs& args, Tensor& y, Tensor* final_state = nullptr,
                            SsdChunkStates* chunk_states = nullptr);

// Gradients of <y, dy> + <final_state, d_final_state> (d_final_state may be null = 0).
void ssd_scan_backward(Context& ctx, const SsdScanArgs& args, const Tensor& dy, const Tensor* d_final_state,
                       SsdScanGrads& grads);

}  // namespace nemotron::ops
