// A batched tile GEMM whose operands come from device functors, for the SSD scan's chunk products.
// Every product of the chunked scan is "per (batch, chunk, head or group) item: out[m, n] =
// sum over segments of sum_k a(seg, m, k) b(seg, k, n)", with the decay factors and causal masks
// folded into the operand loaders, several products concatenated along k as segments (a
// segment may carry its own elementwise scale, applied to its partial sum), and a block-wide
// epilogue over a float32 tile in shared memory (so row reductions stay deterministic).
// bf16 runs on tensor cores (mma.sync m16n8k16, float32 accumulation); float32 runs on SIMT FMAs.
//
// A problem type `Prob` provides: `using T`; `Item item(int idx)`; `int rows(it)`, `cols(it)`;
// `int nseg(it)`; `void k_range(it, seg, m0, n0, lo, hi)` (the segment's k range for this tile;
// lo a multiple of kBK); `bool a_kfast(seg)`, `b_kfast(seg)` (which index is contiguous in
// memory, for coalesced loads);
// `static constexpr bool kScaled` and `float scale(it, seg, m, n)`; `static constexpr int kMinBlocks`; `bool skip(it, m0, n0)`;
// loaders `a_run(it, seg, m, k, cnt, v)` / `b_run(it, seg, k, n, cnt, v)` filling v[0..8) with `cnt`
// consecutive elements along the contiguous index (zeros after); `a_src` / `b_src` (may return
// null) name runs that are a plain copy of T, which bf16 moves as raw 16-byte vectors;
// `void epilogue(it, Cs, m0, n0, rows, cols, tn)`.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

namespace nemotron::ops::ssd {

// Occupancy over registers: the kernels wait on operand loads far more than on the tensor cores,
// so 5 resident blocks (<= 96 registers, small spills) beat 4 (<= 128) and unbounded ones
// (measured on an H200, B=2 T=4096 nH=64 Q=128 forward: 0.85 vs 0.93 ms; 1.20 vs 1.35 ms before
// the state/bank changes). BK = 32 keeps the operand runs small enough for that bound.
#ifndef NM_SSD_MIN_BLOCKS
#define NM_SSD_MIN_BLOCKS 5
#endif
#ifndef NM_SSD_TILE_BK
#define NM_SSD_TILE_BK 32
#endif
constexpr int kBM = 64, kBN = 64, kBK = NM_SSD_TILE_BK, kThreads = 128;
constexpr int kCsLd = kBN + 4;
constexpr int kAcc = 32;  // accumulators per thread: a 64x64 tile over 128 threads

__device__ inline float to_f(float v) { return v; }
__device__ inline float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T> __device__ inline T from_f(float v);
template <> __device__ inline float from_f<float>(float v) { return v; }
template <> __device__ inline __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16(v); }

// Position (row, col) in the 64x64 tile of accumulator `idx` of this thread.
template <bool kMma>
__device__ inline void acc_pos(int idx, int& r, int& c) {
  const int tid = threadIdx.x;
  if constexpr (kMma) {
    const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, tig = lane & 3;
    const int i = idx >> 4, j = (idx >> 2) & 3, q = idx & 3;
    r = (warp >> 1) * 32 + i * 16 + g + (q >= 2 ? 8 : 0);
    c = (warp & 1) * 32 + j * 8 + 2 * tig + (q & 1);
  } else {
    r = (tid >> 4) + 8 * (idx >> 2);
    c = (tid & 15) + 16 * (idx & 3);
  }
}

__device__ inline uint32_t ld_pair(const __nv_bfloat16* p) { return *reinterpret_cast<const uint32_t*>(p); }

__device__ inline void mma_bf16(float* c, const uint32_t* a, const uint32_t* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// 8 raw bf16 kept in the first 4 words of v (the raw-copy path: no conversions).
template <class T>
__device__ inline void load_raw(const T* src, float* v) {
  const uint4 u = __ldg(reinterpret_cast<const uint4*>(src));
  v[0] = __uint_as_float(u.x), v[1] = __uint_as_float(u.y), v[2] = __uint_as_float(u.z), v[3] = __uint_as_float(u.w);
}

// Stores a run of 8 into a [rows][ld] tile at p: along the row (contiguous: one 16-byte store in
// bf16) or down the column. `raw`: v holds 8 bf16 already (bf16 tiles only).
template <class S>
__device__ inline void store_run(bool along_row, bool raw, S* p, int ld, const float* v) {
  if constexpr (std::is_same_v<S, __nv_bfloat16>) {
    uint4 u;
    if (raw) {
      u = make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]), __float_as_uint(v[3]));
    } else {
      __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
      for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
    }
    if (along_row) {
      *reinterpret_cast<uint4*>(p) = u;
    } else {
      const __nv_bfloat16* e = reinterpret_cast<const __nv_bfloat16*>(&u);
#pragma unroll
      for (int i = 0; i < 8; ++i) p[i * ld] = e[i];
    }
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) p[along_row ? i : i * ld] = v[i];
  }
}

