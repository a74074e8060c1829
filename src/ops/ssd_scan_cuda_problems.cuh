// The chunk products of the SSD scan as tile-GEMM problems (ssd_scan_tile_gemm.cuh). Notation per
// (batch b, chunk c of L tokens from t0, head h in group g): lam_l = sum_{j<=l} dt_j A_h (float32
// scratch `lam`), xb = dt x, w_l = exp(lam_{L-1} - lam_l), CB[l, s] = C_l . B_s (per group),
// M[l, s] = CB[l, s] exp(lam_l - lam_s) for s <= l. Sin = the state entering the chunk, dSout =
// the gradient of the state leaving it ([P, N] per head and chunk). Scratch read as GEMM operands is
// stored in T (CB, dCB, Sin, dSout: bf16 rounds operands anyway), and so are the per-chunk S_loc
// and Z that the passes accumulate in float32 (one bf16 rounding per chunk contribution).
// Packed rows (Dims::seq set): CB and dCB are stored as zero where l and s lie in different
// sequences (so every product built on them, M, M^T, dC, dB, is masked), and the decay factors
// el (carried state -> token), w and wdt (token -> outgoing state) are zero across a boundary
// (lam_kernel); the state passes drop the carried state at a chunk holding a boundary.
#pragma once
#include "ops/ssd_scan_tile_gemm.cuh"

// 1: ProbDBC reads the dCB tiles ProbDCB wrote as plain copies; 0: every dCB run masked (a_run).
#ifndef NM_SSD_DCB_PLAIN
#define NM_SSD_DCB_PLAIN 1
#endif

namespace nemotron::ops::ssd {

struct Dims {
  int B, T, nH, P, G, N, Q, nc, hpg, Qm;  // Qm = min(Q, T): the stride of per-chunk Q x Q scratch
  bool vec;  // P, N, Qm multiples of 8 and 16-byte aligned tensors: runs of 8 load as vectors
  const int32_t* seq = nullptr;  // seq_idx [B, T] or null (one sequence per row)
  __device__ int64_t xi(int b, int t, int h) const { return ((int64_t(b) * T + t) * nH + h) * P; }
  __device__ int64_t bci(int b, int t, int g) const { return ((int64_t(b) * T + t) * G + g) * N; }
  __device__ int64_t dti(int b, int t, int h) const { return (int64_t(b) * T + t) * nH + h; }
  __device__ int64_t lami(int b, int h, int t) const { return (int64_t(b) * nH + h) * T + t; }
  // sin: nc + 1 slots per (b, h): the state entering each chunk, then the final state
  __device__ int64_t sti(int b, int h, int c) const { return ((int64_t(b) * nH + h) * (nc + 1) + c) * P * N; }
  __device__ int64_t dsti(int b, int h, int c) const { return ((int64_t(b) * nH + h) * nc + c) * P * N; }
  __device__ int64_t cbi(int b, int c, int g) const { return ((int64_t(b) * nc + c) * G + g) * Qm * Qm; }
  // The sequence the state entering chunk c belongs to: its previous token's, or the row's first.
  __device__ int32_t entering(int b, int c) const {
    const int t0 = c * Q;
    return seq[int64_t(b) * T + (t0 == 0 ? 0 : t0 - 1)];
  }
  // Whether the state entering chunk c survives it (no boundary in or at the start of the chunk).
  __device__ bool state_survives(int b, int c) const {
    return !seq || seq[int64_t(b) * T + min(T, (c + 1) * Q) - 1] == entering(b, c);
  }
};

// Per-token decay factors, laid out like lam ([B, nH, T], float32): el = exp(lam_t),
// w = exp(lam_last - lam_t) (lam_last: the chunk's last token), wdt = dt_t w.
struct Decay {
  float *el = nullptr, *w = nullptr, *wdt = nullptr;
};

// v[0..8) = p[0..cnt) (zeros after): one 16-byte (bf16) or two (float) loads for a full aligned run.
template <class T>
__device__ inline void ld_run(const T* p, int cnt, bool vec, float* v) {
  if (vec && cnt == 8) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      const uint4 u = __ldg(reinterpret_cast<const uint4*>(p));
      const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 f = __bfloat1622float2(h[i]);
        v[2 * i] = f.x, v[2 * i + 1] = f.y;
      }
    } else {
      const float4 a = __ldg(reinterpret_cast<const float4*>(p)), b = __ldg(reinterpret_cast<const float4*>(p) + 1);
      v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = i < cnt ? to_f(p[i]) : 0.f;
}

