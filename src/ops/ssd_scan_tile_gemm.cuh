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
// lo a multiple of kBK); `bool a_kfast(it, seg)`, `b_kfast(it, seg)` (which index is contiguous in
// memory, for coalesced loads);
// `static constexpr int kStages` (shared-memory stages of the bf16 k loop);
// `static constexpr bool kScaled` with `float key(it, seg, idx)` and `float scale(key_m, key_n, m, n)`; `static constexpr int kMinBlocks`; `bool skip(it, m0, n0)`;
// loaders `a_run(it, seg, m, k, cnt, v)` / `b_run(it, seg, k, n, cnt, v)` filling v[0..8) with `cnt`
// consecutive elements along the contiguous index (zeros after); `a_src` / `b_src` (may return
// null) name full runs that are a copy of T times `a_mul` / `b_mul`, which bf16 moves as raw
// 16-byte vectors and scales when it stores them;
// `void epilogue(it, Cs, m0, n0, rows, cols, tn)`; `kStageLam` with `lam_row(it)`: the item's
// chunk of lam is copied to shared memory first (it.lam_s); `a_has_post(seg)` with
// `a_post(it, seg, m, k, v)`: the a_src runs of that segment are finished (masked, scaled) by a_post
// when stored, after the tensor cores' step.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "ops/cuda_vec_io.cuh"

