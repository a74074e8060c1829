// Flash attention forward, bf16 tensor cores. A block owns 128 query rows of one (batch, head);
// each of its 8 warps owns 16 rows and keeps their Q fragments, running max, partial sums and
// output accumulator in registers while 64-key blocks of K and V stream through shared memory:
// V's copy overlaps S = Q K^T and the softmax, the next K's copy overlaps O += P V. Key blocks run
// from the diagonal down, so only the first ones need the causal mask; query blocks with the most
// keys are scheduled first. Scores live in the log2 domain (exp2f), lse is written in natural log.
#include <cmath>

#include "ops/attention_internal_cuda.h"
#include "ops/attention_tile_cuda.cuh"

namespace nemotron::ops::attn {

namespace {

constexpr int kWarps = 8, kBM = 16 * kWarps, kBN = 64, kThreads = 32 * kWarps;

struct FwdParams {
  const bf16 *q, *k, *v;
  bf16* o;
  float* lse;
  int64_t T, nq, nkv;
  int hd;
  float scale_log2;  // log2(e) / sqrt(hd)
};

template <int KHD>
constexpr int fwd_smem_bytes() { return (kBM + 2 * kBN) * KHD * 2; }

template <int KHD>
__global__ void __launch_bounds__(kThreads, 1) flash_fwd_kernel(FwdParams p) {
  constexpr int KC = KHD / 16;  // k-steps over the head dim
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sQ = smem_u32(smem), sK = sQ + kBM * KHD * 2, sV = sK + kBN * KHD * 2;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t m0 = static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * kBM;  // heavy blocks first
  const int64_t h = blockIdx.y, b = blockIdx.z, j = h / (p.nq / p.nkv);
  const int64_t ldq = p.nq * p.hd, ldk = p.nkv * p.hd;
  const bf16* Q = p.q + b * p.T * ldq + h * p.hd;
  const bf16* K = p.k + b * p.T * ldk + j * p.hd;
  const bf16* V = p.v + b * p.T * ldk + j * p.hd;
  const int64_t last_row = (m0 + kBM < p.T ? m0 + kBM : p.T) - 1;
  const int nkb = static_cast<int>(last_row / kBN) + 1;

  load_tile<kBM, KHD, kThreads>(sQ, Q, ldq, m0, p.T, p.hd);
  load_tile<kBN, KHD, kThreads>(sK, K, ldk, static_cast<int64_t>(nkb - 1) * kBN, p.T, p.hd);
  cp_async_commit();

  uint32_t qf[KC][4];
  float acc[KHD / 8][4];
#pragma unroll
  for (int i = 0; i < KHD / 8; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
  float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.0f, 0.0f};
  const int64_t row0 = m0 + warp * 16 + (lane >> 2);  // this lane's rows: row0, row0 + 8

  for (int kb = nkb - 1; kb >= 0; --kb) {
    cp_async_wait<0>();
    __syncthreads();  // K[kb] landed; every warp is done with the previous V
    if (kb == nkb - 1) {
#pragma unroll
      for (int kc = 0; kc < KC; ++kc) ldsm_a<KHD>(qf[kc], sQ, warp * 16, kc, lane);
    }
    load_tile<kBN, KHD, kThreads>(sV, V, ldk, static_cast<int64_t>(kb) * kBN, p.T, p.hd);
    cp_async_commit();

    float s[kBN / 8][4];
#pragma unroll
    for (int i = 0; i < kBN / 8; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
#pragma unroll
    for (int kc = 0; kc < KC; ++kc) {
#pragma unroll
      for (int np = 0; np < kBN / 16; ++np) {
        uint32_t bf[4];
        ldsm_b_nk<KHD>(bf, sK, np * 16, kc, lane);
        mma16816(s[2 * np], qf[kc], bf[0], bf[1]);
        mma16816(s[2 * np + 1], qf[kc], bf[2], bf[3]);
      }
    }

    // Causal mask (keys past a row; this also covers keys >= T for every row < T).
    const int64_t col0 = static_cast<int64_t>(kb) * kBN + 2 * (lane & 3);
    const bool diag = static_cast<int64_t>(kb) * kBN + kBN - 1 > m0 + warp * 16;
#pragma unroll
    for (int nt = 0; nt < kBN / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = s[nt][e] * p.scale_log2;
        if (diag && col0 + nt * 8 + (e & 1) > row0 + (e >> 1) * 8) x = -INFINITY;
        s[nt][e] = x;
      }

    // Online softmax: rows are shared by the 4 lanes of a quad.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = mrow[r];
#pragma unroll
      for (int nt = 0; nt < kBN / 8; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float ref = mx == -INFINITY ? 0.0f : mx;  // a fully masked row so far: keep exp2 finite
      const float alpha = exp2f(mrow[r] - ref);
      mrow[r] = mx;
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < kBN / 8; ++nt) {
        s[nt][2 * r] = exp2f(s[nt][2 * r] - ref);
        s[nt][2 * r + 1] = exp2f(s[nt][2 * r + 1] - ref);
        sum += s[nt][2 * r] + s[nt][2 * r + 1];
      }
      lrow[r] = lrow[r] * alpha + sum;  // per-lane partial; the quad is summed at the end
#pragma unroll
      for (int i = 0; i < KHD / 8; ++i) acc[i][2 * r] *= alpha, acc[i][2 * r + 1] *= alpha;
    }

    cp_async_wait<0>();
    __syncthreads();  // V[kb] landed; every warp is done with K[kb]
    if (kb > 0) {
      load_tile<kBN, KHD, kThreads>(sK, K, ldk, static_cast<int64_t>(kb - 1) * kBN, p.T, p.hd);
      cp_async_commit();
    }
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
      const uint32_t a[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]), pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                             pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                             pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int np = 0; np < KHD / 16; ++np) {
        uint32_t bf[4];
        ldsm_b_kn<KHD>(bf, sV, kk * 16, np, lane);
        mma16816(acc[2 * np], a, bf[0], bf[1]);
        mma16816(acc[2 * np + 1], a, bf[2], bf[3]);
      }
    }
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    lrow[r] += __shfl_xor_sync(0xffffffffu, lrow[r], 1);
    lrow[r] += __shfl_xor_sync(0xffffffffu, lrow[r], 2);
  }
  store_strip<KHD / 8>(p.o + b * p.T * ldq + h * p.hd, ldq, m0 + warp * 16, p.T, p.hd, acc, 1.0f / lrow[0],
                       1.0f / lrow[1], lane);
  if ((lane & 3) == 0) {
    float* L = p.lse + (b * p.nq + h) * p.T;
    constexpr float kLn2 = 0.6931471805599453f;
    if (row0 < p.T) L[row0] = mrow[0] * kLn2 + logf(lrow[0]);
    if (row0 + 8 < p.T) L[row0 + 8] = mrow[1] * kLn2 + logf(lrow[1]);
  }
}

template <int KHD>
cudaError_t launch(const AttentionCudaArgs& a, cudaStream_t s) {
  constexpr int smem = fwd_smem_bytes<KHD>();
  cudaError_t err = cudaFuncSetAttribute(flash_fwd_kernel<KHD>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  FwdParams p{static_cast<const bf16*>(a.q), static_cast<const bf16*>(a.k), static_cast<const bf16*>(a.v),
              static_cast<bf16*>(a.o), a.lse, a.T, a.nq, a.nkv, static_cast<int>(a.hd),
              1.4426950408889634f / sqrtf(static_cast<float>(a.hd))};
  const dim3 grid(static_cast<unsigned>((a.T + kBM - 1) / kBM), static_cast<unsigned>(a.nq), static_cast<unsigned>(a.B));
  flash_fwd_kernel<KHD><<<grid, kThreads, smem, s>>>(p);
  return cudaGetLastError();
}

}  // namespace

cudaError_t flash_forward(const AttentionCudaArgs& a, cudaStream_t s) {
  return a.hd <= 64 ? launch<64>(a, s) : launch<128>(a, s);
}

}  // namespace nemotron::ops::attn