// p[0..cnt) = v[0..cnt): one 16-byte (bf16) or two (float) stores for a full aligned run.
template <class T>
__device__ inline void st_run(T* p, int cnt, bool vec, const float* v) {
  if (vec && cnt == 8) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      uint4 u;
      __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
      for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
      *reinterpret_cast<uint4*>(p) = u;
    } else {
      reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
      reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
    }
    return;
  }
  for (int i = 0; i < cnt; ++i) p[i] = from_f<T>(v[i]);
}

// Epilogues walk the output tile (64 rows over 128 threads, or 128 over 256) in runs of 8 columns:
// pass q of this thread covers row r = tid / 8 + (threads / 8) q, columns c..c+8 with
// c = 8 (tid % 8), so 8 consecutive lanes hold one row.
constexpr int kEpiPasses = kBM * kBN / 8 / kThreads;
__device__ inline void epi_run(int q, int& r, int& c) {
  const int tid = static_cast<int>(threadIdx.x);
  r = tid / 8 + static_cast<int>(blockDim.x / 8) * q, c = (tid % 8) * 8;
}
// The sum over the 8 lanes of a row, in a fixed order (deterministic).
__device__ inline float row_sum8(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 4);
  v += __shfl_xor_sync(0xffffffffu, v, 2);
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v;
}

// The valid part of a float32 tile into out[(m0 + r) * ld + n0 + c] in T, runs of 8 per thread.
// seq (packed rows, a chunk's token ids, rows and columns both tokens): zero where they differ.
template <class T>
__device__ inline void store_tile(T* out, int ld, bool vec, const float (*Cs)[kCsLd], int m0, int n0, int M, int Nc,
                                  const int32_t* seq = nullptr) {
#pragma unroll
  for (int q = 0; q < kEpiPasses; ++q) {
    int r, c;
    epi_run(q, r, c);
    const int cnt = m0 + r < M ? min(8, Nc - n0 - c) : 0;
    if (cnt <= 0) continue;
    if (seq) {
      float v[8];
      const int32_t row_id = seq[m0 + r];
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = i < cnt && seq[n0 + c + i] == row_id ? Cs[r][c + i] : 0.f;
      st_run(out + int64_t(m0 + r) * ld + n0 + c, cnt, vec, v);
    } else {
      st_run(out + int64_t(m0 + r) * ld + n0 + c, cnt, vec, &Cs[r][c]);
    }
  }
}

// The token ids of a chunk (packed rows) or null.
__device__ inline const int32_t* chunk_ids(const Dims& d, int b, int t0) {
  return d.seq ? d.seq + int64_t(b) * d.T + t0 : nullptr;
}

// Fast exp for bf16 (its rounding dwarfs __expf's error), the accurate one for float32.
template <class T>
__device__ inline float ex(float v) {
  if constexpr (std::is_same_v<T, float>) return expf(v);
  else return __expf(v);
}

// v[i] *= exp(lam[hi] - lam[lo + i]) where lo + i <= hi, else 0 (the causal decay of a run of M or
// M^T; lam in shared memory, chunk positions).
template <class T>
__device__ inline void decay_run(const float* lam, int hi, int lo, float* v) {
  const float lh = lam[hi];
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = lo + i <= hi ? v[i] * ex<T>(lh - lam[min(lo + i, hi)]) : 0.f;
}

struct Item {
  int b, c, h, g, t0, L;
  bool is_dB;  // ProbDBC: which of its two products this item is
  const float* lam_s = nullptr;  // kStageLam problems: lam of the item's chunk in shared memory
};

__device__ inline Item head_item(const Dims& d, int idx) {
  Item it;
  it.h = idx % d.nH;
  const int r = idx / d.nH;
  it.c = r % d.nc, it.b = r / d.nc, it.g = it.h / d.hpg, it.t0 = it.c * d.Q;
  it.L = min(d.Q, d.T - it.t0);
  it.is_dB = false;
  return it;
}

__device__ inline Item group_item(const Dims& d, int idx) {
  Item it;
  it.g = idx % d.G, it.h = -1;
  const int r = idx / d.G;
  it.c = r % d.nc, it.b = r / d.nc, it.t0 = it.c * d.Q;
  it.L = min(d.Q, d.T - it.t0);
  it.is_dB = false;
  return it;
}