namespace nemotron::ops::ssd {

// Occupancy over registers: the kernels wait on operand loads more than on the tensor cores, so
// 5 resident blocks (<= 96 registers, small spills) beat 4 (<= 128) and 3 (measured on the H200,
// dense shape B=4 T=4096 nH=24 G=2 Q=128, fwd+bwd: 2.10 / 2.21 / 2.38 ms; BK = 64 at 4 or 3 blocks:
// 2.42 / 2.60 ms). dCB, with twice the accumulators, runs 3 blocks (1.67 ms vs 1.74 at 4).
#ifndef NM_SSD_MIN_BLOCKS
#define NM_SSD_MIN_BLOCKS 5
#endif
// Rows of the Y and dxb tiles (NM_SSD_WIDE) and of the dC/dB tiles (NM_SSD_WIDE_DBC): 1 = 64 rows
// over 128 threads, 2 = 128 rows over 256 threads (B operands fetched once per 128 rows, but 2
// blocks/SM). Measured on the H200, dense shape (B=4 T=4096 nH=24 G=2): fwd+bwd 1.601 ms at 1,
// 1.633 ms at 2 (forward 0.400 -> 0.393, backward 1.201 -> 1.240); both pass the ssd_scan cases.
#ifndef NM_SSD_WIDE
#define NM_SSD_WIDE 1
#endif
#ifndef NM_SSD_WIDE_DBC
#define NM_SSD_WIDE_DBC NM_SSD_WIDE
#endif
#ifndef NM_SSD_DCB_BLOCKS
#define NM_SSD_DCB_BLOCKS 3
#endif
#ifndef NM_SSD_TILE_BK
#define NM_SSD_TILE_BK 32
#endif
// Shared-memory stages of the bf16 k loop, per problem (Prob::kStages; float32 always runs 1).
// 1: operand runs fetched into registers one k step ahead and stored (scaled) after the tensor
// cores' step. >= 2: plain runs go straight to shared memory by cp.async, kStages - 1 steps
// ahead, with no registers held for them; a run that needs a factor or a mask is finished in
// place by the thread that fetched it, once it lands. Measured on the H100 (dense shape, ms per
// phase, 1 / 2 / 3 / 4 stages): Y 0.234 / 0.258 / 0.329 / 0.416, dxb 0.243 / 0.260 / 0.276 /
// 0.314, chunk_state 0.083 / 0.090 / 0.080 / 0.091, Z 0.086 / 0.092 / 0.079 / 0.091, dCB 0.149 /
// 0.134 / 0.123 / 0.133, dC+dB 0.245 / 0.238 / 0.231 / 0.235: Y and dxb, whose A runs all take
// the causal decay (a second shared-memory pass, and spills in Y), keep 1 (NM_SSD_STAGES, CB
// too: no difference); chunk_state/Z, dCB and dC+dB run NM_SSD_STAGES_PIPE = 3.
#ifndef NM_SSD_STAGES
#define NM_SSD_STAGES 1
#endif
#ifndef NM_SSD_STAGES_PIPE
#define NM_SSD_STAGES_PIPE 3
#endif
constexpr int kBM = 64, kBN = 64, kBK = NM_SSD_TILE_BK, kThreads = 128;
constexpr int kCsLd = kBN + 4;
constexpr int kAcc = 32;  // accumulators per thread: a 64x64 tile over 128 threads (and 128x64 over 256)

using vec_io::from_f;
using vec_io::to_f;

// Position (row, col) in the tile (64 or 128 rows, 64 columns; kNT threads) of accumulator `idx`
// of this thread. Tensor cores: each warp holds a 32x32 quarter of 64 rows.
template <bool kMma, int kNT>
__device__ inline void acc_pos(int idx, int& r, int& c) {
  const int tid = threadIdx.x;
  if constexpr (kMma) {
    const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, tig = lane & 3;
    const int i = idx >> 4, j = (idx >> 2) & 3, q = idx & 3;
    r = (warp >> 1) * 32 + i * 16 + g + (q >= 2 ? 8 : 0);
    c = (warp & 1) * 32 + j * 8 + 2 * tig + (q & 1);
  } else {
    r = (tid >> 4) + (kNT / 16) * (idx >> 2);
    c = (tid & 15) + 16 * (idx & 3);
  }
}

__device__ inline void mma_bf16(float* c, const uint32_t* a, const uint32_t* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// A run of 8 operand values as the shared tile stores them: 8 bf16 packed in 4 words (tensor-core
// tiles) or 8 floats. Runs are fetched into registers one k step ahead of their store.
template <class S>
struct Run;
template <>
struct Run<__nv_bfloat16> {
  uint4 u;
  float mul;  // applied at the store (the factor of an a_src / b_src run), 1 = none
  bool post;  // a_post applies at the store (A runs of a segment with a_post)
};
template <>
struct Run<float> {
  float v[8];
};

__device__ inline void pack(Run<__nv_bfloat16>& r, const float* v) {
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&r.u);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
  r.mul = 1.f, r.post = false;
}
__device__ inline void unpack(const Run<__nv_bfloat16>& r, float* v) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&r.u);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    v[2 * i] = f.x, v[2 * i + 1] = f.y;
  }
}
// The run's 8 bf16 times its factor, rounded back to bf16.
__device__ inline void apply_mul(Run<__nv_bfloat16>& r) {
  if (r.mul == 1.f) return;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&r.u);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    h[i] = __floats2bfloat162_rn(f.x * r.mul, f.y * r.mul);
  }
}
__device__ inline void pack(Run<float>& r, const float* v) {
#pragma unroll
  for (int i = 0; i < 8; ++i) r.v[i] = v[i];
}

// Stores a run into a [rows][ld] tile at p: along the row, or down the column (float tiles). The
// bf16 tiles always take runs along their rows (one 16-byte store): an operand whose memory runs
// along m or n is kept transposed, [k][m] or [k][n], and read through ldmatrix.trans.
__device__ inline void store_run(const Run<__nv_bfloat16>& r, __nv_bfloat16* p) { *reinterpret_cast<uint4*>(p) = r.u; }
__device__ inline void store_run(bool along_row, const Run<float>& r, float* p, int ld) {
#pragma unroll
  for (int i = 0; i < 8; ++i) p[along_row ? i : i * ld] = r.v[i];
}

