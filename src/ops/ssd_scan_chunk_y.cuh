// The SSD scan's Y product (forward y, and backward's row dots r1 = dy . Y_ssm) as one kernel per
// (batch, chunk, group, block of heads), bf16 on tensor cores, for chunks of at most 128 tokens,
// P <= 64 and N <= 128 (the model shapes); ssd_scan_cuda.cu falls back to ProbY elsewhere.
//   Y_ssm[l, p] = el_l sum_n C[l, n] Sin[p, n] + sum_{s<=l} CB[l, s] exp(lam_l - lam_s) dt_s x[s, p]
// Why a kernel of its own: the tile-GEMM ProbY ran 64x64 tiles with k loops of 2-4 steps of 32,
// a fetch, two barriers and a shared-memory decay pass per step, at 5-8% of the tensor pipe (ncu,
// bench/results/ssd_scan_h100x1.log). Here the head-independent operands of a (chunk, group) item
// (CB and C) are read once per block of heads: CB's fragments stay in registers and are decayed
// per head in registers (dt_s folded into the factor, so x is a plain copy), C stays in shared
// memory; per head only x, Sin and three rows of 128 floats move, by cp.async, the next head's
// while this one computes. Warp w owns rows 16w .. 16w + 15 of the chunk and all P columns (the
// causal part runs w + 1 k steps of 16). C Sin^T runs first and its rows are scaled by el_l in
// float32 (the tile GEMM rounded C el_l to bf16). No atomics: r1's row sums run a fixed order.
// Measured (H200, dcf7d30, dense shape B=4 T=4096 nH=24 G=2, ms against the tile GEMMs in the same
// binary, NEMOTRON_SSD_FUSED=0): Y 0.115 vs 0.232, Y row dots 0.155 vs 0.234, dxb 0.156 vs 0.238
// (bench/results/ssd_scan.jsonl). Still far from the tensor pipe: ncu (bench/results/
// ssd_scan_fused_ncu_dcf7d30_h200x1.txt) shows 0.39-0.48 issued warps per scheduler at 24%
// occupancy (128 registers and 107 KB of shared memory: 2 blocks per SM) and DRAM at ~18%: latency
// and issue bound. Left: the causal part's imbalance (per head, warp 7 runs 16 k steps, warp 0
// nine, and the head's barrier waits for the slowest), the per-element decay's instructions, and
// occupancy (more warps per SM, or wgmma with the decayed tile in shared memory).
// Tried and dropped (ssd-scan 4b6d9ce, a30fd68; bench/results/ssd_scan_decay_split_h200x1.log):
// fewer exps in the causal part, the off-diagonal decay split at an anchor token a into
// exp(lam_l - lam_a) exp(lam_a - lam_s) (both <= 1), the column factors once per head in shared
// memory: per k block (2 exps per lane and k step instead of 8) or per warp (no exp in the loop,
// one multiply per element, the row factor applied once to the sum). Same time: ncu at locked
// clocks 146 / 182 / 185 us for Y / Y row dots / dxb against 141 / 182 / 186 here; fwd+bwd on
// the dense shape 1.164 / 1.165 / 1.168 ms (0 / 1 / 2) in one call. The exps are not the bound:
// ncu puts a third of the 8.2 cycles between a warp's issues on fixed-latency dependencies
// (each element's exp -> multiply -> convert -> HMMA chain), the rest on the barriers and loads.
#pragma once
#include <atomic>

#include "ops/ssd_scan_cuda_problems.cuh"