// Defaults shared by the problems. Loaders fill v[0..8) with a run of `cnt` consecutive elements
// along the operand's contiguous index (k when a_kfast/b_kfast, else m or n), zeros after. A full
// run named by a_src / b_src is those 8 elements times a_mul / b_mul (one factor per run, read when
// the run is fetched, applied when it is stored: its load latency hides behind the tensor cores).
template <class TT>
struct ProbBase {
  using T = TT;
  Dims d;
  static constexpr bool kScaled = false;
  static constexpr int kMinBlocks = NM_SSD_MIN_BLOCKS;
  static constexpr int kWide = 1;  // 2: 128-row tiles over 256 threads
  static constexpr int kStages = NM_SSD_STAGES;  // ssd_scan_tile_gemm.cuh
  __device__ float key(const Item&, int, int) const { return 0.f; }
  __device__ float scale(float, float, int, int) const { return 1.f; }
  __device__ bool skip(const Item&, int, int) const { return false; }
  __device__ int nseg(const Item&) const { return 1; }
  __device__ const T* a_src(const Item&, int, int, int) const { return nullptr; }
  __device__ const T* b_src(const Item&, int, int, int) const { return nullptr; }
  __device__ float a_mul(const Item&, int, int, int) const { return 1.f; }
  __device__ float b_mul(const Item&, int, int, int) const { return 1.f; }
  static constexpr bool kStageLam = false;
  __device__ const float* lam_row(const Item&) const { return nullptr; }
  __device__ bool a_has_post(int) const { return false; }
  __device__ void a_post(const Item&, int, int, int, float*) const {}
  Decay dk;
};

// CB[l, s] = C_l . B_s per (b, c, g); the upper triangle (never read) is skipped.
template <class T>
struct ProbCB : ProbBase<T> {
  const T *Bm, *Cm;
  T* cb;
  __device__ Item item(int i) const { return group_item(this->d, i); }
  __device__ int rows(const Item& it) const { return it.L; }
  __device__ int cols(const Item& it) const { return it.L; }
  __device__ bool skip(const Item&, int m0, int n0) const { return n0 > m0 + kBM - 1; }
  __device__ void k_range(const Item&, int, int, int, int& lo, int& hi) const { lo = 0, hi = this->d.N; }
  __device__ bool a_kfast(const Item&, int) const { return true; }
  __device__ bool b_kfast(const Item&, int) const { return true; }
  __device__ const T* a_src(const Item& it, int, int l, int n) const { return Cm + this->d.bci(it.b, it.t0 + l, it.g) + n; }
  __device__ const T* b_src(const Item& it, int, int n, int s) const { return Bm + this->d.bci(it.b, it.t0 + s, it.g) + n; }
  __device__ void a_run(const Item& it, int, int l, int n, int cnt, float* v) const {
    ld_run(Cm + this->d.bci(it.b, it.t0 + l, it.g) + n, cnt, this->d.vec, v);
  }
  __device__ void b_run(const Item& it, int, int n, int s, int cnt, float* v) const {
    ld_run(Bm + this->d.bci(it.b, it.t0 + s, it.g) + n, cnt, this->d.vec, v);
  }
  __device__ void epilogue(const Item& it, const float (*Cs)[kCsLd], int m0, int n0, int M, int Nc, int) const {
    store_tile(cb + this->d.cbi(it.b, it.c, it.g), this->d.Qm, this->d.vec, Cs, m0, n0, M, Nc,
               chunk_ids(this->d, it.b, it.t0));
  }
};

// The chunk's own state contribution S_loc[p, n] = sum_l w_l xb[l, p] B[l, n] (in T, slot c; the
// state pass turns them into the entering states), or with `dy` its adjoint Z[p, n] = sum_l
// exp(lam_l) dy[l, p] C[l, n] (the adjoint pass turns them into dSout).
template <class T>
struct ProbChunkState : ProbBase<T> {
  static constexpr int kStages = NM_SSD_STAGES_PIPE;
  const T *x, *dy, *BC;  // dy null: forward (x, B); else adjoint (dy, C)
  const float *dt, *lam;
  T* out;
  __device__ Item item(int i) const { return head_item(this->d, i); }
  __device__ int rows(const Item&) const { return this->d.P; }
  __device__ int cols(const Item&) const { return this->d.N; }
  __device__ void k_range(const Item& it, int, int, int, int& lo, int& hi) const { lo = 0, hi = it.L; }
  __device__ bool a_kfast(const Item&, int) const { return false; }
  __device__ bool b_kfast(const Item&, int) const { return false; }
  __device__ void a_run(const Item& it, int, int p, int l, int cnt, float* v) const {  // run over p
    ld_run(a_src(it, 0, p, l), cnt, this->d.vec, v);
    const float f = a_mul(it, 0, p, l);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] *= f;
  }
  __device__ const T* a_src(const Item& it, int, int p, int l) const {
    return (dy ? dy : x) + this->d.xi(it.b, it.t0 + l, it.h) + p;
  }
  __device__ float a_mul(const Item& it, int, int, int l) const {
    return (dy ? this->dk.el : this->dk.wdt)[this->d.lami(it.b, it.h, it.t0 + l)];
  }
  __device__ void b_run(const Item& it, int, int l, int n, int cnt, float* v) const {  // run over n
    ld_run(BC + this->d.bci(it.b, it.t0 + l, it.g) + n, cnt, this->d.vec, v);
  }
  __device__ const T* b_src(const Item& it, int, int l, int n) const { return BC + this->d.bci(it.b, it.t0 + l, it.g) + n; }
  __device__ void epilogue(const Item& it, const float (*Cs)[kCsLd], int m0, int n0, int M, int Nc, int) const {
    store_tile(out + this->d.dsti(it.b, it.h, it.c), this->d.N, this->d.vec, Cs, m0, n0, M, Nc);
  }
};

