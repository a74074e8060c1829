// Paged decode attention: one warp per (new token, query head); for GQA groups of 2, 4 or 8 one
// warp per (new token, KV head), or at small batches one block per (new token, KV head) whose
// warps split the keys (below); in bfloat16 with heads of 64, 128 or 256 (Llama's shapes) one
// warp per chunk of a (new token, KV head)'s keys and a merge of the chunks (flash-decoding, the
// chunk kernel below) at every batch size. The warp walks the sequence's
// cached positions 0..p through its block table with an online softmax (running maximum m, sum l,
// and the rescaled output accumulator in float32 registers); lane e holds elements e, e+32, ... of
// the head, so every key and value row is read once, coalesced, and each score is one warp sum.
// A token finds its sequence by binary search over cu_seqlens (S is small), so nothing about the
// ragged batch is read on the host.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "ops/attention_decode_cuda.h"
#include "ops/cuda_vec_io.cuh"

namespace nemotron::ops {

namespace {

constexpr int kWarps = 4;       // warps per block of the per-head and warp-group kernels
constexpr int kSplitWarps = 8;  // the split group kernel's warps per (token, KV head), at most

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

// Key s's block-table index and row in that block, in 32-bit arithmetic: a shift for a
// power-of-two block size (bs_shift = log2 bs, from block_shift), else a 32-bit division. A 64-bit
// division and remainder per key is a long instruction sequence, and every kernel's key loop is
// issue-bound. A row's key count fits an int: it is at most the table's width times bs.
struct KeyPlace {
  int block, row;
};
__device__ inline KeyPlace key_place(int s, int bs, int bs_shift) {
  const int b = bs_shift >= 0 ? s >> bs_shift : s / bs;
  return {b, s - b * bs};
}

template <class T, int PER>
__global__ void __launch_bounds__(kWarps * 32)
attention_decode_kernel(const T* __restrict__ q, const T* __restrict__ kc, const T* __restrict__ vc,
                        const int32_t* __restrict__ table, const int32_t* __restrict__ cu,
                        const int32_t* __restrict__ lens, T* __restrict__ o, int64_t Ntot, int64_t S, int64_t nq,
                        int64_t nkv, int64_t hd, int64_t bs, int bs_shift, int64_t M, int64_t num_blocks,
                        float scale) {
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
  const int nkeys = bad ? 0 : static_cast<int>(keys), b32 = static_cast<int>(bs);
  for (int s = 0; s < nkeys; ++s) {
    const KeyPlace at = key_place(s, b32, bs_shift);
    const int64_t blk = blocks[at.block];
    if (blk < 0 || blk >= num_blocks) {
      bad = true;  // same s on every lane: the warp leaves together
      break;
    }
    const int64_t base = ((blk * bs + at.row) * nkv + j) * hd;
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

// The same per query head, with one warp per (new token, KV head) serving the G query heads of
// that KV head's group: every key and value row is read once for the group instead of once per
// query head, the G scores of a key are independent warp sums (in flight together), and the value
// row is loaded beside the key row. Per head the arithmetic is the kernel's above, in the same
// order. On an H100 (an 8B Llama shape, G 4, batch 256) attention fell from 19.6 to 10.0 ms of the
// decode step (30.5 -> 20.9 ms). Used for large batches (see launch).
template <class T, int PER, int G>
__global__ void __launch_bounds__(kWarps * 32)
attention_decode_warp_group_kernel(const T* __restrict__ q, const T* __restrict__ kc, const T* __restrict__ vc,
                                   const int32_t* __restrict__ table, const int32_t* __restrict__ cu,
                                   const int32_t* __restrict__ lens, T* __restrict__ o, int64_t Ntot, int64_t S,
                                   int64_t nq, int64_t nkv, int64_t hd, int64_t bs, int bs_shift, int64_t M,
                                   int64_t num_blocks, float scale) {
  const int64_t warp = blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (warp >= Ntot * nkv) return;  // uniform per warp
  const int64_t n = warp / nkv, j = warp % nkv;
  const int64_t i = sequence_of(cu, S, n);
  const int64_t count = cu[i + 1] - cu[i], L = lens[i];
  const int64_t keys = L - count + (n - cu[i]) + 1;
  bool bad = keys <= 0 || (keys + bs - 1) / bs > M;
  float qv[G][PER], acc[G][PER], m[G], l[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const int64_t row = (n * nq + j * G + g) * hd;
#pragma unroll
    for (int k = 0; k < PER; ++k) {
      const int64_t e = lane + 32 * k;
      qv[g][k] = e < hd ? to_f(q[row + e]) * scale : 0.0f;
      acc[g][k] = 0.0f;
    }
    m[g] = -INFINITY, l[g] = 0.0f;
  }
  const int32_t* blocks = table + i * M;
  const int nkeys = bad ? 0 : static_cast<int>(keys), b32 = static_cast<int>(bs);
  for (int s = 0; s < nkeys; ++s) {
    const KeyPlace at = key_place(s, b32, bs_shift);
    const int64_t blk = blocks[at.block];
    if (blk < 0 || blk >= num_blocks) {
      bad = true;  // same s on every lane: the warp leaves together
      break;
    }
    const int64_t base = ((blk * bs + at.row) * nkv + j) * hd;
    float kv[PER], vv[PER];
#pragma unroll
    for (int k = 0; k < PER; ++k) {
      const int64_t e = lane + 32 * k;
      kv[k] = e < hd ? to_f(kc[base + e]) : 0.0f;
      vv[k] = e < hd ? to_f(vc[base + e]) : 0.0f;
    }
    float score[G];
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float part = 0.0f;
#pragma unroll
      for (int k = 0; k < PER; ++k)
        if (lane + 32 * k < hd) part += qv[g][k] * kv[k];
      score[g] = part;
    }
#pragma unroll
    for (int g = 0; g < G; ++g) score[g] = warp_sum(score[g]);
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const float m_new = fmaxf(m[g], score[g]);
      const float corr = expf(m[g] - m_new), w = expf(score[g] - m_new);
      l[g] = l[g] * corr + w;
#pragma unroll
      for (int k = 0; k < PER; ++k)
        if (lane + 32 * k < hd) acc[g][k] = acc[g][k] * corr + w * vv[k];
      m[g] = m_new;
    }
  }
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const float inv = bad ? NAN : 1.0f / l[g];
    const int64_t row = (n * nq + j * G + g) * hd;
#pragma unroll
    for (int k = 0; k < PER; ++k) {
      const int64_t e = lane + 32 * k;
      if (e < hd) o[row + e] = from_f<T>(acc[g][k] * inv);
    }
  }
}

// The group kernel above for small batches: one block per (new token, KV head). One warp per
// group leaves the GPU idle at small batches: at batch 1 of the 8B shape, 8 warps in all, each
// walking ~150 keys one dependent load after another, 130 us a layer, a third of the step. Here
// the block's W warps split the keys (warp w takes keys w, w + W, ..., loading D of them before
// their arithmetic), each keeps its own online softmax, and the block merges the W partial results
// in shared memory in warp order. Measured on an H100 (8B shape, ~150-token contexts): decode step
// 12.8 -> 8.1 ms at batch 1, 13.5 -> 10.1 ms at batch 64 (attention 4.8 -> 1.9 ms); at batch 256
// it was slower than the warp kernel (step 18.0 -> 19.9 ms; not profiled: it runs 16 warps per SM
// against the warp kernel's ~20, and its key loop of shuffles and exponentials is no shorter).
template <class T, int PER, int G>
__global__ void __launch_bounds__(kSplitWarps * 32)
attention_decode_split_group_kernel(const T* __restrict__ q, const T* __restrict__ kc, const T* __restrict__ vc,
                                    const int32_t* __restrict__ table, const int32_t* __restrict__ cu,
                                    const int32_t* __restrict__ lens, T* __restrict__ o, int64_t Ntot, int64_t S,
                                    int64_t nq, int64_t nkv, int64_t hd, int64_t bs, int bs_shift, int64_t M,
                                    int64_t num_blocks, float scale) {
  extern __shared__ float part_smem[];  // acc [W][G][hd], then m [W][G], l [W][G]
  const int W = static_cast<int>(blockDim.x / 32), warp = static_cast<int>(threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t n = blockIdx.x / nkv, j = blockIdx.x % nkv;
  const int64_t i = sequence_of(cu, S, n);
  const int64_t count = cu[i + 1] - cu[i], L = lens[i];
  const int64_t keys = L - count + (n - cu[i]) + 1;
  bool bad = keys <= 0 || (keys + bs - 1) / bs > M;
  float qv[G][PER], acc[G][PER], m[G], l[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const int64_t row = (n * nq + j * G + g) * hd;
#pragma unroll
    for (int k = 0; k < PER; ++k) {
      const int64_t e = lane + 32 * k;
      qv[g][k] = e < hd ? to_f(q[row + e]) * scale : 0.0f;
      acc[g][k] = 0.0f;
    }
    m[g] = -INFINITY, l[g] = 0.0f;
  }
  const int32_t* blocks = table + i * M;
  // Key s's rows into kv / vv; false (nothing loaded) when its block is outside the pool.
  const int b32 = static_cast<int>(bs);
  auto load_key = [&](int s, float (&kv)[PER], float (&vv)[PER]) {
    const KeyPlace at = key_place(s, b32, bs_shift);
    const int64_t blk = blocks[at.block];
    if (blk < 0 || blk >= num_blocks) return false;  // same s on every lane: the warp agrees
    const int64_t base = ((blk * bs + at.row) * nkv + j) * hd;
#pragma unroll
    for (int k = 0; k < PER; ++k) {
      const int64_t e = lane + 32 * k;
      kv[k] = e < hd ? to_f(kc[base + e]) : 0.0f;
      vv[k] = e < hd ? to_f(vc[base + e]) : 0.0f;
    }
    return true;
  };
  // D keys of the warp's share at a time: their rows are all loaded before the first one's
  // arithmetic, so D loads are in flight where one dependent load per key was.
  constexpr int D = G * PER <= 16 ? 4 : 2;
  const int nkeys = bad ? 0 : static_cast<int>(keys);
  for (int s0 = warp; s0 < nkeys && !bad; s0 += D * W) {
    float kv[D][PER], vv[D][PER];
#pragma unroll
    for (int d = 0; d < D; ++d)
      if (s0 + d * W < nkeys && !load_key(s0 + d * W, kv[d], vv[d])) bad = true;
    if (bad) break;
#pragma unroll
    for (int d = 0; d < D; ++d) {
      if (s0 + d * W >= nkeys) break;  // the same on every lane
      float score[G];
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float part = 0.0f;
#pragma unroll
        for (int k = 0; k < PER; ++k)
          if (lane + 32 * k < hd) part += qv[g][k] * kv[d][k];
        score[g] = part;
      }
#pragma unroll
      for (int g = 0; g < G; ++g) score[g] = warp_sum(score[g]);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float m_new = fmaxf(m[g], score[g]);
        const float corr = expf(m[g] - m_new), w = expf(score[g] - m_new);
        l[g] = l[g] * corr + w;
#pragma unroll
        for (int k = 0; k < PER; ++k)
          if (lane + 32 * k < hd) acc[g][k] = acc[g][k] * corr + w * vv[d][k];
        m[g] = m_new;
      }
    }
  }

