// Flash attention forward, bf16 tensor cores. A block owns 64 x MS query rows of one (batch,
// head); each of its 4 warps owns 16 x MS rows and keeps their running max, partial sums and
// output accumulator in registers while 64-key blocks of K and V stream through shared memory:
// V's copy overlaps S = Q K^T and the softmax, the next K's copy overlaps O += P V. Key blocks run
// from the diagonal down, so only the first ones need the causal mask; query blocks with the most
// keys are scheduled first. Two 4-warp blocks share an SM, so one's softmax overlaps the other's
// MMAs (one 8-warp block keeps all warps in the same phase between its barriers). Scores live in
// the log2 domain (exp2f); lse is written in natural log. Packed rows (PACKED instance): each row
// also masks keys before its sequence's first token, and key blocks before the first row's
// sequence are skipped. Queries of a sequence's tail (T < Tk): query row i is key position
// i + off (off = Tk - T); masks and key ranges use key positions, Q, O and lse local rows.
#include <cmath>

#include "ops/attention_internal_cuda.h"
#include "ops/attention_tile_cuda.cuh"
#include "ops/seq_idx_cuda.cuh"

namespace nemotron::ops::attn {

namespace {

constexpr int kWarps = 4, kBN = 64, kThreads = 32 * kWarps;
constexpr int kDefaultStrips = 2;

struct FwdParams {
  const bf16 *q, *k, *v;
  bf16* o;
  float* lse;
  const int32_t* seq;  // seq_idx [B, Tk] (PACKED instances only)
  int64_t T, Tk, off, nq, nkv;  // T query rows, Tk keys, off = Tk - T
  int hd;
  float scale_log2;  // log2(e) / sqrt(hd)
};

// MS = 16-row strips per warp. MS = 1 keeps Q's fragments in registers; MS = 2 reads them from
// shared memory but shares every K/V fragment load between two strips (half the ldmatrix
// traffic per MMA).
template <int KHD, int MS>
constexpr int fwd_smem_bytes() { return (16 * kWarps * MS + 2 * kBN) * KHD * 2; }

template <int KHD, int MS, bool PACKED>
__global__ void __launch_bounds__(kThreads, 2) flash_fwd_kernel(FwdParams p) {
  constexpr int KC = KHD / 16, kBM = 16 * kWarps * MS;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sQ = smem_u32(smem), sK = sQ + kBM * KHD * 2, sV = sK + kBN * KHD * 2;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t m0 = static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * kBM;  // heavy blocks first
  const int64_t h = blockIdx.y, b = blockIdx.z, j = h / (p.nq / p.nkv);
  const int64_t ldq = p.nq * p.hd, ldk = p.nkv * p.hd;
  const bf16* Q = p.q + b * p.T * ldq + h * p.hd;
  const bf16* K = p.k + b * p.Tk * ldk + j * p.hd;
  const bf16* V = p.v + b * p.Tk * ldk + j * p.hd;
  const int64_t m0k = m0 + p.off;  // the tile's first row as a key position
  const int64_t last_row = (m0 + kBM < p.T ? m0 + kBM : p.T) - 1 + p.off;
  const int nkb = static_cast<int>(last_row / kBN) + 1;
  const int wrow = warp * 16 * MS;  // the warp's first row in the tile
  const int64_t row0 = m0k + wrow + (lane >> 2);  // strip m's rows (key positions): row0 + 16 m, + 8
  // Packed: first visible key of each of the thread's rows, and the first key block any row needs.
  int64_t first_key[MS][2] = {};
  int kb_min = 0;
  if constexpr (PACKED) {
    const int32_t* seq = p.seq + b * p.Tk;
#pragma unroll
    for (int m = 0; m < MS; ++m)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int64_t row = row0 + 16 * m + 8 * r;
        first_key[m][r] = seq_first(seq, row < p.Tk ? row : p.Tk - 1);
      }
    kb_min = static_cast<int>(seq_first(seq, m0k) / kBN);
  }

  load_tile<kBM, KHD, kThreads>(sQ, Q, ldq, m0, p.T, p.hd);
  load_tile<kBN, KHD, kThreads>(sK, K, ldk, static_cast<int64_t>(nkb - 1) * kBN, p.Tk, p.hd);
  cp_async_commit();

