// Flash attention backward, bf16 tensor cores, deterministic (see attention_cuda.h):
//  - dkdv: a block owns 64 keys of one (batch, KV head); each of its 4 warps owns 16 keys and
//    accumulates their dK and dV in registers over every query head of the group and every query
//    block at or after the diagonal, in a fixed order. Working on S^T = K Q^T puts keys in rows,
//    so P^T and dS^T are already the A operands of dV += P^T dO and dK += dS^T Q.
//  - dq: a block owns 64 query rows of one (batch, head) and streams key blocks up to the
//    diagonal, recomputing P and dP to accumulate dQ += dS K.
// Q/dO (dkdv) or K/V (dq) tiles are double-buffered with cp.async so copies overlap the MMAs.
// Packed rows (PACKED instances): P is also zero where query and key lie in different sequences;
// dkdv stops at the query block holding the end of its last key's sequence, dq starts at the key
// block holding the start of its first row's sequence.
// Queries of a sequence's tail (T < Tk): query row i is key position i + off (off = Tk - T); masks
// compare key positions, Q, dO, dQ, lse and D are indexed by local rows.
#include <cmath>

#include "ops/attention_internal_cuda.h"
#include "ops/attention_tile_cuda.cuh"
#include "ops/seq_idx_cuda.cuh"

namespace nemotron::ops::attn {

namespace {

constexpr int kWarps = 4, kThreads = 32 * kWarps, kBlk = 64;  // 64 keys and 64 queries per tile
constexpr float kLog2e = 1.4426950408889634f;

struct BwdParams {
  const bf16 *q, *k, *v, *dout;
  const float *lse, *D;
  bf16 *dq, *dk, *dv;
  float *dk_part, *dv_part;  // split > 1: float32 partials [split, B, T, nkv, hd]
  const int32_t* seq;        // seq_idx [B, Tk] (PACKED instances only)
  int64_t T, Tk, off, nq, nkv;  // T query rows, Tk keys, off = Tk - T
  int hd, split;
  float scale, scale_log2;
};

template <int KHD>
constexpr int tile_bytes() { return kBlk * KHD * 2; }
template <int KHD>
constexpr int dkdv_smem_bytes() { return 2 * tile_bytes<KHD>() + 2 * (2 * tile_bytes<KHD>() + 2 * kBlk * 4); }
template <int KHD>
constexpr int dq_smem_bytes() { return 6 * tile_bytes<KHD>(); }

template <int KHD, bool PACKED>
__global__ void __launch_bounds__(kThreads, 2) flash_bwd_dkdv_kernel(BwdParams p) {
  constexpr int KC = KHD / 16;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sK = smem_u32(smem), sV = sK + tile_bytes<KHD>();
  // Buffer t: Q tile, dO tile, then lse and D (64 floats each).
  const uint32_t buf0 = sV + tile_bytes<KHD>();
  constexpr uint32_t kBufBytes = 2 * tile_bytes<KHD>() + 2 * kBlk * 4;
  const float* fsmem = reinterpret_cast<const float*>(smem);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int kb = blockIdx.x;  // key block 0 sees every query: scheduled first
  const int64_t j = blockIdx.y / p.split, part = blockIdx.y % p.split, b = blockIdx.z;
  const int64_t g = p.nq / p.nkv / p.split, h0 = j * g * p.split + part * g;  // this block's query heads
  const int64_t n0 = static_cast<int64_t>(kb) * kBlk;
  const int64_t ldq = p.nq * p.hd, ldk = p.nkv * p.hd;
  const int64_t kv_off = b * p.Tk * ldk + j * p.hd;
  const int64_t kw0 = n0 + warp * 16;  // this warp's first key
  const int64_t key0 = kw0 + (lane >> 2);
  // Packed: one past the last query (key position) that sees each of the thread's two keys, and
  // of the block.
  int64_t q_end[2] = {p.Tk, p.Tk}, q_stop = p.Tk;
  if constexpr (PACKED) {
    const int32_t* seq = p.seq + b * p.Tk;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int64_t key = key0 + 8 * r;
      q_end[r] = seq_end(seq, key < p.Tk ? key : p.Tk - 1, p.Tk);
    }
    q_stop = seq_end(seq, n0 + kBlk - 1 < p.Tk ? n0 + kBlk - 1 : p.Tk - 1, p.Tk);
  }
  // Local query blocks qb0 .. that see the block's keys (at least one: a block no query sees
  // runs one fully masked tile and writes zeros).
  const int qb0 = static_cast<int>((n0 > p.off ? n0 - p.off : 0) / kBlk);
  const int64_t q_last = q_stop - p.off;  // one past the last local query row that sees a key
  const int nqb_seen = static_cast<int>((q_last + kBlk - 1) / kBlk) - qb0;
  const int nqb = nqb_seen > 0 ? nqb_seen : 1;  // query blocks per head
  const int its = static_cast<int>(g) * nqb;

