// The chunk products of the SSD scan as tile-GEMM problems (ssd_scan_tile_gemm.cuh). Notation per
// (batch b, chunk c of L tokens from t0, head h in group g): lam_l = sum_{j<=l} dt_j A_h (float32
// scratch `lam`), xb = dt x, w_l = exp(lam_{L-1} - lam_l), CB[l, s] = C_l . B_s (per group),
// M[l, s] = CB[l, s] exp(lam_l - lam_s) for s <= l. Sin = the state entering the chunk, dSout =
// the gradient of the state leaving it (both float32 [P, N] per head and chunk).
#pragma once
#include "ops/ssd_scan_tile_gemm.cuh"

namespace nemotron::ops::ssd {

struct Dims {
  int B, T, nH, P, G, N, Q, nc, hpg, Qm;  // Qm = min(Q, T): the stride of per-chunk Q x Q scratch
  __device__ int64_t xi(int b, int t, int h) const { return ((int64_t(b) * T + t) * nH + h) * P; }
  __device__ int64_t bci(int b, int t, int g) const { return ((int64_t(b) * T + t) * G + g) * N; }
  __device__ int64_t dti(int b, int t, int h) const { return (int64_t(b) * T + t) * nH + h; }
  __device__ int64_t lami(int b, int h, int t) const { return (int64_t(b) * nH + h) * T + t; }
  // states: nc + 1 slots per (b, h): the state entering each chunk, then the final state
  __device__ int64_t sti(int b, int h, int c) const { return ((int64_t(b) * nH + h) * (nc + 1) + c) * P * N; }
  __device__ int64_t dsti(int b, int h, int c) const { return ((int64_t(b) * nH + h) * nc + c) * P * N; }
  __device__ int64_t cbi(int b, int c, int g) const { return ((int64_t(b) * nc + c) * G + g) * Qm * Qm; }
};

// Fast exp for bf16 (its rounding dwarfs __expf's error), the accurate one for float32.
template <class T>
__device__ inline float ex(float v) {
  if constexpr (std::is_same_v<T, float>) return expf(v);
  else return __expf(v);
}

struct Item {
  int b, c, h, g, t0, L;
};

__device__ inline Item head_item(const Dims& d, int idx) {
  Item it;
  it.h = idx % d.nH;
  const int r = idx / d.nH;
  it.c = r % d.nc, it.b = r / d.nc, it.g = it.h / d.hpg, it.t0 = it.c * d.Q;
  it.L = min(d.Q, d.T - it.t0);
  return it;
}

__device__ inline Item group_item(const Dims& d, int idx) {
  Item it;
  it.g = idx % d.G, it.h = -1;
  const int r = idx / d.G;
  it.c = r % d.nc, it.b = r / d.nc, it.t0 = it.c * d.Q;
  it.L = min(d.Q, d.T - it.t0);
  return it;
}

// Defaults shared by the problems.
template <class TT>
struct ProbBase {
  using T = TT;
  Dims d;
  static constexpr bool kScaled = false;
  __device__ float scale(const Item&, int, int, int) const { return 1.f; }
  __device__ bool skip(const Item&, int, int) const { return false; }
  __device__ int nseg(const Item&) const { return 1; }
};

// CB[l, s] = C_l . B_s per (b, c, g); the upper triangle (never read) is skipped.
template <class T>
struct ProbCB : ProbBase<T> {
  const T *Bm, *Cm;
  float* cb;
  __device__ Item item(int i) const { return group_item(this->d, i); }
  __device__ int rows(const Item& it) const { return it.L; }
  __device__ int cols(const Item& it) const { return it.L; }
  __device__ bool skip(const Item&, int m0, int n0) const { return n0 > m0 + kBM - 1; }
  __device__ void k_range(const Item&, int, int, int, int& lo, int& hi) const { lo = 0, hi = this->d.N; }
  __device__ bool a_kfast(int) const { return true; }
  __device__ bool b_kfast(int) const { return true; }
  __device__ float a(const Item& it, int, int l, int n) const { return to_f(Cm[this->d.bci(it.b, it.t0 + l, it.g) + n]); }
  __device__ float b(const Item& it, int, int n, int s) const { return to_f(Bm[this->d.bci(it.b, it.t0 + s, it.g) + n]); }
  __device__ void epilogue(const Item& it, const float (*Cs)[kCsLd], int m0, int n0, int M, int Nc, int) const {
    float* out = cb + this->d.cbi(it.b, it.c, it.g);
    for (int e = threadIdx.x; e < kBM * kBN; e += kThreads) {
      const int r = e / kBN, c = e % kBN;
      if (m0 + r < M && n0 + c < Nc) out[int64_t(m0 + r) * this->d.Qm + n0 + c] = Cs[r][c];
    }
  }
};

// The chunk's own state contribution S_loc[p, n] = sum_l w_l xb[l, p] B[l, n] (state slot c; the
// state pass turns it into the entering state), or with `z` its adjoint Z[p, n] = sum_l
// exp(lam_l) dy[l, p] C[l, n] (dstates slot c).
template <class T>
struct ProbChunkState : ProbBase<T> {
  const T *x, *dy, *BC;  // dy null: forward (x, B); else adjoint (dy, C)
  const float *dt, *lam;
  float* out;
  __device__ Item item(int i) const { return head_item(this->d, i); }
  __device__ int rows(const Item&) const { return this->d.P; }
  __device__ int cols(const Item&) const { return this->d.N; }
  __device__ void k_range(const Item& it, int, int, int, int& lo, int& hi) const { lo = 0, hi = it.L; }
  __device__ bool a_kfast(int) const { return false; }
  __device__ bool b_kfast(int) const { return false; }
  __device__ float a(const Item& it, int, int p, int l) const {
    const Dims& d = this->d;
    const int t = it.t0 + l;
    const float lm = lam[d.lami(it.b, it.h, t)];
    if (dy) return to_f(dy[d.xi(it.b, t, it.h) + p]) * ex<T>(lm);
    const float last = lam[d.lami(it.b, it.h, it.t0 + it.L - 1)];
    return to_f(x[d.xi(it.b, t, it.h) + p]) * dt[d.dti(it.b, t, it.h)] * ex<T>(last - lm);
  }
  __device__ float b(const Item& it, int, int l, int n) const { return to_f(BC[this->d.bci(it.b, it.t0 + l, it.g) + n]); }
  __device__ void epilogue(const Item& it, const float (*Cs)[kCsLd], int m0, int n0, int M, int Nc, int) const {
    const Dims& d = this->d;
    float* o = out + (dy ? d.dsti(it.b, it.h, it.c) : d.sti(it.b, it.h, it.c));
    for (int e = threadIdx.x; e < kBM * kBN; e += kThreads) {
      const int r = e / kBN, c = e % kBN;
      if (m0 + r < M && n0 + c < Nc) o[int64_t(m0 + r) * d.N + n0 + c] = Cs[r][c];
    }
  }
};

// Y_ssm[l, p] = sum_{s<=l} M[l, s] xb[s, p] + exp(lam_l) sum_n C[l, n] Sin[p, n] (segments 0, 1).
// Forward: y = Y_ssm + D x. Backward (dy set): r1[l] = dy_l . Y_ssm_l, per column tile.
template <class T>
struct ProbY : ProbBase<T> {
  const T *x, *Cm, *D, *dy;
  const float *dt, *lam, *cb, *states;
  T* y;
  float* r1;
  int n_tiles;
  __device__ Item item(int i) const { return head_item(this->d, i); }
  __device__ int rows(const Item& it) const { return it.L; }
  __device__ int cols(const Item&) const { return this->d.P; }
  __device__ int nseg(const Item&) const { return 2; }
  __device__ void k_range(const Item& it, int seg, int m0, int, int& lo, int& hi) const {
    lo = 0, hi = seg == 0 ? min(it.L, m0 + kBM) : this->d.N;
  }
  __device__ bool a_kfast(int) const { return true; }
  __device__ bool b_kfast(int seg) const { return seg == 1; }
  __device__ float a(const Item& it, int seg, int l, int k) const {
    const Dims& d = this->d;
    const float ll = lam[d.lami(it.b, it.h, it.t0 + l)];
    if (seg == 1) return to_f(Cm[d.bci(it.b, it.t0 + l, it.g) + k]) * ex<T>(ll);
    if (k > l) return 0.f;
    return cb[d.cbi(it.b, it.c, it.g) + int64_t(l) * d.Qm + k] * ex<T>(ll - lam[d.lami(it.b, it.h, it.t0 + k)]);
  }
  __device__ float b(const Item& it, int seg, int k, int p) const {
    const Dims& d = this->d;
    if (seg == 1) return states[d.sti(it.b, it.h, it.c) + int64_t(p) * d.N + k];
    return to_f(x[d.xi(it.b, it.t0 + k, it.h) + p]) * dt[d.dti(it.b, it.t0 + k, it.h)];
  }
  __device__ void epilogue(const Item& it, const float (*Cs)[kCsLd], int m0, int n0, int M, int Nc, int tn) const {
    const Dims& d = this->d;
    const int rows = min(kBM, M - m0), cols = min(kBN, Nc - n0);
    if (!dy) {
      const float Dh = to_f(D[it.h]);
      for (int e = threadIdx.x; e < kBM * kBN; e += kThreads) {
        const int r = e / kBN, c = e % kBN;
        if (r < rows && c < cols) {
          const int64_t i = d.xi(it.b, it.t0 + m0 + r, it.h) + n0 + c;
          y[i] = from_f<T>(Cs[r][c] + Dh * to_f(x[i]));
        }
      }
      return;
    }
    tile_row_sums(
        rows, cols, [&](int r, int c) { return to_f(dy[d.xi(it.b, it.t0 + m0 + r, it.h) + n0 + c]) * Cs[r][c]; },
        [&](int r, float v) { r1[d.lami(it.b, it.h, it.t0 + m0 + r) * n_tiles + tn] = v; });
  }
};

// dxb[s, p] = sum_{l>=s} M[l, s] dy[l, p] + w_s sum_n B[s, n] dSout[p, n]; epilogue: dx = D dy +
// dt dxb, and per column tile rx[s] = x_s . dxb_s and rdd[s] = dy_s . x_s.
template <class T>
struct ProbDxb : ProbBase<T> {
  const T *x, *Bm, *D, *dy;
  const float *dt, *lam, *cb, *dstates;
  T* dx;
  float *rx, *rdd;
  int n_tiles;
  __device__ Item item(int i) const { return head_item(this->d, i); }
  __device__ int rows(const Item& it) const { return it.L; }
  __device__ int cols(const Item&) const { return this->d.P; }
  __device__ int nseg(const Item&) const { return 2; }
  __device__ void k_range(const Item& it, int seg, int m0, int, int& lo, int& hi) const {
    if (seg == 0) lo = m0, hi = it.L;
    else lo = 0, hi = this->d.N;
  }
  __device__ bool a_kfast(int seg) const { return seg == 1; }
  __device__ bool b_kfast(int seg) const { return seg == 1; }
  __device__ float a(const Item& it, int seg, int s, int k) const {
    const Dims& d = this->d;
    const float ls = lam[d.lami(it.b, it.h, it.t0 + s)];
    if (seg == 1) {
      const float last = lam[d.lami(it.b, it.h, it.t0 + it.L - 1)];
      return ex<T>(last - ls) * to_f(Bm[d.bci(it.b, it.t0 + s, it.g) + k]);
    }
    if (k < s) return 0.f;
    return cb[d.cbi(it.b, it.c, it.g) + int64_t(k) * d.Qm + s] * ex<T>(lam[d.lami(it.b, it.h, it.t0 + k)] - ls);
  }
  __device__ float b(const Item& it, int seg, int k, int p) const {
    const Dims& d = this->d;
    if (seg == 1) return dstates[d.dsti(it.b, it.h, it.c) + int64_t(p) * d.N + k];
    return to_f(dy[d.xi(it.b, it.t0 + k, it.h) + p]);
  }
  __device__ void epilogue(const Item& it, const float (*Cs)[kCsLd], int m0, int n0, int M, int Nc, int tn) const {
    const Dims& d = this->d;
    const int rows = min(kBM, M - m0), cols = min(kBN, Nc - n0);
    const float Dh = to_f(D[it.h]);
    for (int e = threadIdx.x; e < kBM * kBN; e += kThreads) {
      const int r = e / kBN, c = e % kBN;
      if (r < rows && c < cols) {
        const int t = it.t0 + m0 + r;
        const int64_t i = d.xi(it.b, t, it.h) + n0 + c;
        dx[i] = from_f<T>(Dh * to_f(dy[i]) + dt[d.dti(it.b, t, it.h)] * Cs[r][c]);
      }
    }
    auto at = [&](int r, int c) { return d.xi(it.b, it.t0 + m0 + r, it.h) + n0 + c; };
    auto row = [&](int r) { return d.lami(it.b, it.h, it.t0 + m0 + r) * n_tiles + tn; };
    tile_row_sums(
        rows, cols, [&](int r, int c) { return to_f(x[at(r, c)]) * Cs[r][c]; }, [&](int r, float v) { rx[row(r)] = v; });
    tile_row_sums(
        rows, cols, [&](int r, int c) { return to_f(x[at(r, c)]) * to_f(dy[at(r, c)]); },
        [&](int r, float v) { rdd[row(r)] = v; });
  }
};

// dCB[l, s] = sum over the group's heads of exp(lam_l - lam_s) dy_l . xb_s (s <= l): one segment
// per head, each scaled by its own decay.
template <class T>
struct ProbDCB : ProbBase<T> {
  static constexpr bool kScaled = true;
  const T *x, *dy;
  const float *dt, *lam;
  float* dcb;
  __device__ Item item(int i) const { return group_item(this->d, i); }
  __device__ int rows(const Item& it) const { return it.L; }
  __device__ int cols(const Item& it) const { return it.L; }
  __device__ int nseg(const Item&) const { return this->d.hpg; }
  __device__ bool skip(const Item&, int m0, int n0) const { return n0 > m0 + kBM - 1; }
  __device__ void k_range(const Item&, int, int, int, int& lo, int& hi) const { lo = 0, hi = this->d.P; }
  __device__ bool a_kfast(int) const { return true; }
  __device__ bool b_kfast(int) const { return true; }
  __device__ float a(const Item& it, int j, int l, int p) const {
    const int h = it.g * this->d.hpg + j;
    return to_f(dy[this->d.xi(it.b, it.t0 + l, h) + p]);
  }
  __device__ float b(const Item& it, int j, int p, int s) const {
    const Dims& d = this->d;
    const int h = it.g * d.hpg + j;
    return to_f(x[d.xi(it.b, it.t0 + s, h) + p]) * dt[d.dti(it.b, it.t0 + s, h)];
  }
  __device__ float scale(const Item& it, int j, int l, int s) const {
    if (s > l) return 0.f;
    const Dims& d = this->d;
    const int h = it.g * d.hpg + j;
    return ex<T>(lam[d.lami(it.b, h, it.t0 + l)] - lam[d.lami(it.b, h, it.t0 + s)]);
  }
  __device__ void epilogue(const Item& it, const float (*Cs)[kCsLd], int m0, int n0, int M, int Nc, int) const {
    float* out = dcb + this->d.cbi(it.b, it.c, it.g);
    for (int e = threadIdx.x; e < kBM * kBN; e += kThreads) {
      const int r = e / kBN, c = e % kBN;
      if (m0 + r < M && n0 + c < Nc) out[int64_t(m0 + r) * this->d.Qm + n0 + c] = Cs[r][c];
    }
  }
};

// Per (b, c, g), rows = tokens of the chunk, columns = N, segment 0 the C B^T part, segments 1..hpg
// the heads' state parts:
//   dC[l, n] = sum_{s<=l} dCB[l, s] B[s, n] + sum_h exp(lam_l) sum_p dy[l, p] Sin[p, n]
//   dB[s, n] = sum_{l>=s} dCB[l, s] C[l, n] + sum_h w_s sum_p xb[s, p] dSout[p, n]
template <class T>
struct ProbDBC : ProbBase<T> {
  bool is_dB;
  const T *x, *dy, *Bm, *Cm;
  const float *dt, *lam, *dcb, *states, *dstates;
  T* out;
  __device__ Item item(int i) const { return group_item(this->d, i); }
  __device__ int rows(const Item& it) const { return it.L; }
  __device__ int cols(const Item&) const { return this->d.N; }
  __device__ int nseg(const Item&) const { return 1 + this->d.hpg; }
  __device__ void k_range(const Item& it, int seg, int m0, int, int& lo, int& hi) const {
    if (seg > 0) lo = 0, hi = this->d.P;
    else if (is_dB) lo = m0, hi = it.L;
    else lo = 0, hi = min(it.L, m0 + kBM);
  }
  __device__ bool a_kfast(int seg) const { return seg > 0 || !is_dB; }
  __device__ bool b_kfast(int) const { return false; }
  __device__ float a(const Item& it, int seg, int m, int k) const {
    const Dims& d = this->d;
    if (seg == 0) {
      if (is_dB) return k >= m ? dcb[d.cbi(it.b, it.c, it.g) + int64_t(k) * d.Qm + m] : 0.f;
      return k <= m ? dcb[d.cbi(it.b, it.c, it.g) + int64_t(m) * d.Qm + k] : 0.f;
    }
    const int h = it.g * d.hpg + seg - 1, t = it.t0 + m;
    const float lm = lam[d.lami(it.b, h, t)];
    if (!is_dB) return to_f(dy[d.xi(it.b, t, h) + k]) * ex<T>(lm);
    const float last = lam[d.lami(it.b, h, it.t0 + it.L - 1)];
    return to_f(x[d.xi(it.b, t, h) + k]) * dt[d.dti(it.b, t, h)] * ex<T>(last - lm);
  }
  __device__ float b(const Item& it, int seg, int k, int n) const {
    const Dims& d = this->d;
    if (seg == 0) return to_f((is_dB ? Cm : Bm)[d.bci(it.b, it.t0 + k, it.g) + n]);
    const int h = it.g * d.hpg + seg - 1;
    const float* s = is_dB ? dstates + d.dsti(it.b, h, it.c) : states + d.sti(it.b, h, it.c);
    return s[int64_t(k) * d.N + n];
  }
  __device__ void epilogue(const Item& it, const float (*Cs)[kCsLd], int m0, int n0, int M, int Nc, int) const {
    for (int e = threadIdx.x; e < kBM * kBN; e += kThreads) {
      const int r = e / kBN, c = e % kBN;
      if (m0 + r < M && n0 + c < Nc) out[this->d.bci(it.b, it.t0 + m0 + r, it.g) + n0 + c] = from_f<T>(Cs[r][c]);
    }
  }
};

}  // namespace nemotron::ops::ssd