namespace nemotron::ops::ssd {

constexpr int kYQ = 128, kYP = 64, kYN = 128, kYThreads = 256;
// bf16 row strides padded by 16 bytes: the 16-byte rows of 8 consecutive tile rows that one
// ldmatrix reads land in distinct banks (272- and 144-byte strides).
constexpr int kYLdQ = kYQ + 8, kYLdP = kYP + 8, kYLdN = kYN + 8;

// kDxb = false: Y (above). kDxb = true: backward's dxb, the same shape transposed:
//   dxb[s, p] = w_s sum_n B[s, n] dSout[p, n] + sum_{l>=s} CB[l, s] exp(lam_l - lam_s) dy[l, p]
// (rows s; CB read through ldmatrix.trans; warp w runs the k steps w .. of the causal part), with
// ProbDxb's epilogue: dx = D dy + dt dxb, rx = x . dxb and rdd = dy . x per row.
struct ChunkYArgs {
  Dims d;
  Decay dk;
  const __nv_bfloat16 *x, *D, *cb;
  const __nv_bfloat16* bc;  // the group operand of the state part: C (Y) or B (dxb)
  const __nv_bfloat16* st;  // the heads' state operand: Sin (Y) or dSout (dxb)
  const __nv_bfloat16* dy;  // Y: set = backward (r1 = dy . Y_ssm per row), else forward (y = Y_ssm + D x)
  const float *dt, *lam;
  __nv_bfloat16* y;   // Y forward: y; dxb: dx
  float *r1, *r2;     // Y backward: r1; dxb: rx, rdd
  int heads_per_block;
};

// Shared-memory layout (bytes): C [kYQ][kYLdN], then two per-head stages; CB is first staged in
// stage 1 (its fragments go to registers before stage 1 takes head 1).
struct ChunkYSmem {
  static constexpr int kC = kYQ * kYLdN * 2;
  static constexpr int kX = kYQ * kYLdP * 2, kS = kYP * kYLdN * 2, kRow = kYQ * 4;
  static constexpr int kStage = kX + kS + 3 * kRow;  // x, Sin, lam, dt, el
  static constexpr int kCB = kYQ * kYLdQ * 2;
  static_assert(kCB <= kStage);
  static constexpr int kBytes = kC + 2 * kStage;
};

__device__ inline void cp_async4(void* smem_dst, const void* src) {
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(src));
}

// rows_alloc x kCols bf16 into s (row stride lds) from g (row stride ldg): cp.async where r < rows
// and c < cols (cols a multiple of 8), zeros elsewhere (padding must be finite: it meets masked
// zeros in the products). kCols is the tile's full width, a compile-time constant, so that the
// index split is a shift (the runtime division cost more issue slots than the copies).
template <int kCols>
__device__ inline void y_load_tile(__nv_bfloat16* s, int lds, const __nv_bfloat16* g, int64_t ldg, int rows_alloc,
                                   int rows, int cols) {
  constexpr int kPerRow = kCols / 8;
#pragma unroll 1
  for (int e = threadIdx.x; e < rows_alloc * kPerRow; e += kYThreads) {
    const int r = e / kPerRow, c = (e % kPerRow) * 8;
    __nv_bfloat16* dst = s + r * lds + c;
    if (r < rows && c < cols) cp_async16(dst, g + r * ldg + c);
    else *reinterpret_cast<uint4*>(dst) = make_uint4(0u, 0u, 0u, 0u);
  }
}

__device__ inline int round16(int v) { return (v + 15) / 16 * 16; }

