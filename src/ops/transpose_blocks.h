// Swaps the two leading dims of a tensor of blocks: in viewed as [A, B, C] -> out [B, A, C], each
// block of C elements moved whole (any dtype: bytes are copied, never converted). The vocabulary
// gather of a split LM head uses it: an all-gather leaves [T, R, V/T] (rank-major) and the rows
// want [R, T * V/T] = [R, V]. Its own adjoint: the gradient is the swap back (A and B exchanged).
#pragma once
#include "core/context.h"

namespace nemotron::ops {

// in.numel() == out.numel() == A * B * C, same dtype and device; out must not overlap in.
void transpose_blocks(Context& ctx, const Tensor& in, int64_t A, int64_t B, Tensor& out);

}  // namespace nemotron::ops