// Y_ssm[l, p] = sum_{s<=l} M[l, s] xb[s, p] + exp(lam_l) sum_n C[l, n] Sin[p, n] (segments 0, 1).
// Forward: y = Y_ssm + D x. Backward (dy set): r1[l] = dy_l . Y_ssm_l, per column tile.
// Used for float32 and outside chunk_y_fits (ssd_scan_chunk_y.cuh runs bf16 model shapes).
template <class T>
struct ProbY : ProbBase<T> {
  const T *x, *Cm, *D, *dy, *sin;
  const T* cb;
  const float *dt, *lam;
  T* y;
  float* r1;
  int n_tiles;
  // 128-row tiles: x and Sin are fetched once for the whole chunk (Q <= 128), not once per 64 rows.
  static constexpr int kWide = NM_SSD_WIDE, kMinBlocks = NM_SSD_WIDE == 2 ? 2 : NM_SSD_MIN_BLOCKS;
  __device__ Item item(int i) const { return head_item(this->d, i); }
  __device__ int rows(const Item& it) const { return it.L; }
  __device__ int cols(const Item&) const { return this->d.P; }
  __device__ int nseg(const Item&) const { return 2; }
  __device__ void k_range(const Item& it, int seg, int m0, int, int& lo, int& hi) const {
    lo = 0, hi = seg == 0 ? min(it.L, m0 + kBM * kWide) : this->d.N;
  }
  __device__ bool a_kfast(const Item&, int) const { return true; }
  __device__ bool b_kfast(const Item&, int seg) const { return seg == 1; }
  __device__ void a_run(const Item& it, int seg, int l, int k, int cnt, float* v) const {  // run over k
    const Dims& d = this->d;
    if (seg == 1) {
      ld_run(Cm + d.bci(it.b, it.t0 + l, it.g) + k, cnt, d.vec, v);
      const float f = a_mul(it, 1, l, k);
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] *= f;
      return;
    }
    if (k > l) {
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = 0.f;
      return;
    }
    ld_run(cb + d.cbi(it.b, it.c, it.g) + int64_t(l) * d.Qm + k, min(cnt, l - k + 1), d.vec, v);
    a_post(it, 0, l, k, v);
  }
  // Segment 0: row l of CB from k, masked and decayed by a_post; segment 1: C_l times exp(lam_l).
  __device__ const T* a_src(const Item& it, int seg, int l, int k) const {
    const Dims& d = this->d;
    if (seg == 1) return Cm + d.bci(it.b, it.t0 + l, it.g) + k;
    return k > l ? nullptr : cb + d.cbi(it.b, it.c, it.g) + int64_t(l) * d.Qm + k;  // above the diagonal: zeros
  }
  __device__ float a_mul(const Item& it, int seg, int l, int) const {
    return seg == 1 ? this->dk.el[this->d.lami(it.b, it.h, it.t0 + l)] : 1.f;
  }
  static constexpr bool kStageLam = true;
  __device__ const float* lam_row(const Item& it) const { return lam + this->d.lami(it.b, it.h, it.t0); }
  __device__ bool a_has_post(int seg) const { return seg == 0; }
  __device__ void a_post(const Item& it, int, int l, int k, float* v) const { decay_run<T>(it.lam_s, l, k, v); }
  __device__ const T* b_src(const Item& it, int seg, int k, int p) const {
    const Dims& d = this->d;
    return seg == 1 ? sin + d.sti(it.b, it.h, it.c) + int64_t(p) * d.N + k : x + d.xi(it.b, it.t0 + k, it.h) + p;
  }
  __device__ float b_mul(const Item& it, int seg, int k, int) const {
    return seg == 1 ? 1.f : dt[this->d.dti(it.b, it.t0 + k, it.h)];
  }
  __device__ void b_run(const Item& it, int seg, int k, int p, int cnt, float* v) const {
    const Dims& d = this->d;
    if (seg == 1) {  // run over k = n
      ld_run(sin + d.sti(it.b, it.h, it.c) + int64_t(p) * d.N + k, cnt, d.vec, v);
      return;
    }
    ld_run(x + d.xi(it.b, it.t0 + k, it.h) + p, cnt, d.vec, v);  // run over p
    const float f = dt[d.dti(it.b, it.t0 + k, it.h)];
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] *= f;
  }
  __device__ void epilogue(const Item& it, const float (*Cs)[kCsLd], int m0, int n0, int M, int Nc, int tn) const {
    const Dims& d = this->d;
    const int rows = M - m0, cols = min(kBN, Nc - n0);
    const float Dh = dy ? 0.f : to_f(D[it.h]);
    float in[kEpiPasses][8];  // x (forward) or dy (backward) runs, all loads before any store
#pragma unroll
    for (int q = 0; q < kEpiPasses; ++q) {
      int r, c;
      epi_run(q, r, c);
      const int cnt = r < rows ? min(8, cols - c) : 0;
      if (cnt > 0) ld_run((dy ? dy : x) + d.xi(it.b, it.t0 + m0 + r, it.h) + n0 + c, cnt, d.vec, in[q]);
      else
        for (int i = 0; i < 8; ++i) in[q][i] = 0.f;
    }
#pragma unroll
    for (int q = 0; q < kEpiPasses; ++q) {
      int r, c;
      epi_run(q, r, c);
      const int cnt = r < rows ? min(8, cols - c) : 0;
      if (!dy) {
        float v[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] = Cs[r][c + i] + Dh * in[q][i];
        if (cnt > 0) st_run(y + d.xi(it.b, it.t0 + m0 + r, it.h) + n0 + c, cnt, d.vec, v);
      } else {
        float sdot = 0.f;
#pragma unroll
        for (int i = 0; i < 8; ++i) sdot += in[q][i] * Cs[r][c + i];  // in is 0 past cnt
        sdot = row_sum8(sdot);
        if (c == 0 && r < rows) r1[d.lami(it.b, it.h, it.t0 + m0 + r) * n_tiles + tn] = sdot;
      }
    }
  }
};