template <bool kDxb, int kMinBlocks>
__global__ void __launch_bounds__(kYThreads, kMinBlocks) chunk_y_kernel(ChunkYArgs a) {
  extern __shared__ __align__(16) unsigned char y_smem[];
  using bf = __nv_bfloat16;
  const Dims& d = a.d;
  const int hbc = (d.hpg + a.heads_per_block - 1) / a.heads_per_block;
  int idx = static_cast<int>(blockIdx.x);
  const int hb = idx % hbc;
  idx /= hbc;
  const int g = idx % d.G;
  idx /= d.G;
  const int c = idx % d.nc, b = idx / d.nc;
  const int t0 = c * d.Q, L = min(d.Q, d.T - t0);
  const int h0 = g * d.hpg + hb * a.heads_per_block, nheads = min(a.heads_per_block, d.hpg - hb * a.heads_per_block);
  const int R = round16(L), N16 = round16(d.N), P16 = round16(d.P);
  // The per-head operand of the causal part (rows = tokens): x (Y) or dy (dxb); its row scale of
  // the state part: el (Y) or w (dxb).
  const bf* tok = kDxb ? a.dy : a.x;
  const float* row_scale = kDxb ? a.dk.w : a.dk.el;

  auto Gs = reinterpret_cast<bf(*)[kYLdN]>(y_smem);
  auto stage = [&](int st) { return y_smem + ChunkYSmem::kC + st * ChunkYSmem::kStage; };
  auto Xs = [&](int st) { return reinterpret_cast<bf(*)[kYLdP]>(stage(st)); };
  auto Ss = [&](int st) { return reinterpret_cast<bf(*)[kYLdN]>(stage(st) + ChunkYSmem::kX); };
  auto rows_of = [&](int st) { return reinterpret_cast<float*>(stage(st) + ChunkYSmem::kX + ChunkYSmem::kS); };
  // Head h's token operand, state operand and its lam, dt, row-scale rows (zeros past L) into stage st.
  auto load_head = [&](int st, int h) {
    y_load_tile<kYP>(&Xs(st)[0][0], kYLdP, tok + d.xi(b, t0, h), int64_t(d.nH) * d.P, R, L, d.P);
    y_load_tile<kYN>(&Ss(st)[0][0], kYLdN, a.st + (kDxb ? d.dsti(b, h, c) : d.sti(b, h, c)), d.N, P16, d.P, d.N);
    float* rows = rows_of(st);
    for (int t = threadIdx.x; t < kYQ; t += kYThreads) {
      if (t < L) {
        const int64_t i = d.lami(b, h, t0 + t);
        cp_async4(rows + t, a.lam + i), cp_async4(rows + kYQ + t, a.dt + d.dti(b, t0 + t, h));
        cp_async4(rows + 2 * kYQ + t, row_scale + i);
      } else {
        rows[t] = rows[kYQ + t] = rows[2 * kYQ + t] = 0.f;
      }
    }
  };

  // Prologue: CB (into stage 1) and the group operand, then head 0 into stage 0.
  y_load_tile<kYQ>(reinterpret_cast<bf*>(stage(1)), kYLdQ, a.cb + d.cbi(b, c, g), d.Qm, R, L, L);
  y_load_tile<kYN>(&Gs[0][0], kYLdN, a.bc + d.bci(b, t0, g), int64_t(d.G) * d.N, R, L, d.N);
  cp_async_commit();
  load_head(0, h0);
  cp_async_commit();
  cp_async_wait<1>();
  __syncthreads();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, tig = lane & 3;
  const int j8 = lane >> 3, r8 = lane & 7;
  const bool active = warp * 16 < L;
  const int nkc = R / 16;  // k steps of the causal part over the whole chunk
  const int row0 = warp * 16 + gq, row1 = row0 + 8;
  // This warp's 16 rows of CB (Y: k steps 0 .. warp) or of CB^T (dxb: k steps warp .. nkc - 1).
  auto causal_step = [&](int ks) { return kDxb ? ks >= warp && ks < nkc : ks <= warp; };
  uint32_t cbf[kYQ / 16][4];
  {
    auto CBs = reinterpret_cast<const bf(*)[kYLdQ]>(stage(1));
#pragma unroll
    for (int ks = 0; ks < kYQ / 16; ++ks) {
      if (!active || !causal_step(ks)) continue;
      if constexpr (kDxb) ldmatrix_x4(cbf[ks], &CBs[ks * 16 + (j8 >> 1) * 8 + r8][warp * 16 + (j8 & 1) * 8], true);
      else ldmatrix_x4(cbf[ks], &CBs[warp * 16 + (lane & 15)][ks * 16 + (lane >> 4) * 8], false);
    }
  }
  __syncthreads();  // stage 1 is free
  if (nheads > 1) load_head(1, h0 + 1);
  cp_async_commit();

  const int nks1 = N16 / 16, npairs = P16 / 16;
  for (int i = 0; i < nheads; ++i) {
    const int st = i & 1, h = h0 + i;
    cp_async_wait<1>();  // head i's group has landed
    __syncthreads();
    if (active) {
      auto X = Xs(st);
      auto S = Ss(st);
      const float* lam = rows_of(st);
      const float *dts = lam + kYQ, *scl = lam + 2 * kYQ;
      float acc[kYP / 8 * 4];
#pragma unroll
      for (int q = 0; q < kYP / 8 * 4; ++q) acc[q] = 0.f;
      // The state part: A = the group operand's rows (shared), B = the state [p][n] (k = n contiguous).
#pragma unroll
      for (int ks = 0; ks < kYN / 16; ++ks) {
        if (ks >= nks1) break;
        uint32_t af[4];
        ldmatrix_x4(af, &Gs[warp * 16 + (lane & 15)][ks * 16 + (lane >> 4) * 8], false);
#pragma unroll
        for (int jj = 0; jj < kYP / 16; ++jj) {
          if (jj >= npairs) break;
          uint32_t r[4];
          ldmatrix_x4(r, &S[jj * 16 + (j8 >> 1) * 8 + r8][ks * 16 + (j8 & 1) * 8], false);
          const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
          mma_bf16(acc + (2 * jj) * 4, af, b0);
          mma_bf16(acc + (2 * jj + 1) * 4, af, b1);
        }
      }
      const float sc0 = scl[row0], sc1 = scl[row1];
#pragma unroll
      for (int q = 0; q < kYP / 8 * 4; ++q) acc[q] *= (q & 2) ? sc1 : sc0;
      // The causal part, decayed in registers: Y: A[l, s] = CB[l, s] exp(lam_l - lam_s) dt_s (s <= l),
      // dxb: A[s, l] = CB[l, s] exp(lam_l - lam_s) (l >= s); B = the token operand [k][p].
      const float lam0 = lam[row0], lam1 = lam[row1];
#pragma unroll
      for (int ks = 0; ks < kYQ / 16; ++ks) {
        if (!causal_step(ks)) continue;
        // Only the diagonal step (and dxb's last, which may pass L) needs the causal mask.
        const bool masked = ks == warp || (kDxb && ks == nkc - 1);
        uint32_t af[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int row = (r & 1) ? row1 : row0, col = ks * 16 + 2 * tig + (r >> 1) * 8;
          const float lr = (r & 1) ? lam1 : lam0;
          __nv_bfloat162 v = *reinterpret_cast<const __nv_bfloat162*>(&cbf[ks][r]);
          const float2 f = __bfloat1622float2(v);
          float e[2];
#pragma unroll
          for (int u = 0; u < 2; ++u) {
            const int k = col + u;
            const float fv = u ? f.y : f.x;
            if constexpr (kDxb) e[u] = fv * __expf(lam[k] - lr);
            else e[u] = fv * __expf(lr - lam[k]) * dts[k];
            if (masked) e[u] = (kDxb ? k >= row && k < L : k <= row) ? e[u] : 0.f;
          }
          v = __floats2bfloat162_rn(e[0], e[1]);
          af[r] = *reinterpret_cast<const uint32_t*>(&v);
        }
#pragma unroll
        for (int jj = 0; jj < kYP / 16; ++jj) {
          if (jj >= npairs) break;
          uint32_t r[4];
          ldmatrix_x4(r, &X[ks * 16 + (j8 & 1) * 8 + r8][jj * 16 + (j8 >> 1) * 8], true);
          const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
          mma_bf16(acc + (2 * jj) * 4, af, b0);
          mma_bf16(acc + (2 * jj + 1) * 4, af, b1);
        }
      }
      // Epilogue. Y: y = Y_ssm + D x (x from the stage) or r1 = dy . Y_ssm; dxb: dx = D dy + dt dxb
      // (dy from the stage), rx = x . dxb, rdd = dy . x. Row sums: this lane's columns, then the
      // 4 lanes of the row in a fixed order.
      const bool rowdot = kDxb || a.dy;
      const float Dv = kDxb || !a.dy ? vec_io::to_f(a.D[h]) : 0.f;
      float dot[2] = {0.f, 0.f}, dot2[2] = {0.f, 0.f};
#pragma unroll
      for (int nt = 0; nt < kYP / 8; ++nt) {
        const int p = nt * 8 + 2 * tig;
        if (p >= d.P) break;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int row = half ? row1 : row0;
          if (row >= L) continue;
          const float v0 = acc[nt * 4 + 2 * half], v1 = acc[nt * 4 + 2 * half + 1];
          const int64_t at = d.xi(b, t0 + row, h) + p;
          const float2 s2 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&X[row][p]));
          if constexpr (kDxb) {
            const float2 x2 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(a.x + at));
            const float dtv = dts[row];
            *reinterpret_cast<__nv_bfloat162*>(a.y + at) =
                __floats2bfloat162_rn(Dv * s2.x + dtv * v0, Dv * s2.y + dtv * v1);
            dot[half] += x2.x * v0 + x2.y * v1, dot2[half] += x2.x * s2.x + x2.y * s2.y;
          } else if (a.dy) {
            const float2 g2 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(a.dy + at));
            dot[half] += g2.x * v0 + g2.y * v1;
          } else {
            *reinterpret_cast<__nv_bfloat162*>(a.y + at) = __floats2bfloat162_rn(v0 + Dv * s2.x, v1 + Dv * s2.y);
          }
        }
      }
      if (rowdot) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          dot[half] += __shfl_xor_sync(0xffffffffu, dot[half], 1);
          dot[half] += __shfl_xor_sync(0xffffffffu, dot[half], 2);
          dot2[half] += __shfl_xor_sync(0xffffffffu, dot2[half], 1);
          dot2[half] += __shfl_xor_sync(0xffffffffu, dot2[half], 2);
          const int row = half ? row1 : row0;
          if (tig == 0 && row < L) {  // P <= 64: one column tile (stride 1 in r1, rx, rdd)
            const int64_t at = d.lami(b, h, t0 + row);
            a.r1[at] = dot[half];
            if constexpr (kDxb) a.r2[at] = dot2[half];
          }
        }
      }
    }
    __syncthreads();  // stage st is free
    if (i + 2 < nheads) load_head(st, h + 2);
    cp_async_commit();
  }
  cp_async_wait<0>();
}