  // Merge: o = sum_w acc_w e^(m_w - m*) / sum_w l_w e^(m_w - m*), m* = max_w m_w, summed in warp
  // order. A warp without keys has m = -inf, l = 0 and adds nothing.
  float* sacc = part_smem;
  float* sm = part_smem + static_cast<int64_t>(W) * G * hd;
  float* sl = sm + W * G;
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int k = 0; k < PER; ++k) {
      const int64_t e = lane + 32 * k;
      if (e < hd) sacc[(static_cast<int64_t>(warp) * G + g) * hd + e] = acc[g][k];
    }
    if (lane == 0) sm[warp * G + g] = m[g], sl[warp * G + g] = l[g];
  }
  bad = __syncthreads_or(bad);
  for (int64_t idx = threadIdx.x; idx < G * hd; idx += blockDim.x) {
    const int g = static_cast<int>(idx / hd);
    const int64_t e = idx % hd;
    float mx = -INFINITY;
    for (int w = 0; w < W; ++w) mx = fmaxf(mx, sm[w * G + g]);
    float num = 0.0f, den = 0.0f;
    for (int w = 0; w < W; ++w) {
      const float c = sl[w * G + g] > 0.0f ? expf(sm[w * G + g] - mx) : 0.0f;
      den += sl[w * G + g] * c;
      num += sacc[(static_cast<int64_t>(w) * G + g) * hd + e] * c;
    }
    o[(n * nq + j * G + g) * hd + e] = from_f<T>(bad ? NAN : num / den);
  }
}

