#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/blas.h"
#include "backend/cpu/parallel.h"
#include "core/op_profiler.h"
#include "ops/dispatch.h"
#include "ops/seq_idx.h"
#include "ops/ssd_scan.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/ssd_scan_cuda.h"
#endif

namespace nemotron::ops {

namespace {


struct ScanDims {
  int64_t B, T, nH, P, G, N, Q;
  int64_t hpg() const { return nH / G; }      // heads per group
  int64_t sx() const { return nH * P; }       // x/y elements per token
  int64_t sbc() const { return G * N; }       // Bm/Cm elements per token
  int64_t chunks() const { return (T + Q - 1) / Q; }
  int64_t qmax() const { return std::min(Q, T); }
  // multiply-adds of one (batch, group) task, roughly
  int64_t group_work() const { return hpg() * T * (qmax() * (P + N) + 3 * P * N); }
};

template <class T>
struct ScanIn {
  const T *x, *dt, *A, *Bm, *Cm, *D, *init;  // init null = zero initial state
  const int32_t* seq;                        // seq_idx [B, T]; null = one sequence per row
};

// Which products of one chunk cross a packed-sequence boundary (ops/seq_idx.h). `entering` is the
// sequence the carried state belongs to: that of the token before the chunk, or for the first
// chunk the row's first sequence (the only one the initial state feeds). Without seq_idx every
// product is kept.
struct ChunkMask {
  const int32_t* sq = nullptr;  // ids of the chunk's L tokens; null = no boundaries
  int32_t entering = 0;
  int64_t L = 0;
  ChunkMask(const int32_t* seq, int64_t b, int64_t T, int64_t t0, int64_t L_) : L(L_) {
    if (!seq) return;
    sq = seq + b * T + t0;
    entering = t0 == 0 ? sq[0] : sq[-1];
  }
  bool same(int64_t l, int64_t s) const { return !sq || sq[l] == sq[s]; }           // intra-chunk pair
  bool state_reaches(int64_t l) const { return !sq || sq[l] == entering; }           // carried state -> token l
  bool leaves(int64_t l) const { return !sq || sq[l] == sq[L - 1]; }                 // token l -> outgoing state
  bool state_survives() const { return !sq || sq[L - 1] == entering; }               // carried -> outgoing
};

// One head over one chunk of L tokens: lam[l] = sum_{j<=l} dt_j A (in-chunk log-decay) and
// xb[l, :] = dt_l x_l (discretised input).
template <class T>
void discretize(const ScanDims& d, const T* dtc, const T* xc, T A, int64_t L, T* lam, T* xb) {
  T acc = 0;
  for (int64_t l = 0; l < L; ++l) {
    T dt = dtc[l * d.nH];
    acc += dt * A;
    lam[l] = acc;
    for (int64_t p = 0; p < d.P; ++p) xb[l * d.P + p] = dt * xc[l * d.sx() + p];
  }
}

// E[l, s] = exp(lam_l - lam_s) for s <= l in the same sequence, 0 elsewhere; M = CB o E.
template <class T>
void decay_matrices(const T* lam, const T* CB, const ChunkMask& mask, T* E, T* M) {
  const int64_t L = mask.L;
  for (int64_t l = 0; l < L; ++l)
    for (int64_t s = 0; s < L; ++s) {
      T e = s <= l && mask.same(l, s) ? std::exp(lam[l] - lam[s]) : T(0);
      if (E) E[l * L + s] = e;
      M[l * L + s] = CB[l * L + s] * e;
    }
}

// S <- exp(lam_{L-1}) S + xb^T (w o B), w_l = exp(lam_{L-1} - lam_l): the state after the chunk.
// Across a boundary the carried state is dropped and earlier sequences' tokens contribute nothing.
template <class T>
void advance_state(const ScanDims& d, const T* lam, const T* xb, const T* Bc, const ChunkMask& mask, T* Bs, T* S) {
  const int64_t L = mask.L;
  T last = lam[L - 1];
  for (int64_t l = 0; l < L; ++l) {
    T w = mask.leaves(l) ? std::exp(last - lam[l]) : T(0);
    for (int64_t n = 0; n < d.N; ++n) Bs[l * d.N + n] = w * Bc[l * d.sbc() + n];
  }
  T decay = mask.state_survives() ? std::exp(last) : T(0);
  for (int64_t i = 0; i < d.P * d.N; ++i) S[i] *= decay;
  cpu::gemm<T>(true, false, d.P, d.N, L, T(1), xb, d.P, Bs, d.N, T(1), S, d.N);
}

template <class T>
void load_initial_states(const ScanDims& d, const T* init, int64_t b, int64_t g, T* S) {
  int64_t PN = d.P * d.N;
  for (int64_t j = 0; j < d.hpg(); ++j) {
    int64_t h = g * d.hpg() + j;
    for (int64_t i = 0; i < PN; ++i) S[j * PN + i] = init ? init[(b * d.nH + h) * PN + i] : T(0);
  }
}

// Where chunk-end states go (ssd_scan.h SsdChunkStates): slots [B, chunks] (-1 = none), states
// [R, nH, P, N]; null slots = none at all.
template <class T>
struct ChunkOut {
  const int32_t* slots = nullptr;
  T* states = nullptr;
  // The state of head h after chunk c of row b, PN values from S, when that chunk has a slot.
  void put(const ScanDims& d, int64_t b, int64_t c, int64_t h, const T* S) const {
    if (!slots) return;
    const int32_t r = slots[b * d.chunks() + c];
    const int64_t PN = d.P * d.N;
    if (r >= 0) std::copy(S, S + PN, states + (r * d.nH + h) * PN);
  }
};

template <class T>
void chunked_forward(const ScanDims& d, const ScanIn<T>& in, T* y, T* final_state, const ChunkOut<T>& out) {
  const int64_t hpg = d.hpg(), sx = d.sx(), sbc = d.sbc(), Qm = d.qmax(), PN = d.P * d.N;
  cpu::parallel_for(d.B * d.G, [&](int64_t bg) {
    const int64_t b = bg / d.G, g = bg % d.G;
    std::vector<T> CB(Qm * Qm), M(Qm * Qm), xb(Qm * d.P), Cs(Qm * d.N), Bs(Qm * d.N), lam(Qm), S(hpg * PN);
    load_initial_states(d, in.init, b, g, S.data());
    for (int64_t t0 = 0; t0 < d.T; t0 += d.Q) {
      const int64_t L = std::min(d.Q, d.T - t0), row0 = b * d.T + t0;
      const ChunkMask mask(in.seq, b, d.T, t0, L);
      const T* Bc = in.Bm + row0 * sbc + g * d.N;
      const T* Cc = in.Cm + row0 * sbc + g * d.N;
      cpu::gemm<T>(false, true, L, L, d.N, T(1), Cc, sbc, Bc, sbc, T(0), CB.data(), L);  // CB[l,s] = C_l . B_s
      for (int64_t j = 0; j < hpg; ++j) {
        const int64_t h = g * hpg + j;
        const T* xc = in.x + row0 * sx + h * d.P;
        T* yc = y + row0 * sx + h * d.P;
        T* Sj = S.data() + j * PN;
        discretize(d, in.dt + row0 * d.nH + h, xc, in.A[h], L, lam.data(), xb.data());
        decay_matrices<T>(lam.data(), CB.data(), mask, nullptr, M.data());
        // intra-chunk: Y = M xb
        cpu::gemm<T>(false, false, L, d.P, L, T(1), M.data(), L, xb.data(), d.P, T(0), yc, sx);
        // from the entering state: Y[l] += exp(lam_l) S C_l
        for (int64_t l = 0; l < L; ++l) {
          T e = mask.state_reaches(l) ? std::exp(lam[l]) : T(0);
          for (int64_t n = 0; n < d.N; ++n) Cs[l * d.N + n] = e * Cc[l * sbc + n];
        }
        cpu::gemm<T>(false, true, L, d.P, d.N, T(1), Cs.data(), d.N, Sj, d.N, T(1), yc, sx);
        for (int64_t l = 0; l < L; ++l)
          for (int64_t p = 0; p < d.P; ++p) yc[l * sx + p] += in.D[h] * xc[l * sx + p];
        advance_state(d, lam.data(), xb.data(), Bc, mask, Bs.data(), Sj);
        out.put(d, b, t0 / d.Q, h, Sj);
      }
    }
    if (final_state)
      for (int64_t j = 0; j < hpg; ++j)
        std::copy(S.begin() + j * PN, S.begin() + (j + 1) * PN, final_state + (b * d.nH + g * hpg + j) * PN);
  }, cpu::grain_for(d.group_work()));
}

template <class T>
void naive_forward(const ScanDims& d, const ScanIn<T>& in, T* y, T* final_state, const ChunkOut<T>& out) {
  const int64_t sx = d.sx(), sbc = d.sbc(), PN = d.P * d.N;
  cpu::parallel_for(d.B * d.nH, [&](int64_t bh) {
    const int64_t b = bh / d.nH, h = bh % d.nH, g = h / d.hpg();
    std::vector<T> S(PN);
    for (int64_t i = 0; i < PN; ++i) S[i] = in.init ? in.init[bh * PN + i] : T(0);
    for (int64_t t = 0; t < d.T; ++t) {
      const int64_t row = b * d.T + t;
      if (in.seq && t > 0 && in.seq[row] != in.seq[row - 1]) std::fill(S.begin(), S.end(), T(0));  // a new sequence
      const T dt = in.dt[row * d.nH + h], alpha = std::exp(dt * in.A[h]);
      const T* xt = in.x + row * sx + h * d.P;
      const T* Bt = in.Bm + row * sbc + g * d.N;
      const T* Ct = in.Cm + row * sbc + g * d.N;
      T* yt = y + row * sx + h * d.P;
      for (int64_t p = 0; p < d.P; ++p) {
        T acc = 0;
        for (int64_t n = 0; n < d.N; ++n) {
          T& s = S[p * d.N + n];
          s = alpha * s + dt * xt[p] * Bt[n];
          acc += s * Ct[n];
        }
        yt[p] = acc + in.D[h] * xt[p];
      }
      if (t % d.Q == d.Q - 1 || t == d.T - 1) out.put(d, b, t / d.Q, h, S.data());
    }
    if (final_state) std::copy(S.begin(), S.end(), final_state + bh * PN);
  }, cpu::grain_for(3 * d.T * PN));
}

// The adjoint of chunked_forward. For each chunk, in reverse, with dS = dL/d(state leaving the
// chunk) and Sin = the state entering it (recomputed up front):
//   Y = M xb + diag(e^lam) C Sin^T + D x,   S_out = e^{lam_last} Sin + xb^T diag(w) B.
template <class T>
void chunked_backward(const ScanDims& d, const ScanIn<T>& in, const T* dy, const T* d_final, T* dx, T* ddt, T* dBm,
                      T* dCm, T* d_init, T* dA_part, T* dD_part) {
  const int64_t hpg = d.hpg(), sx = d.sx(), sbc = d.sbc(), Qm = d.qmax(), PN = d.P * d.N, nc = d.chunks();
  cpu::parallel_for(d.B * d.G, [&](int64_t bg) {
    const int64_t b = bg / d.G, g = bg % d.G;
    std::vector<T> CB(Qm * Qm), E(Qm * Qm), M(Qm * Qm), dM(Qm * Qm), dCB(Qm * Qm);
    std::vector<T> xb(Qm * d.P), dxb(Qm * d.P), dYs(Qm * d.P), tmpP(Qm * d.P), tmpN(Qm * d.N), Bs(Qm * d.N);
    std::vector<T> lam(Qm), dlam(Qm), dSin(PN), S(hpg * PN), Sall(nc * hpg * PN), dS(hpg * PN);

    // Recompute the state entering every chunk.
    load_initial_states(d, in.init, b, g, S.data());
    for (int64_t c = 0; c < nc; ++c) {
      const int64_t t0 = c * d.Q, L = std::min(d.Q, d.T - t0), row0 = b * d.T + t0;
      std::copy(S.begin(), S.end(), Sall.begin() + c * hpg * PN);
      for (int64_t j = 0; j < hpg; ++j) {
        const int64_t h = g * hpg + j;
        discretize(d, in.dt + row0 * d.nH + h, in.x + row0 * sx + h * d.P, in.A[h], L, lam.data(), xb.data());
        advance_state(d, lam.data(), xb.data(), in.Bm + row0 * sbc + g * d.N, ChunkMask(in.seq, b, d.T, t0, L),
                      Bs.data(), S.data() + j * PN);
      }
    }

    load_initial_states(d, d_final, b, g, dS.data());
    for (int64_t t = 0; t < d.T; ++t)
      for (int64_t n = 0; n < d.N; ++n) {
        dBm[(b * d.T + t) * sbc + g * d.N + n] = T(0);
        dCm[(b * d.T + t) * sbc + g * d.N + n] = T(0);
      }

    for (int64_t c = nc - 1; c >= 0; --c) {
      const int64_t t0 = c * d.Q, L = std::min(d.Q, d.T - t0), row0 = b * d.T + t0;
      const ChunkMask mask(in.seq, b, d.T, t0, L);
      const T* Bc = in.Bm + row0 * sbc + g * d.N;
      const T* Cc = in.Cm + row0 * sbc + g * d.N;
      T* dBc = dBm + row0 * sbc + g * d.N;
      T* dCc = dCm + row0 * sbc + g * d.N;
      cpu::gemm<T>(false, true, L, L, d.N, T(1), Cc, sbc, Bc, sbc, T(0), CB.data(), L);
      std::fill(dCB.begin(), dCB.begin() + L * L, T(0));
      for (int64_t j = 0; j < hpg; ++j) {
        const int64_t h = g * hpg + j;
        const T A = in.A[h], Dh = in.D[h];
        const T* xc = in.x + row0 * sx + h * d.P;
        const T* dtc = in.dt + row0 * d.nH + h;
        const T* dyc = dy + row0 * sx + h * d.P;
        T* dxc = dx + row0 * sx + h * d.P;
        T* ddtc = ddt + row0 * d.nH + h;
        const T* Sin = Sall.data() + (c * hpg + j) * PN;
        T* dSout = dS.data() + j * PN;
        discretize(d, dtc, xc, A, L, lam.data(), xb.data());
        decay_matrices(lam.data(), CB.data(), mask, E.data(), M.data());
        std::fill(dlam.begin(), dlam.begin() + L, T(0));
        const T last = lam[L - 1], decay = mask.state_survives() ? std::exp(last) : T(0);

        // Skip term D x.
        T dD = 0;
        for (int64_t l = 0; l < L; ++l)
          for (int64_t p = 0; p < d.P; ++p) {
            dxc[l * sx + p] = Dh * dyc[l * sx + p];
            dD += dyc[l * sx + p] * xc[l * sx + p];
          }
        dD_part[b * d.nH + h] += dD;

        // Entering-state term Y[l] += e^{lam_l} Sin C_l: dC, dSin, dlam.
        for (int64_t l = 0; l < L; ++l) {
          T e = mask.state_reaches(l) ? std::exp(lam[l]) : T(0);
          for (int64_t p = 0; p < d.P; ++p) dYs[l * d.P + p] = e * dyc[l * sx + p];
        }
        cpu::gemm<T>(false, false, L, d.N, d.P, T(1), dYs.data(), d.P, Sin, d.N, T(0), tmpN.data(), d.N);
        for (int64_t l = 0; l < L; ++l)
          for (int64_t n = 0; n < d.N; ++n) {
            dlam[l] += tmpN[l * d.N + n] * Cc[l * sbc + n];
            dCc[l * sbc + n] += tmpN[l * d.N + n];
          }
        cpu::gemm<T>(true, false, d.P, d.N, L, T(1), dYs.data(), d.P, Cc, sbc, T(0), dSin.data(), d.N);

        // State passing S_out = e^{last} Sin + xb^T diag(w) B.
        T dot = 0;
        for (int64_t i = 0; i < PN; ++i) {
          dot += dSout[i] * Sin[i];
          dSin[i] += decay * dSout[i];
        }
        dlam[L - 1] += decay * dot;
        cpu::gemm<T>(false, true, L, d.P, d.N, T(1), Bc, sbc, dSout, d.N, T(0), tmpP.data(), d.P);
        cpu::gemm<T>(false, false, L, d.N, d.P, T(1), xb.data(), d.P, dSout, d.N, T(0), tmpN.data(), d.N);
        for (int64_t l = 0; l < L; ++l) {
          T w = mask.leaves(l) ? std::exp(last - lam[l]) : T(0), dw = 0;
          for (int64_t p = 0; p < d.P; ++p) {
            dw += xb[l * d.P + p] * tmpP[l * d.P + p];
            dxb[l * d.P + p] = w * tmpP[l * d.P + p];
          }
          dlam[L - 1] += w * dw;
          dlam[l] -= w * dw;
          for (int64_t n = 0; n < d.N; ++n) dBc[l * sbc + n] += w * tmpN[l * d.N + n];
        }

        // Intra-chunk term Y = M xb, M = CB o E.
        cpu::gemm<T>(false, true, L, L, d.P, T(1), dyc, sx, xb.data(), d.P, T(0), dM.data(), L);
        cpu::gemm<T>(true, false, L, d.P, L, T(1), M.data(), L, dyc, sx, T(1), dxb.data(), d.P);
        for (int64_t l = 0; l < L; ++l)
          for (int64_t s = 0; s < l; ++s) {  // the diagonal's lam terms cancel
            T gm = dM[l * L + s] * M[l * L + s];
            dlam[l] += gm;
            dlam[s] -= gm;
          }
        for (int64_t l = 0; l < L; ++l)
          for (int64_t s = 0; s <= l; ++s) dCB[l * L + s] += dM[l * L + s] * E[l * L + s];

        // xb = dt x and lam = cumsum(dt A): da_l = sum_{l' >= l} dlam_{l'}.
        T da = 0, dA = 0;
        for (int64_t l = L - 1; l >= 0; --l) {
          da += dlam[l];
          const T dt = dtc[l * d.nH];
          T g_dt = A * da;
          for (int64_t p = 0; p < d.P; ++p) {
            g_dt += xc[l * sx + p] * dxb[l * d.P + p];
            dxc[l * sx + p] += dt * dxb[l * d.P + p];
          }
          ddtc[l * d.nH] = g_dt;
          dA += dt * da;
        }
        dA_part[b * d.nH + h] += dA;
        std::copy(dSin.begin(), dSin.end(), dSout);
      }
      // CB is shared by the heads of the group: dC += dCB B, dB += dCB^T C.
      cpu::gemm<T>(false, false, L, d.N, L, T(1), dCB.data(), L, Bc, sbc, T(1), dCc, sbc);
      cpu::gemm<T>(true, false, L, d.N, L, T(1), dCB.data(), L, Cc, sbc, T(1), dBc, sbc);
    }
    if (d_init)
      for (int64_t j = 0; j < hpg; ++j)
        std::copy(dS.begin() + j * PN, dS.begin() + (j + 1) * PN, d_init + (b * d.nH + g * hpg + j) * PN);
  }, cpu::grain_for(3 * d.group_work()));
}

// Shapes and dtypes (src/ops/CUDA.md): x, Bm, Cm, D in the compute dtype; dt, A and the states in
// its stat_dtype. On the CPU all coincide.
ScanDims check_args(const SsdScanArgs& a, const char* op) {
  NM_CHECK(a.x.rank() == 4, "{}: x must be [B, T, nH, P], got {}", op, a.x.shape().str());
  NM_CHECK(a.Bm.rank() == 4, "{}: Bm must be [B, T, G, N], got {}", op, a.Bm.shape().str());
  ScanDims d{a.x.dim(0), a.x.dim(1), a.x.dim(2), a.x.dim(3), a.Bm.dim(2), a.Bm.dim(3), a.chunk_size};
  NM_CHECK(d.Q >= 1, "{}: chunk_size must be positive, got {}", op, d.Q);
  NM_CHECK(d.G >= 1 && d.nH % d.G == 0, "{}: {} heads are not a multiple of {} groups", op, d.nH, d.G);
  expect_shape(a.dt, {d.B, d.T, d.nH}, "ssd_scan dt");
  expect_shape(a.A, {d.nH}, "ssd_scan A");
  expect_shape(a.Bm, {d.B, d.T, d.G, d.N}, "ssd_scan Bm");
  expect_shape(a.Cm, {d.B, d.T, d.G, d.N}, "ssd_scan Cm");
  expect_shape(a.D, {d.nH}, "ssd_scan D");
  if (a.initial_state.defined()) expect_shape(a.initial_state, {d.B, d.nH, d.P, d.N}, "ssd_scan initial_state");
  const DType T = a.x.dtype(), S = stat_dtype(T);
  for (const Tensor* t : {&a.Bm, &a.Cm, &a.D}) expect_dtype(*t, T, "ssd_scan input");
  for (const Tensor* t : {&a.dt, &a.A}) expect_dtype(*t, S, "ssd_scan dt/A (stat_dtype)");
  if (a.initial_state.defined()) expect_dtype(a.initial_state, S, "ssd_scan initial_state");
  check_seq_idx(a.seq_idx, d.B, d.T, a.x, op);
  return d;
}

// The chunk-end state outputs (ssd_scan.h): shapes, dtypes, device; on the CPU also that the
// slots are in range and distinct (on a GPU that would need a copy back: the caller is trusted).
void check_chunk_states(const SsdChunkStates& cs, const ScanDims& d, const Tensor& x, const char* op) {
  const Tensor& st = cs.states;
  NM_CHECK(st.rank() == 4 && st.dim(1) == d.nH && st.dim(2) == d.P && st.dim(3) == d.N,
           "{}: chunk states must be [R, {}, {}, {}], got {}", op, d.nH, d.P, d.N, st.shape().str());
  expect_dtype(st, stat_dtype(x.dtype()), "ssd_scan chunk states (stat_dtype)");
  expect_shape(cs.slots, {d.B, d.chunks()}, "ssd_scan chunk slots");
  expect_dtype(cs.slots, DType::i32, "ssd_scan chunk slots");
  NM_CHECK(st.device() == x.device() && cs.slots.device() == x.device(), "{}: chunk states on {}, x on {}", op,
           st.device().str(), x.device().str());
  if (!x.device().is_cpu()) return;
  std::vector<char> used(static_cast<size_t>(st.dim(0)), 0);
  const int32_t* s = cs.slots.data<int32_t>();
  for (int64_t i = 0; i < cs.slots.numel(); ++i) {
    if (s[i] < 0) continue;
    NM_CHECK(s[i] < st.dim(0), "{}: chunk slot {} outside [0, {})", op, s[i], st.dim(0));
    NM_CHECK(!used[s[i]], "{}: chunk slot {} named twice", op, s[i]);
    used[s[i]] = 1;
  }
}

#if NEMOTRON_CUDA
bool on_cuda(const SsdScanArgs& a) { return a.x.device().is_cuda(); }

SsdScanCudaArgs cuda_args(const SsdScanArgs& a, const ScanDims& d) {
  NM_CHECK(a.x.dtype() == DType::f32 || a.x.dtype() == DType::bf16, "ssd_scan on CUDA: float32 or bfloat16, got {}",
           dtype_name(a.x.dtype()));
  SsdScanCudaArgs c;
  c.x = a.x.raw(), c.Bm = a.Bm.raw(), c.Cm = a.Cm.raw(), c.D = a.D.raw();
  c.dt = static_cast<const float*>(a.dt.raw()), c.A = static_cast<const float*>(a.A.raw());
  c.initial_state = a.initial_state.defined() ? static_cast<const float*>(a.initial_state.raw()) : nullptr;
  c.B = d.B, c.T = d.T, c.nH = d.nH, c.P = d.P, c.G = d.G, c.N = d.N, c.Q = d.Q;
  c.bf16 = a.x.dtype() == DType::bf16;
  c.seq_idx = a.seq_idx.defined() ? static_cast<const int32_t*>(a.seq_idx.raw()) : nullptr;
  return c;
}
#endif

template <class T>
ScanIn<T> inputs(const SsdScanArgs& a) {
  return {a.x.data<T>(),  a.dt.data<T>(), a.A.data<T>(), a.Bm.data<T>(), a.Cm.data<T>(), a.D.data<T>(),
          a.initial_state.defined() ? a.initial_state.data<T>() : nullptr, seq_idx_ptr(a.seq_idx)};
}

void run_forward(Context& ctx, const SsdScanArgs& a, Tensor& y, Tensor* final_state, SsdChunkStates* cs, bool naive,
                 const char* op) {
  ScanDims d = check_args(a, op);
  if (cs) check_chunk_states(*cs, d, a.x, op);
  expect_shape(y, a.x.shape(), "ssd_scan y");
  expect_dtype(y, a.x.dtype(), "ssd_scan y");
  if (final_state) {
    expect_shape(*final_state, {d.B, d.nH, d.P, d.N}, "ssd_scan final_state");
    expect_dtype(*final_state, stat_dtype(a.x.dtype()), "ssd_scan final_state");
  }
#if NEMOTRON_CUDA
  if (on_cuda(a) && !naive) {
    SsdScanCudaArgs c = cuda_args(a, d);
    c.y = y.raw(), c.final_state = final_state ? static_cast<float*>(final_state->raw()) : nullptr;
    if (cs) {
      c.chunk_slots = static_cast<const int32_t*>(cs->slots.raw());
      c.chunk_states = static_cast<float*>(cs->states.raw());
    }
    NM_CUDA_CHECK(ssd_scan_forward_cuda(c, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(a.x, op);
  dispatch_float(a.x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    T* fs = final_state ? final_state->data<T>() : nullptr;
    ChunkOut<T> out;
    if (cs) out.slots = cs->slots.data<int32_t>(), out.states = cs->states.data<T>();
    if (naive) naive_forward<T>(d, inputs<T>(a), y.data<T>(), fs, out);
    else chunked_forward<T>(d, inputs<T>(a), y.data<T>(), fs, out);
  });
}

}  // namespace

void ssd_scan_forward(Context& ctx, const SsdScanArgs& args, Tensor& y, Tensor* final_state,
                      SsdChunkStates* chunk_states) {
  OpScope scope(ctx, OpPhase::ssd_scan, __func__);
  run_forward(ctx, args, y, final_state, chunk_states, false, "ssd_scan_forward");
}

void ssd_scan_naive_forward(Context& ctx, const SsdScanArgs& args, Tensor& y, Tensor* final_state,
                            SsdChunkStates* chunk_states) {
  OpScope scope(ctx, OpPhase::ssd_scan, __func__);
  run_forward(ctx, args, y, final_state, chunk_states, true, "ssd_scan_naive_forward");
}

void ssd_scan_backward(Context& ctx, const SsdScanArgs& args, const Tensor& dy, const Tensor* d_final_state,
                       SsdScanGrads& g) {
  OpScope scope(ctx, OpPhase::ssd_scan, __func__);
  const char* op = "ssd_scan_backward";
  ScanDims d = check_args(args, op);
  expect_shape(dy, args.x.shape(), "ssd_scan dy");
  if (d_final_state) expect_shape(*d_final_state, {d.B, d.nH, d.P, d.N}, "ssd_scan d_final_state");
  expect_shape(g.dx, args.x.shape(), "ssd_scan dx");
  expect_shape(g.ddt, args.dt.shape(), "ssd_scan ddt");
  expect_shape(g.dA, {d.nH}, "ssd_scan dA");
  expect_shape(g.dBm, args.Bm.shape(), "ssd_scan dBm");
  expect_shape(g.dCm, args.Cm.shape(), "ssd_scan dCm");
  expect_shape(g.dD, {d.nH}, "ssd_scan dD");
  if (g.d_initial_state.defined()) {
    NM_CHECK(args.initial_state.defined(), "{}: d_initial_state requested without an initial_state", op);
    expect_shape(g.d_initial_state, {d.B, d.nH, d.P, d.N}, "ssd_scan d_initial_state");
  }
  const DType T = args.x.dtype(), S = stat_dtype(T), Gd = grad_dtype(T);
  for (const Tensor* t : std::initializer_list<const Tensor*>{&dy, &g.dx, &g.dBm, &g.dCm})
    expect_dtype(*t, T, "ssd_scan dy/dx/dBm/dCm");
  expect_dtype(g.ddt, S, "ssd_scan ddt (stat_dtype)");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&g.dA, &g.dD})
    expect_dtype(*t, Gd, "ssd_scan dA/dD (grad_dtype)");
  if (d_final_state) expect_dtype(*d_final_state, S, "ssd_scan d_final_state");
  if (g.d_initial_state.defined()) expect_dtype(g.d_initial_state, S, "ssd_scan d_initial_state");
#if NEMOTRON_CUDA
  if (on_cuda(args)) {
    SsdScanCudaArgs c = cuda_args(args, d);
    c.dy = dy.raw();
    c.d_final_state = d_final_state ? static_cast<const float*>(d_final_state->raw()) : nullptr;
    c.dx = g.dx.raw(), c.dBm = g.dBm.raw(), c.dCm = g.dCm.raw();
    c.ddt = static_cast<float*>(g.ddt.raw()), c.dA = static_cast<float*>(g.dA.raw());
    c.dD = static_cast<float*>(g.dD.raw());
    c.d_initial_state = g.d_initial_state.defined() ? static_cast<float*>(g.d_initial_state.raw()) : nullptr;
    NM_CUDA_CHECK(ssd_scan_backward_cuda(c, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(args.x, op);
  dispatch_float(args.x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    // Per-(batch, head) partial sums of dA and dD, reduced in a fixed order afterwards.
    std::vector<T> dA_part(d.B * d.nH, T(0)), dD_part(d.B * d.nH, T(0));
    chunked_backward<T>(d, inputs<T>(args), dy.data<T>(), d_final_state ? d_final_state->data<T>() : nullptr,
                        g.dx.data<T>(), g.ddt.data<T>(), g.dBm.data<T>(), g.dCm.data<T>(),
                        g.d_initial_state.defined() ? g.d_initial_state.data<T>() : nullptr, dA_part.data(),
                        dD_part.data());
    T* dA = g.dA.data<T>();
    T* dD = g.dD.data<T>();
    for (int64_t b = 0; b < d.B; ++b)
      for (int64_t h = 0; h < d.nH; ++h) {
        dA[h] += dA_part[b * d.nH + h];
        dD[h] += dD_part[b * d.nH + h];
      }
  });
}

}  // namespace nemotron::ops