  uint32_t qf[MS == 1 ? KC : 1][4];
  float acc[MS][KHD / 8][4];
#pragma unroll
  for (int m = 0; m < MS; ++m)
#pragma unroll
    for (int i = 0; i < KHD / 8; ++i) acc[m][i][0] = acc[m][i][1] = acc[m][i][2] = acc[m][i][3] = 0.0f;
  float mrow[MS][2], lrow[MS][2];
#pragma unroll
  for (int m = 0; m < MS; ++m) mrow[m][0] = mrow[m][1] = -INFINITY, lrow[m][0] = lrow[m][1] = 0.0f;

  for (int kb = nkb - 1; kb >= kb_min; --kb) {
    cp_async_wait<0>();
    __syncthreads();  // K[kb] landed; every warp is done with the previous V
    if constexpr (MS == 1) {
      if (kb == nkb - 1) {
#pragma unroll
        for (int kc = 0; kc < KC; ++kc) ldsm_a<KHD>(qf[kc], sQ, wrow, kc, lane);
      }
    }
    load_tile<kBN, KHD, kThreads>(sV, V, ldk, static_cast<int64_t>(kb) * kBN, p.Tk, p.hd);
    cp_async_commit();

    float s[MS][kBN / 8][4];
#pragma unroll
    for (int m = 0; m < MS; ++m)
#pragma unroll
      for (int i = 0; i < kBN / 8; ++i) s[m][i][0] = s[m][i][1] = s[m][i][2] = s[m][i][3] = 0.0f;
#pragma unroll
    for (int kc = 0; kc < KC; ++kc) {
      uint32_t qa[MS][4];
#pragma unroll
      for (int m = 0; m < MS; ++m) {
        if constexpr (MS == 1) {
#pragma unroll
          for (int e = 0; e < 4; ++e) qa[m][e] = qf[kc][e];
        } else {
          ldsm_a<KHD>(qa[m], sQ, wrow + 16 * m, kc, lane);
        }
      }
#pragma unroll
      for (int np = 0; np < kBN / 16; ++np) {
        uint32_t bf[4];
        ldsm_b_nk<KHD>(bf, sK, np * 16, kc, lane);
#pragma unroll
        for (int m = 0; m < MS; ++m) {
          mma16816(s[m][2 * np], qa[m], bf[0], bf[1]);
          mma16816(s[m][2 * np + 1], qa[m], bf[2], bf[3]);
        }
      }
    }

    // Causal mask (keys past a row; this also covers keys >= Tk for every row < T).
    const int64_t col0 = static_cast<int64_t>(kb) * kBN + 2 * (lane & 3);
    const bool diag = static_cast<int64_t>(kb) * kBN + kBN - 1 > m0k + wrow;
#pragma unroll
    for (int m = 0; m < MS; ++m)
#pragma unroll
      for (int nt = 0; nt < kBN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float x = s[m][nt][e] * p.scale_log2;
          if (diag && col0 + nt * 8 + (e & 1) > row0 + 16 * m + (e >> 1) * 8) x = -INFINITY;
          if (PACKED && col0 + nt * 8 + (e & 1) < first_key[m][e >> 1]) x = -INFINITY;
          s[m][nt][e] = x;
        }

    // Online softmax: rows are shared by the 4 lanes of a quad.
#pragma unroll
    for (int m = 0; m < MS; ++m)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float mx = mrow[m][r];
#pragma unroll
        for (int nt = 0; nt < kBN / 8; ++nt) mx = fmaxf(mx, fmaxf(s[m][nt][2 * r], s[m][nt][2 * r + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float ref = mx == -INFINITY ? 0.0f : mx;  // a fully masked row so far: keep exp2 finite
        const float alpha = exp2f(mrow[m][r] - ref);
        mrow[m][r] = mx;
        float sum = 0.0f;
#pragma unroll
        for (int nt = 0; nt < kBN / 8; ++nt) {
          s[m][nt][2 * r] = exp2f(s[m][nt][2 * r] - ref);
          s[m][nt][2 * r + 1] = exp2f(s[m][nt][2 * r + 1] - ref);
          sum += s[m][nt][2 * r] + s[m][nt][2 * r + 1];
        }
        lrow[m][r] = lrow[m][r] * alpha + sum;  // per-lane partial; the quad is summed at the end
#pragma unroll
        for (int i = 0; i < KHD / 8; ++i) acc[m][i][2 * r] *= alpha, acc[m][i][2 * r + 1] *= alpha;
      }

    cp_async_wait<0>();
    __syncthreads();  // V[kb] landed; every warp is done with K[kb]
    if (kb > kb_min) {
      load_tile<kBN, KHD, kThreads>(sK, K, ldk, static_cast<int64_t>(kb - 1) * kBN, p.Tk, p.hd);
      cp_async_commit();
    }
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
      uint32_t a[MS][4];
#pragma unroll
      for (int m = 0; m < MS; ++m) {
        a[m][0] = pack_bf16(s[m][2 * kk][0], s[m][2 * kk][1]);
        a[m][1] = pack_bf16(s[m][2 * kk][2], s[m][2 * kk][3]);
        a[m][2] = pack_bf16(s[m][2 * kk + 1][0], s[m][2 * kk + 1][1]);
        a[m][3] = pack_bf16(s[m][2 * kk + 1][2], s[m][2 * kk + 1][3]);
      }
#pragma unroll
      for (int np = 0; np < KHD / 16; ++np) {
        uint32_t bf[4];
        ldsm_b_kn<KHD>(bf, sV, kk * 16, np, lane);
#pragma unroll
        for (int m = 0; m < MS; ++m) {
          mma16816(acc[m][2 * np], a[m], bf[0], bf[1]);
          mma16816(acc[m][2 * np + 1], a[m], bf[2], bf[3]);
        }
      }
    }
  }

  float* L = p.lse + (b * p.nq + h) * p.T;
  constexpr float kLn2 = 0.6931471805599453f;
#pragma unroll
  for (int m = 0; m < MS; ++m) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      lrow[m][r] += __shfl_xor_sync(0xffffffffu, lrow[m][r], 1);
      lrow[m][r] += __shfl_xor_sync(0xffffffffu, lrow[m][r], 2);
    }
    store_strip<KHD / 8>(p.o + b * p.T * ldq + h * p.hd, ldq, m0 + wrow + 16 * m, p.T, p.hd, acc[m],
                         1.0f / lrow[m][0], 1.0f / lrow[m][1], lane);
    if ((lane & 3) == 0) {
      const int64_t r0 = row0 - p.off + 16 * m;  // local row
      if (r0 < p.T) L[r0] = mrow[m][0] * kLn2 + logf(lrow[m][0]);
      if (r0 + 8 < p.T) L[r0 + 8] = mrow[m][1] * kLn2 + logf(lrow[m][1]);
    }
  }
}