// Flash-decoding (bf16 heads of 64, 128 or 256, G 2, 4 or 8): a warp's keys spread over its
// lanes, L = HD / 8 lanes holding one key (8 elements each, one 16-byte load of K and one of V),
// so a warp takes 32 / L keys at a time, and D such steps are loaded before their arithmetic;
// lane group `sub` takes keys s0 + d (32 / L) + sub with its own online softmax, and the groups
// merge at the end through shuffles. Each (new token, KV head) pair's keys are split into chunks
// of `chunk`, one warp per (pair, chunk), so that few pairs (batch 1: 8 pairs of the 8B shape)
// still spread over every multiprocessor. (A warp per pair, this kernel's forerunner, read the
// cache at ~40% of the copy bandwidth at batch 256 on an H100, 29% on an H200.)
// Before, the split group kernel ran one block per pair: 8 blocks on 132 multiprocessors, 40 us a
// layer over a 256-token context on an H100 (the KV rows read ~1 MB). A warp writes its chunk's
// unnormalised accumulator with its maximum m and sum l to `part` (float32), and
// attention_decode_merge_kernel combines the chunks; with one chunk per pair the warp writes o
// itself. The online softmax is kept per tile of D keys a lane group holds, not per key: one
// rescale of the accumulator and one exponential of the old maximum per tile, and exponentials in
// base 2 (log2 e folded into the query's scale), which cut the key loop's arithmetic. Measured
// on an H200 (cuda_attention_decode, 8B shape, contexts 256..512): batch 256 332 us a layer with
// the warp-per-pair kernel -> 288 with chunks -> 210 once the key's block and row were 32-bit
// arithmetic (46% of the copy bandwidth); batch 1 49 -> 19 us.
template <int HD, int G>
__global__ void __launch_bounds__(kWarps * 32)
attention_decode_chunk_kernel(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ kc,
                              const __nv_bfloat16* __restrict__ vc, const int32_t* __restrict__ table,
                              const int32_t* __restrict__ cu, const int32_t* __restrict__ lens,
                              __nv_bfloat16* __restrict__ o, float* __restrict__ part, int64_t Ntot, int64_t S,
                              int64_t nq, int64_t nkv, int64_t bs, int bs_shift, int64_t M, int64_t num_blocks,
                              int64_t splits, int64_t chunk, float scale_log2) {
  constexpr int L = HD / 8, KPW = 32 / L, D = G <= 4 ? 4 : 2;
  const int64_t warp = blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x % 32), sub = lane / L, e0 = (lane % L) * 8;
  if (warp >= Ntot * nkv * splits) return;  // uniform per warp
  const int64_t pair = warp / splits, c = warp % splits, n = pair / nkv, j = pair % nkv;
  const int64_t i = sequence_of(cu, S, n);
  const int64_t count = cu[i + 1] - cu[i], len = lens[i];
  const int64_t keys = len - count + (n - cu[i]) + 1;
  // Rows the merge turns to NaN (it checks the same), and chunks past the context: nothing to do.
  if (keys <= 0 || (keys + bs - 1) / bs > M || c * chunk >= keys) return;
  const int begin = static_cast<int>(c * chunk), end = static_cast<int>(min(keys, c * chunk + chunk));  // int: see below
  float qv[G][8], acc[G][8], m[G], l[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    vec_io::load<8>(q + (n * nq + j * G + g) * HD + e0, qv[g]);
#pragma unroll
    for (int k = 0; k < 8; ++k) qv[g][k] *= scale_log2, acc[g][k] = 0.0f;
    m[g] = -INFINITY, l[g] = 0.0f;
  }
  const int32_t* blocks = table + i * M;
  bool bad = false;
  const int b32 = static_cast<int>(bs);
  for (int s0 = begin; s0 < end; s0 += KPW * D) {  // the same trip count on every lane
    uint4 kr[D], vr[D];
    bool ok[D];
#pragma unroll
    for (int d = 0; d < D; ++d) {
      kr[d] = vr[d] = make_uint4(0, 0, 0, 0);
      const int si = s0 + d * KPW + sub;
      ok[d] = si < end;
      if (!ok[d]) continue;
      const KeyPlace at = key_place(si, b32, bs_shift);
      const int64_t blk = blocks[at.block];
      if (blk < 0 || blk >= num_blocks) {
        bad = true, ok[d] = false;  // the output is NaN (merged below); nothing read
        continue;
      }
      const int64_t base = ((blk * bs + at.row) * nkv + j) * HD + e0;
      kr[d] = *reinterpret_cast<const uint4*>(kc + base);
      vr[d] = *reinterpret_cast<const uint4*>(vc + base);
    }
    float score[D][G];
#pragma unroll
    for (int d = 0; d < D; ++d) {
      float kf[8];
      const __nv_bfloat162* kh = reinterpret_cast<const __nv_bfloat162*>(&kr[d]);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float2 t = __bfloat1622float2(kh[k]);
        kf[2 * k] = t.x, kf[2 * k + 1] = t.y;
      }
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float p = 0.0f;
#pragma unroll
        for (int k = 0; k < 8; ++k) p += qv[g][k] * kf[k];
        score[d][g] = p;
      }
    }
    // Each key's dot products: a sum over its L lanes (every lane takes part, loaded or not).