// dxb[s, p] = sum_{l>=s} M[l, s] dy[l, p] + w_s sum_n B[s, n] dSout[p, n]; epilogue: dx = D dy +
// dt dxb, and per column tile rx[s] = x_s . dxb_s and rdd[s] = dy_s . x_s.
// Used for float32 and outside chunk_y_fits, as ProbY.
template <class T>
struct ProbDxb : ProbBase<T> {
  const T *x, *Bm, *D, *dy, *dsout;
  const T* cb;
  const float *dt, *lam;
  T* dx;
  float *rx, *rdd;
  int n_tiles;
  static constexpr int kWide = NM_SSD_WIDE, kMinBlocks = NM_SSD_WIDE == 2 ? 2 : NM_SSD_MIN_BLOCKS;
  __device__ Item item(int i) const { return head_item(this->d, i); }
  __device__ int rows(const Item& it) const { return it.L; }
  __device__ int cols(const Item&) const { return this->d.P; }
  __device__ int nseg(const Item&) const { return 2; }
  __device__ void k_range(const Item& it, int seg, int m0, int, int& lo, int& hi) const {
    if (seg == 0) lo = m0, hi = it.L;
    else lo = 0, hi = this->d.N;
  }
  __device__ bool a_kfast(const Item& it, int seg) const { return seg == 1; }
  __device__ bool b_kfast(const Item&, int seg) const { return seg == 1; }
  __device__ void a_run(const Item& it, int seg, int s, int k, int cnt, float* v) const {
    const Dims& d = this->d;
    if (seg == 1) {  // run over k = n
      ld_run(Bm + d.bci(it.b, it.t0 + s, it.g) + k, cnt, d.vec, v);
      const float f = a_mul(it, 1, s, k);
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] *= f;
      return;
    }
    // run over s, row l = k of M: M[k, s + i] for s + i <= k
    if (s > k) {
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = 0.f;
      return;
    }
    ld_run(cb + d.cbi(it.b, it.c, it.g) + int64_t(k) * d.Qm + s, min(cnt, k - s + 1), d.vec, v);
    a_post(it, 0, s, k, v);
  }
  // Segment 0: row k of CB from s, masked and decayed by a_post; segment 1: B_s times w_s.
  __device__ const T* a_src(const Item& it, int seg, int s, int k) const {
    const Dims& d = this->d;
    if (seg == 1) return Bm + d.bci(it.b, it.t0 + s, it.g) + k;
    return s > k ? nullptr : cb + d.cbi(it.b, it.c, it.g) + int64_t(k) * d.Qm + s;  // above the diagonal: zeros
  }
  __device__ float a_mul(const Item& it, int seg, int s, int) const {
    return seg == 1 ? this->dk.w[this->d.lami(it.b, it.h, it.t0 + s)] : 1.f;
  }
  static constexpr bool kStageLam = true;
  __device__ const float* lam_row(const Item& it) const { return lam + this->d.lami(it.b, it.h, it.t0); }
  __device__ bool a_has_post(int seg) const { return seg == 0; }
  __device__ void a_post(const Item& it, int, int s, int k, float* v) const { decay_run<T>(it.lam_s, k, s, v); }
  __device__ void b_run(const Item& it, int seg, int k, int p, int cnt, float* v) const {
    const Dims& d = this->d;
    if (seg == 1) ld_run(dsout + d.dsti(it.b, it.h, it.c) + int64_t(p) * d.N + k, cnt, d.vec, v);  // over n
    else ld_run(dy + d.xi(it.b, it.t0 + k, it.h) + p, cnt, d.vec, v);                                   // over p
  }
  __device__ const T* b_src(const Item& it, int seg, int k, int p) const {
    const Dims& d = this->d;
    return seg == 0 ? dy + d.xi(it.b, it.t0 + k, it.h) + p : dsout + d.dsti(it.b, it.h, it.c) + int64_t(p) * d.N + k;
  }
  __device__ void epilogue(const Item& it, const float (*Cs)[kCsLd], int m0, int n0, int M, int Nc, int tn) const {
    const Dims& d = this->d;
    const int rows = M - m0, cols = min(kBN, Nc - n0);
    const float Dh = to_f(D[it.h]);
#pragma unroll
    for (int q = 0; q < kEpiPasses; ++q) {
      int r, c;
      epi_run(q, r, c);
      const int cnt = r < rows ? min(8, cols - c) : 0;
      const int t = it.t0 + m0 + min(r, rows - 1);
      const int64_t at = d.xi(it.b, t, it.h) + n0 + c;
      float xv[8], dyv[8], v[8];
      if (cnt > 0) ld_run(x + at, cnt, d.vec, xv), ld_run(dy + at, cnt, d.vec, dyv);
      else
        for (int i = 0; i < 8; ++i) xv[i] = dyv[i] = 0.f;
      const float dtv = dt[d.dti(it.b, t, it.h)];
      float sx = 0.f, sd = 0.f;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float g = Cs[r][c + i];
        v[i] = Dh * dyv[i] + dtv * g;
        sx += xv[i] * g, sd += xv[i] * dyv[i];
      }
      if (cnt > 0) st_run(dx + at, cnt, d.vec, v);
      sx = row_sum8(sx), sd = row_sum8(sd);
      if (c == 0 && r < rows) {
        const int64_t row = d.lami(it.b, it.h, t) * n_tiles + tn;
        rx[row] = sx, rdd[row] = sd;
      }
    }
  }
};

