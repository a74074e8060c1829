// Packed-sequence boundaries shared by the ops that mix tokens along time (attention, causal
// conv1d, the SSD scan): seq_idx [B, T] int32, token t of row b belongs to packed sequence
// seq_idx[b, t]; ids are non-decreasing along t (as mamba_ssm and Megatron name and build it).
// An undefined tensor means one sequence per row. Tokens of different sequences never interact.
#pragma once
#include "core/error.h"
#include "core/tensor.h"

namespace nemotron::ops {

// Checks shape [B, T], int32, and the device of `like`; on the CPU also that ids never decrease
// along a row (on a GPU that would need a copy back, so the caller's packing is trusted there).
inline void check_seq_idx(const Tensor& seq_idx, int64_t B, int64_t T, const Tensor& like, const char* op) {
  if (!seq_idx.defined()) return;
  NM_CHECK(seq_idx.rank() == 2 && seq_idx.dim(0) == B && seq_idx.dim(1) == T,
           "{}: seq_idx must be [B, T] = [{}, {}], got {}", op, B, T, seq_idx.shape().str());
  NM_CHECK(seq_idx.dtype() == DType::i32, "{}: seq_idx must be int32, got {}", op, dtype_name(seq_idx.dtype()));
  NM_CHECK(seq_idx.device() == like.device(), "{}: seq_idx on {}, activations on {}", op, seq_idx.device().str(),
           like.device().str());
  if (!seq_idx.device().is_cpu()) return;
  const int32_t* s = seq_idx.data<int32_t>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 1; t < T; ++t)
      NM_CHECK(s[b * T + t] >= s[b * T + t - 1], "{}: seq_idx decreases in row {} at token {} ({} after {})", op, b,
               t, s[b * T + t], s[b * T + t - 1]);
}

// Host pointer to seq_idx or null when undefined (CPU references).
inline const int32_t* seq_idx_ptr(const Tensor& seq_idx) {
  return seq_idx.defined() ? seq_idx.data<int32_t>() : nullptr;
}

// First token of the sequence holding token t of a row (`row` = that row's ids, null = 0).
inline int64_t sequence_start(const int32_t* row, int64_t t) {
  if (!row) return 0;
  int64_t s = t;
  while (s > 0 && row[s - 1] == row[t]) --s;
  return s;
}

}  // namespace nemotron::ops