#pragma unroll
    for (int off = L / 2; off > 0; off /= 2)
#pragma unroll
      for (int d = 0; d < D; ++d)
#pragma unroll
        for (int g = 0; g < G; ++g) score[d][g] += __shfl_xor_sync(0xffffffffu, score[d][g], off);
    if (!ok[0]) continue;  // keys of a lane group are s0 + d KPW + sub: none of this tile when the first is not
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float mt = m[g];
#pragma unroll
      for (int d = 0; d < D; ++d)
        if (ok[d]) mt = fmaxf(mt, score[d][g]);
      const float corr = exp2f(m[g] - mt);  // 0 on the first tile (m = -inf, mt finite)
      l[g] *= corr;
#pragma unroll
      for (int k = 0; k < 8; ++k) acc[g][k] *= corr;
      m[g] = mt;
    }
#pragma unroll
    for (int d = 0; d < D; ++d) {
      if (!ok[d]) continue;  // the same on the key's L lanes
      float vf[8];
      const __nv_bfloat162* vh = reinterpret_cast<const __nv_bfloat162*>(&vr[d]);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float2 t = __bfloat1622float2(vh[k]);
        vf[2 * k] = t.x, vf[2 * k + 1] = t.y;
      }
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float w = exp2f(score[d][g] - m[g]);
        l[g] += w;