// dCB[l, s] = sum over the group's heads of exp(lam_l - lam_s) dy_l . xb_s (s <= l): one segment
// per head, each scaled by its own decay.
template <class T>
struct ProbDCB : ProbBase<T> {
  static constexpr bool kScaled = true;
  static constexpr int kStages = NM_SSD_STAGES_PIPE;
  // 32 more accumulators and 12 decay keys: 3 blocks of <= 168 registers run without spills
  static constexpr int kMinBlocks = NM_SSD_MIN_BLOCKS < NM_SSD_DCB_BLOCKS ? NM_SSD_MIN_BLOCKS : NM_SSD_DCB_BLOCKS;
  const T *x, *dy;
  const float *dt, *lam;
  T* dcb;
  __device__ Item item(int i) const { return group_item(this->d, i); }
  __device__ int rows(const Item& it) const { return it.L; }
  __device__ int cols(const Item& it) const { return it.L; }
  __device__ int nseg(const Item&) const { return this->d.hpg; }
  __device__ bool skip(const Item&, int m0, int n0) const { return n0 > m0 + kBM - 1; }
  __device__ void k_range(const Item&, int, int, int, int& lo, int& hi) const { lo = 0, hi = this->d.P; }
  __device__ bool a_kfast(const Item&, int) const { return true; }
  __device__ bool b_kfast(const Item&, int) const { return true; }
  __device__ void a_run(const Item& it, int j, int l, int p, int cnt, float* v) const {
    ld_run(dy + this->d.xi(it.b, it.t0 + l, it.g * this->d.hpg + j) + p, cnt, this->d.vec, v);
  }
  __device__ const T* a_src(const Item& it, int j, int l, int p) const {
    return dy + this->d.xi(it.b, it.t0 + l, it.g * this->d.hpg + j) + p;
  }
  __device__ void b_run(const Item& it, int j, int p, int s, int cnt, float* v) const {
    ld_run(b_src(it, j, p, s), cnt, this->d.vec, v);
    const float f = b_mul(it, j, p, s);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] *= f;
  }
  __device__ const T* b_src(const Item& it, int j, int p, int s) const {
    return x + this->d.xi(it.b, it.t0 + s, it.g * this->d.hpg + j) + p;
  }
  __device__ float b_mul(const Item& it, int j, int, int s) const {
    return dt[this->d.dti(it.b, it.t0 + s, it.g * this->d.hpg + j)];
  }
  __device__ float key(const Item& it, int j, int t) const {  // lam of head j at chunk position t
    return lam[this->d.lami(it.b, it.g * this->d.hpg + j, it.t0 + t)];
  }
  __device__ float scale(float lam_l, float lam_s, int l, int s) const { return s > l ? 0.f : ex<T>(lam_l - lam_s); }
  __device__ void epilogue(const Item& it, const float (*Cs)[kCsLd], int m0, int n0, int M, int Nc, int) const {
    store_tile(dcb + this->d.cbi(it.b, it.c, it.g), this->d.Qm, this->d.vec, Cs, m0, n0, M, Nc,
               chunk_ids(this->d, it.b, it.t0));
  }
};