  load_tile<kBlk, KHD, kThreads>(sK, p.k + kv_off, ldk, n0, p.Tk, p.hd);
  load_tile<kBlk, KHD, kThreads>(sV, p.v + kv_off, ldk, n0, p.Tk, p.hd);
  auto issue = [&](int it) {
    const uint32_t buf = buf0 + (it & 1) * kBufBytes;
    const int64_t h = h0 + it / nqb, i0 = static_cast<int64_t>(qb0 + it % nqb) * kBlk;
    const int64_t q_off = b * p.T * ldq + h * p.hd;
    load_tile<kBlk, KHD, kThreads>(buf, p.q + q_off, ldq, i0, p.T, p.hd);
    load_tile<kBlk, KHD, kThreads>(buf + tile_bytes<KHD>(), p.dout + q_off, ldq, i0, p.T, p.hd);
    load_vec<kBlk, kThreads>(buf + 2 * tile_bytes<KHD>(), p.lse + (b * p.nq + h) * p.T, i0, p.T);
    load_vec<kBlk, kThreads>(buf + 2 * tile_bytes<KHD>() + kBlk * 4, p.D + (b * p.nq + h) * p.T, i0, p.T);
    cp_async_commit();
  };
  issue(0);

  float dk[KHD / 8][4], dv[KHD / 8][4];
#pragma unroll
  for (int i = 0; i < KHD / 8; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[i][e] = dv[i][e] = 0.0f;

  for (int it = 0; it < its; ++it) {
    if (it + 1 < its) {
      issue(it + 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const uint32_t sQ = buf0 + (it & 1) * kBufBytes, sO = sQ + tile_bytes<KHD>();
    const float* sL = fsmem + (sO + tile_bytes<KHD>() - smem_u32(smem)) / 4;
    const float* sD = sL + kBlk;
    const int64_t i0 = static_cast<int64_t>(qb0 + it % nqb) * kBlk, i0k = i0 + p.off;  // local, key position
#pragma unroll
    for (int sub = 0; sub < 2; ++sub) {
      const int64_t q_lo = i0k + sub * 32;
      if (q_lo + 31 < kw0) continue;  // every query of the sub-tile precedes every key of the warp
      float st[4][4], dpt[4][4];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) st[i][e] = dpt[i][e] = 0.0f;
#pragma unroll
      for (int kc = 0; kc < KC; ++kc) {
        uint32_t ak[4], av[4];
        ldsm_a<KHD>(ak, sK, warp * 16, kc, lane);
        ldsm_a<KHD>(av, sV, warp * 16, kc, lane);
#pragma unroll
        for (int np = 0; np < 2; ++np) {
          uint32_t bq[4], bo[4];
          ldsm_b_nk<KHD>(bq, sQ, sub * 32 + np * 16, kc, lane);
          ldsm_b_nk<KHD>(bo, sO, sub * 32 + np * 16, kc, lane);
          mma16816(st[2 * np], ak, bq[0], bq[1]);
          mma16816(st[2 * np + 1], ak, bq[2], bq[3]);
          mma16816(dpt[2 * np], av, bo[0], bo[1]);
          mma16816(dpt[2 * np + 1], av, bo[2], bo[3]);
        }
      }
      const bool diag = q_lo < kw0 + 15;
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int qc = sub * 32 + nt * 8 + 2 * (lane & 3) + (e & 1);  // query column in the tile
          float pv = exp2f(st[nt][e] * p.scale_log2 - sL[qc] * kLog2e);
          if (diag && key0 + (e >> 1) * 8 > i0k + qc) pv = 0.0f;
          if (PACKED && i0k + qc >= q_end[e >> 1]) pv = 0.0f;
          st[nt][e] = pv;
          dpt[nt][e] = pv * (dpt[nt][e] - sD[qc]);
        }
#pragma unroll
      for (int kk = 0; kk < 2; ++kk) {
        const uint32_t ap[4] = {pack_bf16(st[2 * kk][0], st[2 * kk][1]), pack_bf16(st[2 * kk][2], st[2 * kk][3]),
                                pack_bf16(st[2 * kk + 1][0], st[2 * kk + 1][1]),
                                pack_bf16(st[2 * kk + 1][2], st[2 * kk + 1][3])};
        const uint32_t as[4] = {pack_bf16(dpt[2 * kk][0], dpt[2 * kk][1]), pack_bf16(dpt[2 * kk][2], dpt[2 * kk][3]),
                                pack_bf16(dpt[2 * kk + 1][0], dpt[2 * kk + 1][1]),
                                pack_bf16(dpt[2 * kk + 1][2], dpt[2 * kk + 1][3])};
#pragma unroll
        for (int np = 0; np < KHD / 16; ++np) {
          uint32_t bo[4], bq[4];
          ldsm_b_kn<KHD>(bo, sO, sub * 32 + kk * 16, np, lane);
          ldsm_b_kn<KHD>(bq, sQ, sub * 32 + kk * 16, np, lane);
          mma16816(dv[2 * np], ap, bo[0], bo[1]);
          mma16816(dv[2 * np + 1], ap, bo[2], bo[3]);
          mma16816(dk[2 * np], as, bq[0], bq[1]);
          mma16816(dk[2 * np + 1], as, bq[2], bq[3]);
        }
      }
    }
    __syncthreads();  // the next iteration refills this buffer
  }
  if (p.split == 1) {
    store_strip<KHD / 8>(p.dv + kv_off, ldk, kw0, p.Tk, p.hd, dv, 1.0f, 1.0f, lane);
    store_strip<KHD / 8>(p.dk + kv_off, ldk, kw0, p.Tk, p.hd, dk, p.scale, p.scale, lane);
  } else {
    const int64_t part_off = part * (p.Tk * ldk * gridDim.z) + kv_off;
    store_strip_f32<KHD / 8>(p.dv_part + part_off, ldk, kw0, p.Tk, p.hd, dv, 1.0f, lane);
    store_strip_f32<KHD / 8>(p.dk_part + part_off, ldk, kw0, p.Tk, p.hd, dk, p.scale, lane);
  }
}

// dk = sum over the split's parts in order (deterministic), rounded once to bf16.
__global__ void sum_parts_kernel(const float* part, int split, int64_t n, bf16* out) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float acc = 0.0f;
  for (int s = 0; s < split; ++s) acc += part[s * n + i];
  out[i] = __float2bfloat16(acc);
}

// Splits a KV group's query heads over blocks when B * nkv key-block columns alone would leave
// SMs idle (few KV heads, e.g. nkv = 2): the smallest divisor of the group that gives 2 blocks per SM.
int head_split(int64_t blocks, int64_t g) {
  static int sms = [] {
    int dev = 0, n = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
    return n > 0 ? n : 132;
  }();
  for (int64_t s = 1; s <= g; ++s)
    if (g % s == 0 && blocks * s >= 2 * sms) return static_cast<int>(s);
  return static_cast<int>(g);
}

template <int KHD, bool PACKED>
__global__ void __launch_bounds__(kThreads, 2) flash_bwd_dq_kernel(BwdParams p) {
  constexpr int KC = KHD / 16;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sQ = smem_u32(smem), sO = sQ + tile_bytes<KHD>(), kv0 = sO + tile_bytes<KHD>();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t m0 = static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * kBlk;  // heavy blocks first
  const int64_t h = blockIdx.y, b = blockIdx.z, j = h / (p.nq / p.nkv);
  const int64_t ldq = p.nq * p.hd, ldk = p.nkv * p.hd;
  const int64_t q_off = b * p.T * ldq + h * p.hd, kv_off = b * p.Tk * ldk + j * p.hd;
  const int64_t m0k = m0 + p.off;  // the tile's first row as a key position
  const int64_t last_row = (m0 + kBlk < p.T ? m0 + kBlk : p.T) - 1 + p.off;
  const int nkb = static_cast<int>(last_row / kBlk) + 1;

  load_tile<kBlk, KHD, kThreads>(sQ, p.q + q_off, ldq, m0, p.T, p.hd);
  load_tile<kBlk, KHD, kThreads>(sO, p.dout + q_off, ldq, m0, p.T, p.hd);
  auto issue = [&](int kb) {
    const uint32_t buf = kv0 + (kb & 1) * 2 * tile_bytes<KHD>();
    load_tile<kBlk, KHD, kThreads>(buf, p.k + kv_off, ldk, static_cast<int64_t>(kb) * kBlk, p.Tk, p.hd);
    load_tile<kBlk, KHD, kThreads>(buf + tile_bytes<KHD>(), p.v + kv_off, ldk, static_cast<int64_t>(kb) * kBlk, p.Tk,
                                   p.hd);
    cp_async_commit();
  };
  const int64_t row0 = m0k + warp * 16 + (lane >> 2);  // key position of the thread's first row
  // Packed: first visible key of each of the thread's two rows, and the first key block needed.
  int64_t first_key[2] = {0, 0};
  int kb_min = 0;
  if constexpr (PACKED) {
    const int32_t* seq = p.seq + b * p.Tk;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int64_t row = row0 + 8 * r;
      first_key[r] = seq_first(seq, row < p.Tk ? row : p.Tk - 1);
    }
    kb_min = static_cast<int>(seq_first(seq, m0k) / kBlk);
  }
  issue(kb_min);