#pragma unroll
        for (int k = 0; k < 8; ++k) acc[g][k] += w * vf[k];
      }
    }
  }
  // Merge the KPW lane groups: o = sum acc 2^(m - m*) / sum l 2^(m - m*), m* their maximum (a group
  // without keys has m = -inf, l = 0 and adds nothing).
  bad = __any_sync(0xffffffffu, bad);
#pragma unroll
  for (int g = 0; g < G; ++g) {
    float mx = m[g];
#pragma unroll
    for (int off = L; off < 32; off *= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    const float cg = l[g] > 0.0f ? exp2f(m[g] - mx) : 0.0f;
    float den = l[g] * cg;
#pragma unroll
    for (int k = 0; k < 8; ++k) acc[g][k] *= cg;
#pragma unroll
    for (int off = L; off < 32; off *= 2) {
      den += __shfl_xor_sync(0xffffffffu, den, off);
#pragma unroll
      for (int k = 0; k < 8; ++k) acc[g][k] += __shfl_xor_sync(0xffffffffu, acc[g][k], off);
    }
    if (sub != 0) continue;
    if (splits == 1) {
      const float inv = bad ? NAN : 1.0f / den;
#pragma unroll
      for (int k = 0; k < 8; ++k) acc[g][k] *= inv;
      vec_io::store<8>(o + (n * nq + j * G + g) * HD + e0, acc[g]);
    } else {
      float* p = part + warp * G * (HD + 2);  // acc [G][HD], then m [G], l [G]
#pragma unroll
      for (int k = 0; k < 8; ++k) p[g * HD + e0 + k] = acc[g][k];
      if (e0 == 0) p[G * HD + g] = mx, p[G * HD + G + g] = bad ? NAN : den;
    }
  }
}