template <int KHD, int MS, bool PACKED>
cudaError_t launch_instance(const AttentionCudaArgs& a, cudaStream_t s) {
  constexpr int smem = fwd_smem_bytes<KHD, MS>(), kBM = 16 * kWarps * MS;
  cudaError_t err =
      cudaFuncSetAttribute(flash_fwd_kernel<KHD, MS, PACKED>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  FwdParams p{static_cast<const bf16*>(a.q), static_cast<const bf16*>(a.k), static_cast<const bf16*>(a.v),
              static_cast<bf16*>(a.o), a.lse, a.seq_idx, a.T, a.Tk, a.Tk - a.T, a.nq, a.nkv, static_cast<int>(a.hd),
              1.4426950408889634f / sqrtf(static_cast<float>(a.hd))};
  const dim3 grid(static_cast<unsigned>((a.T + kBM - 1) / kBM), static_cast<unsigned>(a.nq), static_cast<unsigned>(a.B));
  flash_fwd_kernel<KHD, MS, PACKED><<<grid, kThreads, smem, s>>>(p);
  return cudaGetLastError();
}

template <int KHD, int MS>
cudaError_t launch(const AttentionCudaArgs& a, cudaStream_t s) {
  return a.seq_idx ? launch_instance<KHD, MS, true>(a, s) : launch_instance<KHD, MS, false>(a, s);
}

}  // namespace

cudaError_t flash_forward(const AttentionCudaArgs& a, cudaStream_t s, int strips) {
  if (strips == 0) strips = kDefaultStrips;
  if (a.hd <= 64) return strips == 1 ? launch<64, 1>(a, s) : launch<64, 2>(a, s);
  return strips == 1 ? launch<128, 1>(a, s) : launch<128, 2>(a, s);
}

}  // namespace nemotron::ops::attn