// Four 8x8 bf16 matrices from shared memory, lane l naming row l % 8 of matrix l / 8.
__device__ inline void ldmatrix_x4(uint32_t* r, const __nv_bfloat16* p, bool trans) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  if (trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

// 16 bytes global -> shared without registers (completes at cp_async_wait).
__device__ inline void cp_async16(void* smem_dst, const void* src) {
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ inline void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// f(integral_constant<int, I>) for I in [I0, I1), unrolled at compile time.
template <int I0, int I1, class F>
__device__ inline void static_for(F&& f) {
  if constexpr (I0 < I1) {
    f(std::integral_constant<int, I0>{});
    static_for<I0 + 1, I1>(f);
  }
}

template <class Prob>
__global__ void __launch_bounds__(kThreads * Prob::kWide, Prob::kMinBlocks) tile_gemm_kernel(Prob pr, int n_tiles) {
  using T = typename Prob::T;
  constexpr bool kMma = std::is_same_v<T, __nv_bfloat16>;
  using S = std::conditional_t<kMma, __nv_bfloat16, float>;
  // Padding against bank conflicts: 16-byte ldmatrix rows of 8 consecutive tile rows land in
  // distinct banks (80- and 144-byte strides).
  // kWide = 2: 128-row tiles over 256 threads (8 warps), so the B operand is fetched once for
  // twice the rows.
  constexpr int kTM = kBM * Prob::kWide, kNT = kThreads * Prob::kWide;
  constexpr int kLd = kMma ? kBK + 8 : kBK + 1, kLdTA = kTM + 8, kLdTB = kBN + 8;
  constexpr int kTileA = (kMma && kBK * kLdTA > kTM * kLd ? kBK * kLdTA : kTM * kLd) * static_cast<int>(sizeof(S));
  constexpr int kTileB = (kMma && kBK * kLdTB > kBN * kLd ? kBK * kLdTB : kBN * kLd) * static_cast<int>(sizeof(S));
  // The operand tiles and the output tile share the memory: the output is written after the k loop.
  constexpr int kPipe = kMma ? Prob::kStages : 1;  // shared-memory stages (float32: 1)
  constexpr int kAB = (kTileA + kTileB) * kPipe, kC = kTM * kCsLd * 4;
  __shared__ __align__(16) unsigned char smem[kAB > kC ? kAB : kC];
  auto As = reinterpret_cast<S (*)[kLd]>(smem);  // [m][k]
  auto Bs = reinterpret_cast<S (*)[kLd]>(smem + kTileA);  // [n][k]
  auto AsT = reinterpret_cast<S (*)[kLdTA]>(smem);  // [k][m] (bf16, m-contiguous operand)
  auto BsT = reinterpret_cast<S (*)[kLdTB]>(smem + kTileA);  // [k][n]
  auto Cs = reinterpret_cast<float (*)[kCsLd]>(smem);

  auto it = pr.item(static_cast<int>(blockIdx.x));
  const int M = pr.rows(it), Nc = pr.cols(it);
  const int tn = static_cast<int>(blockIdx.y) % n_tiles, tm = static_cast<int>(blockIdx.y) / n_tiles;
  const int m0 = tm * kTM, n0 = tn * kBN;
  if (m0 >= M || n0 >= Nc || pr.skip(it, m0, n0)) return;
  const int tid = threadIdx.x;
  if constexpr (Prob::kStageLam) {  // the item's chunk of lam, for loaders that read it per element
    extern __shared__ float lam_sh[];
    const float* src = pr.lam_row(it);
    for (int t = tid; t < it.L; t += kNT) lam_sh[t] = src[t];
    __syncthreads();
    it.lam_s = lam_sh;
  }

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
    const bool akf = pr.a_kfast(it, seg), bkf = pr.b_kfast(it, seg);
    // Runs of 8 along the contiguous index. bf16: runs along m or n go to consecutive lanes
    // (coalesced loads, rows of the transposed tile). float: runs down a column go to consecutive k
    // across a warp, so their 8 scalar stores hit 16 different shared-memory words, not one bank.
    constexpr int kRunsA = kTM * kBK / 8 / kNT, kRunsB = kBN * kBK / 8 / kNT;
    static_assert(kRunsA * kNT * 8 == kTM * kBK && kRunsB * kNT * 8 == kBN * kBK && kRunsB <= kRunsA);
    // Tile position (row, k) of run q of this thread (rows: the operand's m or n, `rows` of them):
    // cheap to recompute, so not kept in registers.
    auto run_pos = [&](bool kfast, int rows, int q, int& row, int& k) {
      const int e = tid + q * kNT;
      if (kfast) row = e / (kBK / 8), k = (e % (kBK / 8)) * 8;
      else if (kMma) k = e / (rows / 8), row = (e % (rows / 8)) * 8;
      else k = e % kBK, row = (e / kBK) * 8;
    };
    // One k step of the tensor cores (bf16) or SIMT FMAs (float32) on the operand tiles of stage st.
    auto compute = [&](int st) {
      unsigned char* base = smem + st * (kTileA + kTileB);
      auto As = reinterpret_cast<S (*)[kLd]>(base);
      auto Bs = reinterpret_cast<S (*)[kLd]>(base + kTileA);
      auto AsT = reinterpret_cast<S (*)[kLdTA]>(base);
      auto BsT = reinterpret_cast<S (*)[kLdTB]>(base + kTileA);
      if constexpr (kMma) {
        const int warp = tid >> 5, lane = tid & 31;
        const int wr = (warp >> 1) * 32, wc = (warp & 1) * 32;
        const int j = lane >> 3, r8 = lane & 7;  // this lane's matrix and row for ldmatrix
#pragma unroll
        for (int ks = 0; ks < kBK / 16; ++ks) {
          uint32_t af[2][4], bfr[4][2];
#pragma unroll
          for (int i = 0; i < 2; ++i) {  // a0..a3: (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15)
            if (akf) ldmatrix_x4(af[i], &As[wr + i * 16 + (lane & 15)][ks * 16 + (lane >> 4) * 8], false);
            else ldmatrix_x4(af[i], &AsT[ks * 16 + (j >> 1) * 8 + r8][wr + i * 16 + (j & 1) * 8], true);
          }
#pragma unroll
          for (int jj = 0; jj < 2; ++jj) {  // n blocks 2 jj and 2 jj + 1: (b0, b1) of each
            uint32_t r[4];
            const int nb = wc + (2 * jj + (j >> 1)) * 8, kb = ks * 16 + (j & 1) * 8;
            if (bkf) ldmatrix_x4(r, &Bs[nb + r8][kb], false);
            else ldmatrix_x4(r, &BsT[kb + r8][nb], true);
            bfr[2 * jj][0] = r[0], bfr[2 * jj][1] = r[1], bfr[2 * jj + 1][0] = r[2], bfr[2 * jj + 1][1] = r[3];
          }
#pragma unroll
          for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int jn = 0; jn < 4; ++jn) mma_bf16(sum + (i * 4 + jn) * 4, af[i], bfr[jn]);
        }
      } else {
        const int tr = tid >> 4, tc = tid & 15;
#pragma unroll 4
        for (int k = 0; k < kBK; ++k) {
          float av[8], bv[4];
#pragma unroll
          for (int i = 0; i < 8; ++i) av[i] = As[tr + (kNT / 16) * i][k];
#pragma unroll
          for (int j = 0; j < 4; ++j) bv[j] = Bs[tc + 16 * j][k];
#pragma unroll
          for (int i = 0; i < 8; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) sum[i * 4 + j] = fmaf(av[i], bv[j], sum[i * 4 + j]);
        }
      }
    };
    if constexpr (kPipe == 1) {
      Run<S> ra[kRunsA], rb[kRunsB];
      // Fetches the runs of the k step at k0 into ra, rb (bf16 plain copies as raw 16-byte vectors).
      auto fetch = [&](int k0) {
#pragma unroll
        for (int q = 0; q < kRunsA; ++q) {
          float v[8];
          int m, ka, n, kb;
          run_pos(akf, kTM, q, m, ka);
          run_pos(bkf, kBN, q, n, kb);
          int cnt = akf ? (m0 + m < M ? min(8, hi - k0 - ka) : 0) : (k0 + ka < hi ? min(8, M - m0 - m) : 0);
          const T* src = nullptr;
          if constexpr (kMma)
            if (cnt == 8 && pr.d.vec) src = pr.a_src(it, seg, m0 + m, k0 + ka);
          if constexpr (kMma) {
            if (src) {
              ra[q].u = __ldg(reinterpret_cast<const uint4*>(src));
              ra[q].mul = pr.a_mul(it, seg, m0 + m, k0 + ka), ra[q].post = pr.a_has_post(seg);
            }
          }
          if (!src) {
            if (cnt > 0) pr.a_run(it, seg, m0 + m, k0 + ka, cnt, v);
            else
              for (int i = 0; i < 8; ++i) v[i] = 0.f;
            pack(ra[q], v);
          }
          if (q >= kRunsB) continue;
          cnt = bkf ? (n0 + n < Nc ? min(8, hi - k0 - kb) : 0) : (k0 + kb < hi ? min(8, Nc - n0 - n) : 0);
          src = nullptr;
          if constexpr (kMma)
            if (cnt == 8 && pr.d.vec) src = pr.b_src(it, seg, k0 + kb, n0 + n);
          if constexpr (kMma) {
            if (src) rb[q].u = __ldg(reinterpret_cast<const uint4*>(src)), rb[q].mul = pr.b_mul(it, seg, k0 + kb, n0 + n), rb[q].post = false;
          }
          if (!src) {
            if (cnt > 0) pr.b_run(it, seg, k0 + kb, n0 + n, cnt, v);
            else
              for (int i = 0; i < 8; ++i) v[i] = 0.f;
            pack(rb[q], v);
          }
        }
      };
      fetch(lo);
      for (int k0 = lo; k0 < hi; k0 += kBK) {
#pragma unroll
        for (int q = 0; q < kRunsA; ++q) {
          int am, ak, bn, bk;
          run_pos(akf, kTM, q, am, ak);
          run_pos(bkf, kBN, q, bn, bk);
          if constexpr (kMma) {
            if (ra[q].post) {
              float v[8];
              unpack(ra[q], v);
              pr.a_post(it, seg, m0 + am, k0 + ak, v);
              pack(ra[q], v);
            }
            apply_mul(ra[q]);
            store_run(ra[q], akf ? &As[am][ak] : &AsT[ak][am]);
            if (q < kRunsB) apply_mul(rb[q]), store_run(rb[q], bkf ? &Bs[bn][bk] : &BsT[bk][bn]);
          } else {
            store_run(akf, ra[q], &As[am][ak], kLd);
            if (q < kRunsB) store_run(bkf, rb[q], &Bs[bn][bk], kLd);
          }
        }
        __syncthreads();
        if (k0 + kBK < hi) fetch(k0 + kBK);  // in flight while the tensor cores work on this step
        compute(0);
        __syncthreads();
      }
    } else {
      // kPipe stages: the runs of step i + kPipe - 1 are issued while step i computes. A run is
      // issued into the shared tile by cp.async where it is a plain copy (a_src / b_src), its factor
      // (a_mul / b_mul) or mask (a_post) applied in place by the same thread once it has landed;
      // other runs are built in registers and stored at once. Stage indices are compile-time
      // constants so that the factors stay in registers.
      float amul[kPipe][kRunsA], bmul[kPipe][kRunsB];
      bool adir[kPipe][kRunsA], bdir[kPipe][kRunsB];  // issued by cp.async (finished in place)
      auto issue = [&](auto stc, int k0) {
        constexpr int st = decltype(stc)::value;
        unsigned char* base = smem + st * (kTileA + kTileB);
        auto As_ = reinterpret_cast<S (*)[kLd]>(base);
        auto AsT_ = reinterpret_cast<S (*)[kLdTA]>(base);
        auto Bs_ = reinterpret_cast<S (*)[kLd]>(base + kTileA);
        auto BsT_ = reinterpret_cast<S (*)[kLdTB]>(base + kTileA);
#pragma unroll
        for (int q = 0; q < kRunsA; ++q) {
          int m, ka;
          run_pos(akf, kTM, q, m, ka);
          const int cnt = akf ? (m0 + m < M ? min(8, hi - k0 - ka) : 0) : (k0 + ka < hi ? min(8, M - m0 - m) : 0);
          const T* src = cnt == 8 && pr.d.vec ? pr.a_src(it, seg, m0 + m, k0 + ka) : nullptr;
          S* dst = akf ? &As_[m][ka] : &AsT_[ka][m];
          adir[st][q] = src != nullptr, amul[st][q] = 1.f;
          if (src) {
            cp_async16(dst, src);
            amul[st][q] = pr.a_mul(it, seg, m0 + m, k0 + ka);
          } else {
            float v[8];
            if (cnt > 0) pr.a_run(it, seg, m0 + m, k0 + ka, cnt, v);
            else
              for (int i = 0; i < 8; ++i) v[i] = 0.f;
            Run<S> r;
            pack(r, v);
            store_run(r, dst);
          }
        }
#pragma unroll
        for (int q = 0; q < kRunsB; ++q) {
          int n, kb;
          run_pos(bkf, kBN, q, n, kb);
          const int cnt = bkf ? (n0 + n < Nc ? min(8, hi - k0 - kb) : 0) : (k0 + kb < hi ? min(8, Nc - n0 - n) : 0);
          const T* src = cnt == 8 && pr.d.vec ? pr.b_src(it, seg, k0 + kb, n0 + n) : nullptr;
          S* dst = bkf ? &Bs_[n][kb] : &BsT_[kb][n];
          bdir[st][q] = src != nullptr, bmul[st][q] = 1.f;
          if (src) {
            cp_async16(dst, src);
            bmul[st][q] = pr.b_mul(it, seg, k0 + kb, n0 + n);
          } else {
            float v[8];
            if (cnt > 0) pr.b_run(it, seg, k0 + kb, n0 + n, cnt, v);
            else
              for (int i = 0; i < 8; ++i) v[i] = 0.f;
            Run<S> r;
            pack(r, v);
            store_run(r, dst);
          }
        }
      };
      // The cp.async runs of stage st that carry a factor or a mask, finished in place (after this
      // thread's cp_async_wait, before the barrier that publishes the stage).
      auto finish = [&](auto stc, int k0) {
        constexpr int st = decltype(stc)::value;
        unsigned char* base = smem + st * (kTileA + kTileB);
        auto As_ = reinterpret_cast<S (*)[kLd]>(base);
        auto AsT_ = reinterpret_cast<S (*)[kLdTA]>(base);
        auto Bs_ = reinterpret_cast<S (*)[kLd]>(base + kTileA);
        auto BsT_ = reinterpret_cast<S (*)[kLdTB]>(base + kTileA);
        const bool post = pr.a_has_post(seg);
#pragma unroll
        for (int q = 0; q < kRunsA; ++q) {
          if (!adir[st][q] || (!post && amul[st][q] == 1.f)) continue;
          int m, ka;
          run_pos(akf, kTM, q, m, ka);
          S* p = akf ? &As_[m][ka] : &AsT_[ka][m];
          Run<S> r;
          r.u = *reinterpret_cast<const uint4*>(p), r.mul = amul[st][q], r.post = post;
          if (post) {  // as the register path: a masked run carries no factor
            float v[8];
            unpack(r, v);
            pr.a_post(it, seg, m0 + m, k0 + ka, v);
            pack(r, v);
          }
          apply_mul(r);
          store_run(r, p);
        }
#pragma unroll
        for (int q = 0; q < kRunsB; ++q) {
          if (!bdir[st][q] || bmul[st][q] == 1.f) continue;
          int n, kb;
          run_pos(bkf, kBN, q, n, kb);
          S* p = bkf ? &Bs_[n][kb] : &BsT_[kb][n];
          Run<S> r;
          r.u = *reinterpret_cast<const uint4*>(p), r.mul = bmul[st][q], r.post = false;
          apply_mul(r);
          store_run(r, p);
        }
      };
      const int nsteps = (hi - lo + kBK - 1) / kBK;
      static_for<0, kPipe - 1>([&](auto stc) {  // prologue: steps 0 .. kPipe - 2
        constexpr int st = decltype(stc)::value;
        if (st < nsteps) issue(stc, lo + st * kBK);
        cp_async_commit();
      });
      for (int i0 = 0; i0 < nsteps; i0 += kPipe) {
        static_for<0, kPipe>([&](auto stc) {
          constexpr int st = decltype(stc)::value;
          const int i = i0 + st;
          if (i >= nsteps) return;
          cp_async_wait<kPipe - 2>();  // step i's group has landed
          finish(stc, lo + i * kBK);
          __syncthreads();  // stage st complete for all; stage st - 1 read by all
          if (i + kPipe - 1 < nsteps) issue(std::integral_constant<int, (st + kPipe - 1) % kPipe>{}, lo + (i + kPipe - 1) * kBK);
          cp_async_commit();
          compute(st);
        });
      }
      cp_async_wait<0>();
      __syncthreads();  // the next segment's prologue or the output tile reuse the stages
    }
    if constexpr (Prob::kScaled) {
      // scale(r, c) = pr.scale(key(r), key(c), r, c): the keys of this thread's 4 rows and 8 columns
      // (mma layout) are read once, not once per accumulator.
      float rk[4], ck[8];
      if constexpr (kMma) {
#pragma unroll
        for (int a = 0; a < 4; ++a) {
          int r, c;
          acc_pos<kMma, kNT>((a >> 1) * 16 + (a & 1) * 2, r, c);
          rk[a] = pr.key(it, seg, min(m0 + r, M - 1));
        }
#pragma unroll
        for (int b = 0; b < 8; ++b) {
          int r, c;
          acc_pos<kMma, kNT>((b >> 1) * 4 + (b & 1), r, c);
          ck[b] = pr.key(it, seg, min(n0 + c, Nc - 1));
        }
      }
#pragma unroll
      for (int i = 0; i < kAcc; ++i) {
        int r, c;
        acc_pos<kMma, kNT>(i, r, c);
        float kr, kc;
        if constexpr (kMma) kr = rk[(i >> 4) * 2 + ((i & 3) >> 1)], kc = ck[((i >> 2) & 3) * 2 + (i & 1)];
        else kr = pr.key(it, seg, min(m0 + r, M - 1)), kc = pr.key(it, seg, min(n0 + c, Nc - 1));
        if (m0 + r < M && n0 + c < Nc) acc[i] += pr.scale(kr, kc, m0 + r, n0 + c) * part[i];
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kAcc; ++i) {
    int r, c;
    acc_pos<kMma, kNT>(i, r, c);
    Cs[r][c] = acc[i];
  }
  __syncthreads();
  pr.epilogue(it, Cs, m0, n0, M, Nc, tn);
}

template <class Prob>
cudaError_t launch_tile_gemm(const Prob& pr, int64_t items, int64_t max_rows, int64_t max_cols, cudaStream_t s) {
  if (items == 0 || max_rows == 0 || max_cols == 0) return cudaSuccess;
  const int n_tiles = static_cast<int>((max_cols + kBN - 1) / kBN);
  const int m_tiles = static_cast<int>((max_rows + kBM * Prob::kWide - 1) / (kBM * Prob::kWide));
  const size_t lam_bytes = Prob::kStageLam ? static_cast<size_t>(pr.d.Q) * sizeof(float) : 0;
  tile_gemm_kernel<Prob><<<dim3(static_cast<unsigned>(items), static_cast<unsigned>(m_tiles * n_tiles)), kThreads * Prob::kWide,
                           lam_bytes, s>>>(pr, n_tiles);
  return cudaGetLastError();
}

}  // namespace nemotron::ops::ssd