// The chunks of attention_decode_chunk_kernel combined: o = sum_c acc_c 2^(m_c - m*) / sum_c l_c
// 2^(m_c - m*), m* the chunks' maximum; one warp per output row (new token, query head), its lanes
// taking the chunks' maxima and sums in parallel and then HD / 32 elements each through every
// chunk (at batch 1 of the 8B shape a row merges 64 chunks; against one thread per element the
// H200's batch-1 time did not change, 19 us a layer with the chunk kernel, latency-bound: fewer,
// longer chunks there are untried). A row with fewer cached tokens than new ones, or more blocks
// than the table holds, is NaN (as the other kernels' rows are); a block outside the pool made
// its chunk's l NaN.
template <int HD, int G>
__global__ void __launch_bounds__(kWarps * 32)
attention_decode_merge_kernel(const float* __restrict__ part, const int32_t* __restrict__ cu,
                              const int32_t* __restrict__ lens, __nv_bfloat16* __restrict__ o, int64_t Ntot,
                              int64_t S, int64_t nq, int64_t nkv, int64_t bs, int64_t M, int64_t splits,
                              int64_t chunk) {
  constexpr int PER = HD / 32;  // 2, 4 or 8
  const int64_t warp = blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (warp >= Ntot * nq) return;  // uniform per warp
  const int64_t n = warp / nq, h = warp % nq, j = h / G, g = h % G;
  const int64_t i = sequence_of(cu, S, n);
  const int64_t keys = lens[i] - (cu[i + 1] - cu[i]) + (n - cu[i]) + 1;
  __nv_bfloat16* orow = o + warp * HD + lane * PER;
  if (keys <= 0 || (keys + bs - 1) / bs > M) {
#pragma unroll
    for (int k = 0; k < PER; ++k) orow[k] = __float2bfloat16(NAN);
    return;
  }
  const int64_t used = (keys + chunk - 1) / chunk, stride = G * (HD + 2);
  const float* p = part + (n * nkv + j) * splits * stride;
  float mx = -INFINITY;
  for (int64_t c = lane; c < used; c += 32) mx = fmaxf(mx, p[c * stride + G * HD + g]);
#pragma unroll
  for (int off = 16; off > 0; off /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  float den = 0.0f;
  for (int64_t c = lane; c < used; c += 32) den += p[c * stride + G * HD + G + g] * exp2f(p[c * stride + G * HD + g] - mx);
  den = warp_sum(den);
  float num[PER] = {};
#pragma unroll 4
  for (int64_t c = 0; c < used; ++c) {
    const float* pc = p + c * stride;
    const float w = exp2f(pc[G * HD + g] - mx);
    const float2* a = reinterpret_cast<const float2*>(pc + g * HD + lane * PER);  // 8-byte aligned: stride, HD even
#pragma unroll
    for (int k = 0; k < PER / 2; ++k) {
      const float2 v = a[k];
      num[2 * k] += w * v.x, num[2 * k + 1] += w * v.y;
    }
  }
  const float inv = 1.0f / den;  // NaN when a chunk's l is
#pragma unroll
  for (int k = 0; k < PER; ++k) orow[k] = __float2bfloat16(num[k] * inv);
}

// key_place's shift: log2 bs for a power-of-two block size, else -1 (divide).
int block_shift(int64_t bs) {
  return (bs & (bs - 1)) == 0 ? __builtin_ctzll(static_cast<unsigned long long>(bs)) : -1;
}

// Multiprocessors of the current device (read once per device).
int64_t sm_count() {
  static int counts[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 132;
  int& c = counts[dev & 63];
  if (c == 0 && cudaDeviceGetAttribute(&c, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) c = 132;
  return c;
}

// The chunk kernel's split of each pair's keys: chunks of `chunk` keys (a multiple of the keys a
// warp loads per step), as many as make ~32 warps per multiprocessor over the batch's pairs, or
// splits 0 where that kernel does not apply (float32, other head sizes or groups, unaligned).
// Only shapes decide it (the context lengths stay on the device): the table's width M bounds the keys.
struct ChunkPlan {
  int64_t splits = 0, chunk = 0;
};

ChunkPlan chunk_plan(const AttentionDecodeCudaArgs& a) {
  const int64_t G = a.nq / a.nkv;
  if (!a.bf16 || !(G == 2 || G == 4 || G == 8) || !(a.hd == 64 || a.hd == 128 || a.hd == 256) ||
      !vec_io::aligned_for<__nv_bfloat16>(8, a.q, a.k_cache, a.v_cache, a.o))
    return {};
  const int64_t step = (32 / (a.hd / 8)) * (G <= 4 ? 4 : 2);  // KPW x D of the kernel
  const int64_t max_keys = std::max<int64_t>(1, a.M * a.bs), pairs = a.Ntot * a.nkv;
  const int64_t want = std::max<int64_t>(1, (sm_count() * 32 + pairs - 1) / pairs);
  int64_t chunk = (max_keys + want - 1) / want;
  chunk = std::max(step, (chunk + step - 1) / step * step);
  return {(max_keys + chunk - 1) / chunk, chunk};
}

cudaError_t launch_chunks(const AttentionDecodeCudaArgs& a, const ChunkPlan& plan, cudaStream_t s) {
  using T = __nv_bfloat16;
  const float scale_log2 = 1.4426950408889634f / sqrtf(static_cast<float>(a.hd));
  const int64_t G = a.nq / a.nkv;
  if (plan.splits > 1 && a.workspace == nullptr) return cudaErrorInvalidValue;
  const unsigned blocks = static_cast<unsigned>((a.Ntot * a.nkv * plan.splits + kWarps - 1) / kWarps);
  const unsigned merge_blocks = static_cast<unsigned>((a.Ntot * a.nq + kWarps - 1) / kWarps);
  const int bs_shift = block_shift(a.bs);
  auto run = [&](auto hd, auto g) {
    constexpr int HD = decltype(hd)::value, GG = decltype(g)::value;
    attention_decode_chunk_kernel<HD, GG><<<blocks, kWarps * 32, 0, s>>>(
        static_cast<const T*>(a.q), static_cast<const T*>(a.k_cache), static_cast<const T*>(a.v_cache), a.block_table,
        a.cu_seqlens, a.context_lens, static_cast<T*>(a.o), a.workspace, a.Ntot, a.S, a.nq, a.nkv, a.bs, bs_shift, a.M,
        a.num_blocks, plan.splits, plan.chunk, scale_log2);
    if (plan.splits > 1)
      attention_decode_merge_kernel<HD, GG><<<merge_blocks, kWarps * 32, 0, s>>>(
          a.workspace, a.cu_seqlens, a.context_lens, static_cast<T*>(a.o), a.Ntot, a.S, a.nq, a.nkv, a.bs, a.M,
          plan.splits, plan.chunk);
  };
  auto by_g = [&](auto hd) {
    if (G == 2) run(hd, std::integral_constant<int, 2>{});
    else if (G == 4) run(hd, std::integral_constant<int, 4>{});
    else run(hd, std::integral_constant<int, 8>{});
  };
  if (a.hd == 64) by_g(std::integral_constant<int, 64>{});
  else if (a.hd == 128) by_g(std::integral_constant<int, 128>{});
  else by_g(std::integral_constant<int, 256>{});
  return cudaGetLastError();
}

template <class T>
cudaError_t launch(const AttentionDecodeCudaArgs& a, cudaStream_t s) {
  const float scale = 1.0f / sqrtf(static_cast<float>(a.hd));
  const int64_t G = a.nq / a.nkv;
  const int bs_shift = block_shift(a.bs);
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const ChunkPlan plan = chunk_plan(a);
    if (plan.splits > 0) return launch_chunks(a, plan, s);
  }
  // Up to 4 groups per multiprocessor (batch 64 of the 8B shape: 512 groups on 132) the warp
  // kernel leaves most warp slots empty and the split kernel was faster; at 2048 (batch 256) the
  // warp kernel was. A row's result is the same for any batch on the same side of this line.
  if ((G == 2 || G == 4 || G == 8) && a.Ntot * a.nkv > 4 * sm_count()) {
    const unsigned blocks = static_cast<unsigned>((a.Ntot * a.nkv + kWarps - 1) / kWarps);
    auto group = [&](auto per, auto g) {
      attention_decode_warp_group_kernel<T, decltype(per)::value, decltype(g)::value><<<blocks, kWarps * 32, 0, s>>>(
          static_cast<const T*>(a.q), static_cast<const T*>(a.k_cache), static_cast<const T*>(a.v_cache),
          a.block_table, a.cu_seqlens, a.context_lens, static_cast<T*>(a.o), a.Ntot, a.S, a.nq, a.nkv, a.hd, a.bs,
          bs_shift, a.M, a.num_blocks, scale);
    };
    auto by_g = [&](auto per) {
      if (G == 2) group(per, std::integral_constant<int, 2>{});
      else if (G == 4) group(per, std::integral_constant<int, 4>{});
      else group(per, std::integral_constant<int, 8>{});
    };
    if (a.hd <= 32) by_g(std::integral_constant<int, 1>{});
    else if (a.hd <= 64) by_g(std::integral_constant<int, 2>{});
    else if (a.hd <= 128) by_g(std::integral_constant<int, 4>{});
    else by_g(std::integral_constant<int, 8>{});
    return cudaGetLastError();
  }
  if (G == 2 || G == 4 || G == 8) {  // a block per group (G 1 is the per-head kernel itself)
    const unsigned blocks = static_cast<unsigned>(a.Ntot * a.nkv);
    // W warps whose partial results fit 32 KiB of shared memory (8 up to G hd = 1024).
    const int W = static_cast<int>(std::min<int64_t>(kSplitWarps, std::max<int64_t>(1, 8192 / (G * a.hd))));
    const size_t smem = (static_cast<size_t>(W) * G * a.hd + 2 * static_cast<size_t>(W) * G) * sizeof(float);
    auto group = [&](auto per, auto g) {
      attention_decode_split_group_kernel<T, decltype(per)::value, decltype(g)::value><<<blocks, W * 32, smem, s>>>(
          static_cast<const T*>(a.q), static_cast<const T*>(a.k_cache), static_cast<const T*>(a.v_cache),
          a.block_table, a.cu_seqlens, a.context_lens, static_cast<T*>(a.o), a.Ntot, a.S, a.nq, a.nkv, a.hd, a.bs,
          bs_shift, a.M, a.num_blocks, scale);
    };
    auto by_g = [&](auto per) {
      if (G == 2) group(per, std::integral_constant<int, 2>{});
      else if (G == 4) group(per, std::integral_constant<int, 4>{});
      else group(per, std::integral_constant<int, 8>{});
    };
    if (a.hd <= 32) by_g(std::integral_constant<int, 1>{});
    else if (a.hd <= 64) by_g(std::integral_constant<int, 2>{});
    else if (a.hd <= 128) by_g(std::integral_constant<int, 4>{});
    else by_g(std::integral_constant<int, 8>{});
    return cudaGetLastError();
  }
  const int64_t warps = a.Ntot * a.nq;
  const unsigned blocks = static_cast<unsigned>((warps + kWarps - 1) / kWarps);
  auto go = [&](auto per) {
    attention_decode_kernel<T, decltype(per)::value><<<blocks, kWarps * 32, 0, s>>>(
        static_cast<const T*>(a.q), static_cast<const T*>(a.k_cache), static_cast<const T*>(a.v_cache), a.block_table,
        a.cu_seqlens, a.context_lens, static_cast<T*>(a.o), a.Ntot, a.S, a.nq, a.nkv, a.hd, a.bs, bs_shift, a.M,
        a.num_blocks, scale);
  };
  if (a.hd <= 32) go(std::integral_constant<int, 1>{});
  else if (a.hd <= 64) go(std::integral_constant<int, 2>{});
  else if (a.hd <= 128) go(std::integral_constant<int, 4>{});
  else go(std::integral_constant<int, 8>{});
  return cudaGetLastError();
}

}  // namespace

int64_t attention_decode_cuda_workspace(const AttentionDecodeCudaArgs& a) {
  if (a.Ntot == 0 || a.nq == 0 || a.hd == 0 || a.nkv <= 0 || a.nq % a.nkv != 0) return 0;
  const ChunkPlan plan = chunk_plan(a);
  return plan.splits > 1 ? a.Ntot * a.nkv * plan.splits * (a.nq / a.nkv) * (a.hd + 2) : 0;
}

cudaError_t attention_decode_forward_cuda(const AttentionDecodeCudaArgs& a, cudaStream_t s) {
  if (a.Ntot == 0 || a.nq == 0 || a.hd == 0) return cudaSuccess;
  if (a.hd > kAttentionDecodeCudaMaxHd || a.nkv <= 0 || a.nq % a.nkv != 0 || a.S <= 0 || a.bs <= 0)
    return cudaErrorInvalidValue;
  return a.bf16 ? launch<__nv_bfloat16>(a, s) : launch<float>(a, s);
}

}  // namespace nemotron::ops