  float L2[2], Dr[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t row = row0 - p.off + 8 * r;  // local row
    L2[r] = row < p.T ? p.lse[(b * p.nq + h) * p.T + row] * kLog2e : 0.0f;
    Dr[r] = row < p.T ? p.D[(b * p.nq + h) * p.T + row] : 0.0f;
  }
  float dq[KHD / 8][4];
#pragma unroll
  for (int i = 0; i < KHD / 8; ++i) dq[i][0] = dq[i][1] = dq[i][2] = dq[i][3] = 0.0f;

  for (int kb = kb_min; kb < nkb; ++kb) {
    if (kb + 1 < nkb) {
      issue(kb + 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const uint32_t sK = kv0 + (kb & 1) * 2 * tile_bytes<KHD>(), sV = sK + tile_bytes<KHD>();
    const int64_t c0 = static_cast<int64_t>(kb) * kBlk;
    if (m0k + warp * 16 + 15 >= c0) {  // else every key of the block follows every row of the warp
      float s[kBlk / 8][4], dp[kBlk / 8][4];
#pragma unroll
      for (int i = 0; i < kBlk / 8; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[i][e] = dp[i][e] = 0.0f;
#pragma unroll
      for (int kc = 0; kc < KC; ++kc) {
        uint32_t aq[4], ao[4];
        ldsm_a<KHD>(aq, sQ, warp * 16, kc, lane);
        ldsm_a<KHD>(ao, sO, warp * 16, kc, lane);
#pragma unroll
        for (int np = 0; np < kBlk / 16; ++np) {
          uint32_t bk[4], bv[4];
          ldsm_b_nk<KHD>(bk, sK, np * 16, kc, lane);
          ldsm_b_nk<KHD>(bv, sV, np * 16, kc, lane);
          mma16816(s[2 * np], aq, bk[0], bk[1]);
          mma16816(s[2 * np + 1], aq, bk[2], bk[3]);
          mma16816(dp[2 * np], ao, bv[0], bv[1]);
          mma16816(dp[2 * np + 1], ao, bv[2], bv[3]);
        }
      }
      const bool diag = c0 + kBlk - 1 > m0k + warp * 16;
#pragma unroll
      for (int nt = 0; nt < kBlk / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float pv = exp2f(s[nt][e] * p.scale_log2 - L2[e >> 1]);
          if (diag && c0 + nt * 8 + 2 * (lane & 3) + (e & 1) > row0 + (e >> 1) * 8) pv = 0.0f;
          if (PACKED && c0 + nt * 8 + 2 * (lane & 3) + (e & 1) < first_key[e >> 1]) pv = 0.0f;
          s[nt][e] = pv * (dp[nt][e] - Dr[e >> 1]);  // dS
        }
#pragma unroll
      for (int kk = 0; kk < kBlk / 16; ++kk) {
        const uint32_t a[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]), pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                               pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                               pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
        for (int np = 0; np < KHD / 16; ++np) {
          uint32_t bk[4];
          ldsm_b_kn<KHD>(bk, sK, kk * 16, np, lane);
          mma16816(dq[2 * np], a, bk[0], bk[1]);
          mma16816(dq[2 * np + 1], a, bk[2], bk[3]);
        }
      }
    }
    __syncthreads();  // the next iteration refills this buffer
  }
  store_strip<KHD / 8>(p.dq + q_off, ldq, m0 + warp * 16, p.T, p.hd, dq, p.scale, p.scale, lane);
}

template <int KHD, bool PACKED>
cudaError_t launch(const AttentionCudaArgs& a, const float* D, cudaStream_t s) {
  constexpr int smem_kv = dkdv_smem_bytes<KHD>(), smem_q = dq_smem_bytes<KHD>();
  cudaError_t err =
      cudaFuncSetAttribute(flash_bwd_dkdv_kernel<KHD, PACKED>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_kv);
  if (err == cudaSuccess)
    err = cudaFuncSetAttribute(flash_bwd_dq_kernel<KHD, PACKED>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_q);
  if (err != cudaSuccess) return err;
  const float scale = 1.0f / sqrtf(static_cast<float>(a.hd));
  BwdParams p{static_cast<const bf16*>(a.q), static_cast<const bf16*>(a.k), static_cast<const bf16*>(a.v),
              static_cast<const bf16*>(a.dout), a.lse, D, static_cast<bf16*>(a.dq), static_cast<bf16*>(a.dk),
              static_cast<bf16*>(a.dv), nullptr, nullptr, a.seq_idx, a.T, a.Tk, a.Tk - a.T, a.nq, a.nkv,
              static_cast<int>(a.hd), 1, scale, scale * kLog2e};
  const unsigned nblk = static_cast<unsigned>((a.Tk + kBlk - 1) / kBlk);   // key blocks
  const unsigned nqblk = static_cast<unsigned>((a.T + kBlk - 1) / kBlk);   // query blocks
  p.split = head_split(static_cast<int64_t>(nblk) * a.nkv * a.B, a.nq / a.nkv);
  const int64_t n_kv = a.B * a.Tk * a.nkv * a.hd;
  if (p.split > 1) {
    err = cudaMallocAsync(reinterpret_cast<void**>(&p.dk_part), 2 * p.split * n_kv * sizeof(float), s);
    if (err != cudaSuccess) return err;
    p.dv_part = p.dk_part + p.split * n_kv;
  }
  flash_bwd_dkdv_kernel<KHD, PACKED><<<dim3(nblk, static_cast<unsigned>(a.nkv * p.split), static_cast<unsigned>(a.B)),
                               kThreads, smem_kv, s>>>(p);
  flash_bwd_dq_kernel<KHD, PACKED><<<dim3(nqblk, static_cast<unsigned>(a.nq), static_cast<unsigned>(a.B)), kThreads, smem_q, s>>>(p);
  if (p.split > 1) {
    const unsigned eb = static_cast<unsigned>((n_kv + 255) / 256);
    sum_parts_kernel<<<eb, 256, 0, s>>>(p.dk_part, p.split, n_kv, p.dk);
    sum_parts_kernel<<<eb, 256, 0, s>>>(p.dv_part, p.split, n_kv, p.dv);
  }
  err = cudaGetLastError();
  cudaError_t free_err = p.split > 1 ? cudaFreeAsync(p.dk_part, s) : cudaSuccess;
  return err != cudaSuccess ? err : free_err;
}

}  // namespace

cudaError_t flash_backward(const AttentionCudaArgs& a, const float* D, cudaStream_t s) {
  if (a.seq_idx) return a.hd <= 64 ? launch<64, true>(a, D, s) : launch<128, true>(a, D, s);
  return a.hd <= 64 ? launch<64, false>(a, D, s) : launch<128, false>(a, D, s);
}

}  // namespace nemotron::ops::attn
