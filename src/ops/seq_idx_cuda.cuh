// Device helpers for packed rows (ops/seq_idx.h): `seq` is one row of seq_idx, non-decreasing, so
// the tokens of a sequence form one contiguous range found by binary search.
#pragma once
#include <cstdint>

namespace nemotron::ops {

// The first token of the sequence holding token t.
__device__ inline int64_t seq_first(const int32_t* __restrict__ seq, int64_t t) {
  const int32_t id = seq[t];
  int64_t lo = 0, hi = t;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (seq[mid] < id) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// One past the last token of the sequence holding token t (T = the row's length).
__device__ inline int64_t seq_end(const int32_t* __restrict__ seq, int64_t t, int64_t T) {
  const int32_t id = seq[t];
  int64_t lo = t + 1, hi = T;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (seq[mid] <= id) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

}  // namespace nemotron::ops