template <class Prob>
__global__ void __launch_bounds__(kThreads, Prob::kMinBlocks) tile_gemm_kernel(Prob pr, int n_tiles) {
  using T = typename Prob::T;
  constexpr bool kMma = std::is_same_v<T, __nv_bfloat16>;
  using S = std::conditional_t<kMma, __nv_bfloat16, float>;
  constexpr int kLd = kMma ? kBK + 8 : kBK + 1;  // padding against bank conflicts
  // The operand tiles and the output tile share the memory: the output is written after the k loop.
  constexpr int kAB = 2 * kBM * kLd * static_cast<int>(sizeof(S)), kC = kBM * kCsLd * 4;
  __shared__ __align__(16) unsigned char smem[kAB > kC ? kAB : kC];
  auto As = reinterpret_cast<S (*)[kLd]>(smem);
  auto Bs = reinterpret_cast<S (*)[kLd]>(smem + kBM * kLd * sizeof(S));
  auto Cs = reinterpret_cast<float (*)[kCsLd]>(smem);

  const auto it = pr.item(static_cast<int>(blockIdx.x));
  const int M = pr.rows(it), Nc = pr.cols(it);
  const int tn = static_cast<int>(blockIdx.y) % n_tiles, tm = static_cast<int>(blockIdx.y) / n_tiles;
  const int m0 = tm * kBM, n0 = tn * kBN;
  if (m0 >= M || n0 >= Nc || pr.skip(it, m0, n0)) return;
  const int tid = threadIdx.x;

  float acc[kAcc], part[Prob::kScaled ? kAcc : 1];
  for (int i = 0; i < kAcc; ++i) acc[i] = 0.f;
  float* sum = Prob::kScaled ? part : acc;

  const int nseg = pr.nseg(it);
  for (int seg = 0; seg < nseg; ++seg) {
    int lo = 0, hi = 0;
    pr.k_range(it, seg, m0, n0, lo, hi);
    if (lo >= hi) continue;
    if constexpr (Prob::kScaled)
      for (int i = 0; i < kAcc; ++i) part[i] = 0.f;
    const bool akf = pr.a_kfast(seg), bkf = pr.b_kfast(seg);
    for (int k0 = lo; k0 < hi; k0 += kBK) {
      // Runs of 8 along the contiguous index, all loads before the stores. Runs down a column (m- or
      // n-contiguous operands) go to consecutive k across a warp, so their 8 scalar stores hit 16
      // different shared-memory words instead of one bank.
      constexpr int kRuns = kBM * kBK / 8 / kThreads;
      static_assert(kBN == kBM && kRuns * kThreads * 8 == kBM * kBK);
      float va[kRuns][8], vb[kRuns][8];
      int am[kRuns], ak[kRuns], bn[kRuns], bk[kRuns];
      bool araw[kRuns], braw[kRuns];  // v holds 8 raw bf16 (as 4 words), not 8 floats
#pragma unroll
      for (int q = 0; q < kRuns; ++q) {
        const int e = tid + q * kThreads;
        int m, k, cnt;
        if (akf) m = e / (kBK / 8), k = (e % (kBK / 8)) * 8, cnt = m0 + m < M ? min(8, hi - k0 - k) : 0;
        else k = e % kBK, m = (e / kBK) * 8, cnt = k0 + k < hi ? min(8, M - m0 - m) : 0;
        am[q] = m, ak[q] = k, araw[q] = false;
        if constexpr (kMma)
          if (cnt == 8 && pr.d.vec)
            if (const T* src = pr.a_src(it, seg, m0 + m, k0 + k)) araw[q] = true, load_raw(src, va[q]);
        if (araw[q]) {
        } else if (cnt > 0) pr.a_run(it, seg, m0 + m, k0 + k, cnt, va[q]);
        else
          for (int i = 0; i < 8; ++i) va[q][i] = 0.f;
        int n;
        if (bkf) n = e / (kBK / 8), k = (e % (kBK / 8)) * 8, cnt = n0 + n < Nc ? min(8, hi - k0 - k) : 0;
        else k = e % kBK, n = (e / kBK) * 8, cnt = k0 + k < hi ? min(8, Nc - n0 - n) : 0;
        bn[q] = n, bk[q] = k, braw[q] = false;
        if constexpr (kMma)
          if (cnt == 8 && pr.d.vec)
            if (const T* src = pr.b_src(it, seg, k0 + k, n0 + n)) braw[q] = true, load_raw(src, vb[q]);
        if (braw[q]) {
        } else if (cnt > 0) pr.b_run(it, seg, k0 + k, n0 + n, cnt, vb[q]);
        else
          for (int i = 0; i < 8; ++i) vb[q][i] = 0.f;
      }
#pragma unroll
      for (int q = 0; q < kRuns; ++q) {
        store_run<S>(akf, araw[q], &As[am[q]][ak[q]], kLd, va[q]);
        store_run<S>(bkf, braw[q], &Bs[bn[q]][bk[q]], kLd, vb[q]);
      }
      __syncthreads();
      if constexpr (kMma) {
        const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, tig = lane & 3;
        const int wr = (warp >> 1) * 32, wc = (warp & 1) * 32;
#pragma unroll
        for (int ks = 0; ks < kBK / 16; ++ks) {
          const int kk = ks * 16 + 2 * tig;
          uint32_t af[2][4], bfr[4][2];
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const int r = wr + i * 16 + g;
            af[i][0] = ld_pair(&As[r][kk]);
            af[i][1] = ld_pair(&As[r + 8][kk]);
            af[i][2] = ld_pair(&As[r][kk + 8]);
            af[i][3] = ld_pair(&As[r + 8][kk + 8]);
          }
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int n = wc + j * 8 + g;
            bfr[j][0] = ld_pair(&Bs[n][kk]);
            bfr[j][1] = ld_pair(&Bs[n][kk + 8]);
          }
#pragma unroll
          for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) mma_bf16(sum + (i * 4 + j) * 4, af[i], bfr[j]);
        }
      } else {
        const int tr = tid >> 4, tc = tid & 15;
#pragma unroll 4
        for (int k = 0; k < kBK; ++k) {
          float av[8], bv[4];
#pragma unroll
          for (int i = 0; i < 8; ++i) av[i] = As[tr + 8 * i][k];
#pragma unroll
          for (int j = 0; j < 4; ++j) bv[j] = Bs[tc + 16 * j][k];
#pragma unroll
          for (int i = 0; i < 8; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) sum[i * 4 + j] = fmaf(av[i], bv[j], sum[i * 4 + j]);
        }
      }
      __syncthreads();
    }
    if constexpr (Prob::kScaled) {
#pragma unroll
      for (int i = 0; i < kAcc; ++i) {
        int r, c;
        acc_pos<kMma>(i, r, c);
        if (m0 + r < M && n0 + c < Nc) acc[i] += pr.scale(it, seg, m0 + r, n0 + c) * part[i];
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kAcc; ++i) {
    int r, c;
    acc_pos<kMma>(i, r, c);
    Cs[r][c] = acc[i];
  }
  __syncthreads();
  pr.epilogue(it, Cs, m0, n0, M, Nc, tn);
}

