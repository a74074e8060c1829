// The online softmax state (m, s) = (max, sum of exp(x - m)) of a run of values, merged pairwise
// and across a block (nvcc only). Shared by the fused cross-entropy and its vocab-parallel form,
// so both reduce a row in the same order and agree to the last bit on the same data.
#pragma once
#include <cmath>

namespace nemotron::ops::online_softmax {

constexpr float kLog2e = 1.4426950408889634f;

// Merges (m2, s2) into (m, s); a part with m = -inf is empty.
__device__ inline void merge(float& m, float& s, float m2, float s2) {
  const float M = fmaxf(m, m2);
  if (M == -INFINITY) return;
  s = (m == -INFINITY ? 0.0f : s * exp2f((m - M) * kLog2e)) + (m2 == -INFINITY ? 0.0f : s2 * exp2f((m2 - M) * kLog2e));
  m = M;
}

// Merges every thread's (m, s) of a kThreads block; all threads return the block's state. Every
// thread of the block must call it.
template <int kThreads>
__device__ void block_merge(float& m, float& s) {
  __shared__ float sm[kThreads / 32], ss[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) sm[warp] = m, ss[warp] = s;
  __syncthreads();
  if (warp == 0) {
    m = lane < kThreads / 32 ? sm[lane] : -INFINITY;
    s = lane < kThreads / 32 ? ss[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1)
      merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
    if (lane == 0) sm[0] = m, ss[0] = s;
  }
  __syncthreads();
  m = sm[0], s = ss[0];
}

}  // namespace nemotron::ops::online_softmax