// Per (b, c, g), rows = tokens of the chunk, columns = N, segment 0 the C B^T part, segments 1..hpg
// the heads' state parts:
//   dC[l, n] = sum_{s<=l} dCB[l, s] B[s, n] + sum_h exp(lam_l) sum_p dy[l, p] Sin[p, n]
//   dB[s, n] = sum_{l>=s} dCB[l, s] C[l, n] + sum_h w_s sum_p xb[s, p] dSout[p, n]
// Segment 0 reads dCB: its runs that lie in a tile ProbDCB wrote (zeros above the diagonal
// included) are plain copies (a_src: cp.async, no register stall in the k loop); only runs in the
// tiles it skipped (with kWide = 2) go through a_run's mask. The same bits as masking every run
// (NM_SSD_DCB_PLAIN=0). H100, ssd-fast 465192c: dC+dB 0.234 -> 0.227 ms (dense shape), 0.201 ->
// 0.187 (MoE shape), measured with a since-fixed a_mul bug (a wrong factor multiplied into each
// run: same work as the fixed code plus one multiply).
// Tried and dropped (ssd-fast 909e9da, bench/results/ssd_scan.jsonl): storing the decayed M =
// CB exp(lam_l - lam_s) once per (b, c, h) so that Y, Y_rowdot and dxb read it as a plain 3-stage
// cp.async operand. Those three got only 6-11% faster (Y 0.235 -> 0.221 ms, dxb 0.244 -> 0.218 on
// the dense shape): the in-loop exp and mask are not what bounds them; writing M (100 MB) cost
// 0.093 ms per call, fwd+bwd 1.517 -> 1.634 ms.
template <class T>
struct ProbDBC : ProbBase<T> {
  static constexpr int kStages = NM_SSD_STAGES_PIPE;
  const T *x, *dy, *Bm, *Cm, *sin, *dsout;
  const T* dcb;
  const float *dt, *lam;
  T *dBm, *dCm;
  int64_t groups;  // B nc G: items [0, groups) are dC, the next as many dB (one launch for both)
  // 128-row tiles: the B operands (B or C, and each head's Sin or dSout) are fetched once per chunk.
  static constexpr int kWide = NM_SSD_WIDE_DBC, kMinBlocks = NM_SSD_WIDE_DBC == 2 ? 2 : NM_SSD_MIN_BLOCKS;
  __device__ Item item(int i) const {
    Item it = group_item(this->d, static_cast<int>(i % groups));
    it.is_dB = i >= groups;
    return it;
  }
  __device__ int rows(const Item& it) const { return it.L; }
  __device__ int cols(const Item&) const { return this->d.N; }
  __device__ int nseg(const Item&) const { return 1 + this->d.hpg; }
  __device__ void k_range(const Item& it, int seg, int m0, int, int& lo, int& hi) const {
    if (seg > 0) lo = 0, hi = this->d.P;
    else if (it.is_dB) lo = m0, hi = it.L;
    else lo = 0, hi = min(it.L, m0 + kBM * kWide);
  }
  __device__ bool a_kfast(const Item& it, int seg) const { return seg > 0 || !it.is_dB; }
  __device__ bool b_kfast(const Item&, int) const { return false; }
  __device__ void a_run(const Item& it, int seg, int m, int k, int cnt, float* v) const {
    const Dims& d = this->d;
    if (seg == 0) {
      const T* base = dcb + d.cbi(it.b, it.c, it.g);
      // dC: row m of dCB, run over k <= m; dB: column m of dCB^T = row k of dCB, run over m <= k
      const int first = it.is_dB ? m : k, last = it.is_dB ? k : m;
      if (first > last) {
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] = 0.f;
        return;
      }
      const int n = min(cnt, last - first + 1);
      ld_run(base + int64_t(it.is_dB ? k : m) * d.Qm + (it.is_dB ? m : k), n, d.vec, v);
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = i < n ? v[i] : 0.f;
      return;
    }
    ld_run(a_src(it, seg, m, k), cnt, d.vec, v);  // run over k = p
    const float f = a_mul(it, seg, m, k);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] *= f;
  }
  // Segments > 0 (head seg - 1): dy scaled by exp(lam) for dC, xb scaled by w for dB. Segment 0:
  // dCB as it is stored, or (a_run) masked at the diagonal.
  __device__ const T* a_src(const Item& it, int seg, int m, int k) const {
    const Dims& d = this->d;
    if (seg == 0) {
      // dC: row m of dCB from k; dB: row k from m. ProbDCB skips the tiles whose column tile is
      // past the row tile (its skip(), kBM = kBN); a run of 8 lies in one tile.
      const int l = it.is_dB ? k : m, s = it.is_dB ? m : k;
      if (!NM_SSD_DCB_PLAIN || s / kBN > l / kBM) return nullptr;
      return dcb + d.cbi(it.b, it.c, it.g) + int64_t(l) * d.Qm + s;
    }
    return (it.is_dB ? x : dy) + d.xi(it.b, it.t0 + m, it.g * d.hpg + seg - 1) + k;
  }
  __device__ float a_mul(const Item& it, int seg, int m, int) const {
    if (seg == 0) return 1.f;  // dCB runs carry no factor
    const Dims& d = this->d;
    return (it.is_dB ? this->dk.wdt : this->dk.el)[d.lami(it.b, it.g * d.hpg + seg - 1, it.t0 + m)];
  }
  __device__ const T* b_src(const Item& it, int seg, int k, int n) const {
    const Dims& d = this->d;
    if (seg == 0) return (it.is_dB ? Cm : Bm) + d.bci(it.b, it.t0 + k, it.g) + n;
    const int h = it.g * d.hpg + seg - 1;
    return (it.is_dB ? dsout + d.dsti(it.b, h, it.c) : sin + d.sti(it.b, h, it.c)) + int64_t(k) * d.N + n;
  }
  __device__ void b_run(const Item& it, int seg, int k, int n, int cnt, float* v) const {  // run over n
    const Dims& d = this->d;
    if (seg == 0) {
      ld_run((it.is_dB ? Cm : Bm) + d.bci(it.b, it.t0 + k, it.g) + n, cnt, d.vec, v);
      return;
    }
    const int h = it.g * d.hpg + seg - 1;
    const T* s = it.is_dB ? dsout + d.dsti(it.b, h, it.c) : sin + d.sti(it.b, h, it.c);
    ld_run(s + int64_t(k) * d.N + n, cnt, d.vec, v);
  }
  __device__ void epilogue(const Item& it, const float (*Cs)[kCsLd], int m0, int n0, int M, int Nc, int) const {
#pragma unroll
    for (int q = 0; q < kEpiPasses; ++q) {
      int r, c;
      epi_run(q, r, c);
      const int cnt = m0 + r < M ? min(8, Nc - n0 - c) : 0;
      T* out = (it.is_dB ? dBm : dCm) + this->d.bci(it.b, it.t0 + m0 + min(r, M - m0 - 1), it.g) + n0 + c;
      if (cnt > 0) st_run(out, cnt, this->d.vec, &Cs[r][c]);
    }
  }
};

}  // namespace nemotron::ops::ssd