// Row sums over the tile's valid columns of f(r, c) (tile coordinates), two threads per row, in a
// fixed order; `out(r, value)` is called once per valid row.
template <class F, class Out>
__device__ inline void tile_row_sums(int rows, int cols, F f, Out out) {
  const int r = threadIdx.x >> 1, half = threadIdx.x & 1;
  float s = 0.f;
  if (r < rows)
    for (int c = half; c < cols; c += 2) s += f(r, c);
  s += __shfl_xor_sync(0xffffffffu, s, 1);
  if (half == 0 && r < rows) out(r, s);
}

template <class Prob>
cudaError_t launch_tile_gemm(const Prob& pr, int64_t items, int64_t max_rows, int64_t max_cols, cudaStream_t s) {
  if (items == 0 || max_rows == 0 || max_cols == 0) return cudaSuccess;
  const int n_tiles = static_cast<int>((max_cols + kBN - 1) / kBN);
  const int m_tiles = static_cast<int>((max_rows + kBM - 1) / kBM);
  tile_gemm_kernel<Prob><<<dim3(static_cast<unsigned>(items), static_cast<unsigned>(m_tiles * n_tiles)), kThreads, 0,
                           s>>>(pr, n_tiles);
  return cudaGetLastError();
}

}  // namespace nemotron::ops::ssd
