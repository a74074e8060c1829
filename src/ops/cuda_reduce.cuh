// Deterministic column sums of float32 partials (nvcc only), the second stage of the parameter-
// gradient reductions: a [R, n] matrix of per-chunk partial sums is summed over its R rows in a
// fixed order. Blocks are kReduceCols x kReduceRows threads: thread row y sums rows y, y + 8, ...
// (many loads in flight instead of one serial chain), then thread row 0 adds the 8 results in order.
#pragma once
#include <cstdint>

namespace nemotron::ops::reduce {

constexpr int kReduceCols = 32, kReduceRows = 8;

// Column i = blockIdx.x * kReduceCols + threadIdx.x of partial [R, n]; every thread of the block
// must call it. Returns the column's total to thread row 0 (0 elsewhere and for i >= n).
__device__ inline float column_sum(const float* __restrict__ partial, int64_t R, int64_t n, int64_t i) {
  __shared__ float rows[kReduceRows][kReduceCols];
  float s = 0.0f;
  if (i < n) {
#pragma unroll 4
    for (int64_t r = threadIdx.y; r < R; r += kReduceRows) s += partial[r * n + i];
  }
  rows[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  float total = 0.0f;
  if (threadIdx.y == 0)
#pragma unroll
    for (int y = 0; y < kReduceRows; ++y) total += rows[y][threadIdx.x];
  return total;
}

inline dim3 column_sum_grid(int64_t n) { return dim3(static_cast<unsigned>((n + kReduceCols - 1) / kReduceCols)); }
inline dim3 column_sum_block() { return dim3(kReduceCols, kReduceRows); }

}  // namespace nemotron::ops::reduce