// Whether chunk_y_kernel takes this call (Y and dxb alike): bf16, 16-byte runs (P, N, Qm
// multiples of 8) and the tile envelope; the row dots' one column tile needs P <= kBN (n_tiles 1).
inline bool chunk_y_fits(const Dims& d, bool bf16) {
  return bf16 && d.vec && d.Q <= kYQ && d.P <= kYP && d.P <= kBN && d.N <= kYN;
}

template <bool kDxb>
cudaError_t launch_chunk_y(const ChunkYArgs& a, cudaStream_t s) {
  const Dims& d = a.d;
  const int hbc = (d.hpg + a.heads_per_block - 1) / a.heads_per_block;
  const int64_t blocks = int64_t(d.B) * d.nc * d.G * hbc;
  if (blocks == 0) return cudaSuccess;
  // The shared-memory attribute once per device (a process may drive several; setting it twice
  // in a race is harmless).
  static std::atomic<uint64_t> configured{0};
  int dev = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  const uint64_t bit = uint64_t(1) << (dev & 63);
  if (!(configured.load() & bit)) {
    const cudaError_t e =
        cudaFuncSetAttribute(chunk_y_kernel<kDxb, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, ChunkYSmem::kBytes);
    if (e != cudaSuccess) return e;
    configured.fetch_or(bit);
  }
  chunk_y_kernel<kDxb, 2><<<static_cast<unsigned>(blocks), kYThreads, ChunkYSmem::kBytes, s>>>(a);
  return cudaGetLastError();
}

}  // namespace nemotron::ops::ssd
