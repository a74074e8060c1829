// Paged decode attention: one warp per (new token, query head). The warp walks the sequence's
// cached positions 0..p through its block table with an online softmax (running maximum m, sum l,
// and the rescaled output accumulator in float32 registers); lane e holds elements e, e+32, ... of
// the head, so every key and value row is read once, coalesced, and each score is one warp sum.
// A token finds its sequence by binary search over cu_seqlens (S is small), so nothing about the
// ragged batch is read on the host.
#include <cuda_bf16.h>

#include <cmath>
#include <type_traits>

#include "ops/attention_decode_cuda.h"
#include "ops/cuda_vec_io.cuh"

namespace nemotron::ops {

namespace {

constexpr int kWarps = 4;

using vec_io::from_f;
using vec_io::to_f;

// The sequence i of token n: the largest i < S with cu[i] <= n (then n < cu[i+1], as cu[S] > n).
__device__ inline int64_t sequence_of(const int32_t* __restrict__ cu, int64_t S, int64_t n) {
  int64_t lo = 0, hi = S - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (cu[mid] <= n) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

__device__ inline float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <class T, int PER>
__global__ void __launch_bounds__(kWarps * 32)
attention_decode_kernel(const T* __restrict__ q, const T* __restrict__ kc, const T* __restrict__ vc,
                        const int32_t* __restrict__ table, const int32_t* __restrict__ cu,
                        const int32_t* __restrict__ lens, T* __restrict__ o, int64_t Ntot, int64_t S, int64_t nq,
                        int64_t nkv, int64_t hd, int64_t bs, int64_t M, int64_t num_blocks, float scale) {
  const int64_t warp = blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (warp >= Ntot * nq) return;  // uniform per warp
  const int64_t n = warp / nq, h = warp % nq, j = h / (nq / nkv);
  const int64_t i = sequence_of(cu, S, n);
  const int64_t count = cu[i + 1] - cu[i], L = lens[i];
  const int64_t keys = L - count + (n - cu[i]) + 1;  // positions 0..p, p = L - count + (n - cu[i])
  bool bad = keys <= 0 || (keys + bs - 1) / bs > M;
  float qv[PER], acc[PER];
#pragma unroll
  for (int k = 0; k < PER; ++k) {
    const int64_t e = lane + 32 * k;
    qv[k] = e < hd ? to_f(q[warp * hd + e]) * scale : 0.0f;
    acc[k] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  const int32_t* blocks = table + i * M;
  for (int64_t s = 0; s < keys && !bad; ++s) {
    const int64_t blk = blocks[s / bs];
    if (blk < 0 || blk >= num_blocks) {
      bad = true;  // same s on every lane: the warp leaves together
      break;
    }
    const int64_t base = ((blk * bs + s % bs) * nkv + j) * hd;
    float part = 0.0f;
#pragma unroll
    for (int k = 0; k < PER; ++k) {
      const int64_t e = lane + 32 * k;
      if (e < hd) part += qv[k] * to_f(kc[base + e]);
    }
    const float score = warp_sum(part);
    const float m_new = fmaxf(m, score);
    const float corr = expf(m - m_new), w = expf(score - m_new);
    l = l * corr + w;
#pragma unroll
    for (int k = 0; k < PER; ++k) {
      const int64_t e = lane + 32 * k;
      if (e < hd) acc[k] = acc[k] * corr + w * to_f(vc[base + e]);
    }
    m = m_new;
  }
  const float inv = bad ? NAN : 1.0f / l;
#pragma unroll
  for (int k = 0; k < PER; ++k) {
    const int64_t e = lane + 32 * k;
    if (e < hd) o[warp * hd + e] = from_f<T>(acc[k] * inv);
  }
}

template <class T>
cudaError_t launch(const AttentionDecodeCudaArgs& a, cudaStream_t s) {
  const int64_t warps = a.Ntot * a.nq;
  const unsigned blocks = static_cast<unsigned>((warps + kWarps - 1) / kWarps);
  const float scale = 1.0f / sqrtf(static_cast<float>(a.hd));
  auto go = [&](auto per) {
    attention_decode_kernel<T, decltype(per)::value><<<blocks, kWarps * 32, 0, s>>>(
        static_cast<const T*>(a.q), static_cast<const T*>(a.k_cache), static_cast<const T*>(a.v_cache), a.block_table,
        a.cu_seqlens, a.context_lens, static_cast<T*>(a.o), a.Ntot, a.S, a.nq, a.nkv, a.hd, a.bs, a.M, a.num_blocks,
        scale);
  };
  if (a.hd <= 32) go(std::integral_constant<int, 1>{});
  else if (a.hd <= 64) go(std::integral_constant<int, 2>{});
  else if (a.hd <= 128) go(std::integral_constant<int, 4>{});
  else go(std::integral_constant<int, 8>{});
  return cudaGetLastError();
}

}  // namespace

cudaError_t attention_decode_forward_cuda(const AttentionDecodeCudaArgs& a, cudaStream_t s) {
  if (a.Ntot == 0 || a.nq == 0 || a.hd == 0) return cudaSuccess;
  if (a.hd > kAttentionDecodeCudaMaxHd || a.nkv <= 0 || a.nq % a.nkv != 0 || a.S <= 0 || a.bs <= 0)
    return cudaErrorInvalidValue;
  return a.bf16 ? launch<__nv_bfloat16>(a, s) : launch<float>(a, s);
}

}  // namespace nemotron::ops
