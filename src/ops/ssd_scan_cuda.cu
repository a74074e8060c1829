// The chunked SSD scan on CUDA: the chunk products are tile GEMMs (ssd_scan_cuda_problems.cuh),
// the two sequential passes over chunks (the state and its adjoint) are elementwise kernels.
// Backward uses the identity dlam_l = dy_l . (y_l - D x_l) - xb_l . dxb_l + [l = last] <dSout, Sout>
// (the decay gradients of all chunk products collapse to these row dots), so no per-element
// decay gradient is formed. All reductions run in a fixed order (no atomics): deterministic.
#include <algorithm>

#include "ops/ssd_scan_cuda.h"
#include "ops/ssd_scan_cuda_problems.cuh"

namespace nemotron::ops {

namespace {

using ssd::Dims;

constexpr int kPassThreads = 256, kPassPerThread = 4, kPassSlice = kPassThreads * kPassPerThread;

Dims make_dims(const SsdScanCudaArgs& a) {
  Dims d;
  d.B = static_cast<int>(a.B), d.T = static_cast<int>(a.T), d.nH = static_cast<int>(a.nH);
  d.P = static_cast<int>(a.P), d.G = static_cast<int>(a.G), d.N = static_cast<int>(a.N);
  d.Q = static_cast<int>(std::min(a.Q, a.T)), d.nc = static_cast<int>((a.T + d.Q - 1) / d.Q);
  d.hpg = d.nH / d.G, d.Qm = d.Q;
  return d;
}

// lam[b, h, t] = in-chunk cumulative sum of dt A_h; one thread per (b, chunk, head).
__global__ void lam_kernel(Dims d, const float* dt, const float* A, float* lam) {
  const int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (idx >= int64_t(d.B) * d.nc * d.nH) return;
  const int h = static_cast<int>(idx % d.nH), c = static_cast<int>((idx / d.nH) % d.nc);
  const int b = static_cast<int>(idx / (int64_t(d.nH) * d.nc));
  const int t0 = c * d.Q, t1 = min(d.T, t0 + d.Q);
  const float Ah = A[h];
  float acc = 0.f;
  for (int t = t0; t < t1; ++t) {
    acc += dt[d.dti(b, t, h)] * Ah;
    lam[d.lami(b, h, t)] = acc;
  }
}

__device__ inline float chunk_last(const Dims& d, const float* lam, int b, int h, int c) {
  return lam[d.lami(b, h, min(d.T, (c + 1) * d.Q) - 1)];
}

// states slot c holds S_loc of chunk c on entry and the state entering chunk c on exit; slot nc
// gets the final state. One block per (b, h) and slice of P*N.
__global__ void state_pass_kernel(Dims d, const float* lam, const float* init, float* states, float* final_state) {
  const int bh = blockIdx.x, b = bh / d.nH, h = bh % d.nH;
  const int64_t PN = int64_t(d.P) * d.N;
  float S[kPassPerThread];
  int64_t e[kPassPerThread];
  for (int q = 0; q < kPassPerThread; ++q) {
    e[q] = blockIdx.y * int64_t(kPassSlice) + q * kPassThreads + threadIdx.x;
    S[q] = init && e[q] < PN ? init[bh * PN + e[q]] : 0.f;
  }
  for (int c = 0; c < d.nc; ++c) {
    float* st = states + d.sti(b, h, c);
    const float decay = expf(chunk_last(d, lam, b, h, c));
    for (int q = 0; q < kPassPerThread; ++q) {
      if (e[q] >= PN) continue;
      const float loc = st[e[q]];
      st[e[q]] = S[q];
      S[q] = decay * S[q] + loc;
    }
  }
  for (int q = 0; q < kPassPerThread; ++q) {
    if (e[q] >= PN) continue;
    states[d.sti(b, h, d.nc) + e[q]] = S[q];
    if (final_state) final_state[bh * PN + e[q]] = S[q];
  }
}

__device__ float block_sum(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float t = 0.f;
  for (int w = 0; w < kPassThreads / 32; ++w) t += red[w];
  __syncthreads();
  return t;
}

// The adjoint pass, chunks in reverse: dstates slot c holds Z_c on entry and dSout of chunk c on
// exit; sdot[b, h, c, slice] = <dSout_c, Sout_c> over the slice; d_init = dS entering chunk 0.
__global__ void state_adjoint_pass_kernel(Dims d, const float* lam, const float* states, const float* d_final,
                                          float* dstates, float* sdot, float* d_init) {
  __shared__ float red[kPassThreads / 32];
  const int bh = blockIdx.x, b = bh / d.nH, h = bh % d.nH;
  const int64_t PN = int64_t(d.P) * d.N;
  float dS[kPassPerThread];
  int64_t e[kPassPerThread];
  for (int q = 0; q < kPassPerThread; ++q) {
    e[q] = blockIdx.y * int64_t(kPassSlice) + q * kPassThreads + threadIdx.x;
    dS[q] = d_final && e[q] < PN ? d_final[bh * PN + e[q]] : 0.f;
  }
  for (int c = d.nc - 1; c >= 0; --c) {
    float* ds = dstates + d.dsti(b, h, c);
    const float* sout = states + d.sti(b, h, c + 1);
    const float decay = expf(chunk_last(d, lam, b, h, c));
    float dot = 0.f;
    for (int q = 0; q < kPassPerThread; ++q) {
      if (e[q] >= PN) continue;
      const float z = ds[e[q]];
      ds[e[q]] = dS[q];
      dot += dS[q] * sout[e[q]];
      dS[q] = decay * dS[q] + z;
    }
    dot = block_sum(dot, red);
    if (threadIdx.x == 0) sdot[(int64_t(bh) * d.nc + c) * gridDim.y + blockIdx.y] = dot;
  }
  if (d_init)
    for (int q = 0; q < kPassPerThread; ++q)
      if (e[q] < PN) d_init[bh * PN + e[q]] = dS[q];
}

// Per (b, c, h): dlam from the row dots, then ddt = A da + rx (da = reverse cumsum of dlam) and
// the per-chunk partial sums of dA and dD.
__global__ void dlam_kernel(Dims d, const float* dt, const float* A, const float* r1, const float* rx,
                            const float* rdd, int n_tiles, const float* sdot, int slices, float* ddt, float* dA_part,
                            float* dD_part) {
  const int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (idx >= int64_t(d.B) * d.nc * d.nH) return;
  const int h = static_cast<int>(idx % d.nH), c = static_cast<int>((idx / d.nH) % d.nc);
  const int b = static_cast<int>(idx / (int64_t(d.nH) * d.nc));
  const int t0 = c * d.Q, t1 = min(d.T, t0 + d.Q);
  const int64_t bhc = (int64_t(b) * d.nH + h) * d.nc + c;
  float s_out = 0.f;
  for (int s = 0; s < slices; ++s) s_out += sdot[bhc * slices + s];
  const float Ah = A[h];
  float da = 0.f, dA = 0.f, dD = 0.f;
  for (int t = t1 - 1; t >= t0; --t) {
    const int64_t row = d.lami(b, h, t) * n_tiles;
    float y_dot = 0.f, x_dot = 0.f;
    for (int j = 0; j < n_tiles; ++j) y_dot += r1[row + j], x_dot += rx[row + j], dD += rdd[row + j];
    const float dtv = dt[d.dti(b, t, h)];
    da += y_dot - dtv * x_dot + (t == t1 - 1 ? s_out : 0.f);
    ddt[d.dti(b, t, h)] = Ah * da + x_dot;
    dA += dtv * da;
  }
  dA_part[bhc] = dA;
  dD_part[bhc] = dD;
}

// dA[h] += sum over (b, c) of the partials, dD likewise, in a fixed order.
__global__ void param_reduce_kernel(Dims d, const float* dA_part, const float* dD_part, float* dA, float* dD) {
  const int h = blockIdx.x * blockDim.x + threadIdx.x;
  if (h >= d.nH) return;
  float a = 0.f, s = 0.f;
  for (int b = 0; b < d.B; ++b)
    for (int c = 0; c < d.nc; ++c) {
      const int64_t i = (int64_t(b) * d.nH + h) * d.nc + c;
      a += dA_part[i], s += dD_part[i];
    }
  dA[h] += a;
  dD[h] += s;
}

// Scratch of one call: cudaMallocAsync'd pieces, freed in order on the stream.
struct Scratch {
  cudaStream_t s;
  float* ptr[12] = {};
  int n = 0;
  cudaError_t err = cudaSuccess;
  float* get(int64_t count) {
    float* p = nullptr;
    if (err == cudaSuccess) err = cudaMallocAsync(reinterpret_cast<void**>(&p), std::max<int64_t>(count, 1) * 4, s);
    if (err == cudaSuccess) ptr[n++] = p;
    return p;
  }
  cudaError_t release(cudaError_t e) {
    for (int i = 0; i < n; ++i) {
      cudaError_t f = cudaFreeAsync(ptr[i], s);
      if (e == cudaSuccess) e = f;
    }
    return e != cudaSuccess ? e : err;
  }
};

unsigned blocks_for(int64_t n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

#define SSD_TRY(call)                        \
  do {                                       \
    cudaError_t e_ = (call);                 \
    if (e_ != cudaSuccess) return sc.release(e_); \
  } while (0)

// Shared first half of forward and backward: lam, CB, and the state entering every chunk.
template <class T>
cudaError_t chunk_states(const SsdScanCudaArgs& a, const Dims& d, cudaStream_t s, Scratch& sc, float* lam, float* cb,
                         float* states, float* final_state) {
  const int64_t bch = int64_t(d.B) * d.nc * d.nH, bcg = int64_t(d.B) * d.nc * d.G;
  lam_kernel<<<blocks_for(bch, 128), 128, 0, s>>>(d, a.dt, a.A, lam);
  SSD_TRY(cudaGetLastError());
  ssd::ProbCB<T> pcb;
  pcb.d = d, pcb.Bm = static_cast<const T*>(a.Bm), pcb.Cm = static_cast<const T*>(a.Cm), pcb.cb = cb;
  SSD_TRY(ssd::launch_tile_gemm(pcb, bcg, d.Q, d.Q, s));
  ssd::ProbChunkState<T> pst;
  pst.d = d, pst.x = static_cast<const T*>(a.x), pst.dy = nullptr, pst.BC = static_cast<const T*>(a.Bm);
  pst.dt = a.dt, pst.lam = lam, pst.out = states;
  SSD_TRY(ssd::launch_tile_gemm(pst, bch, d.P, d.N, s));
  const int64_t PN = int64_t(d.P) * d.N;
  state_pass_kernel<<<dim3(d.B * d.nH, blocks_for(PN, kPassSlice)), kPassThreads, 0, s>>>(d, lam, a.initial_state,
                                                                                          states, final_state);
  return cudaGetLastError();
}

template <class T>
cudaError_t forward(const SsdScanCudaArgs& a, cudaStream_t s) {
  const Dims d = make_dims(a);
  const int64_t PN = int64_t(d.P) * d.N;
  Scratch sc{s};
  float* lam = sc.get(int64_t(d.B) * d.nH * d.T);
  float* cb = sc.get(int64_t(d.B) * d.nc * d.G * d.Qm * d.Qm);
  float* states = sc.get(int64_t(d.B) * d.nH * (d.nc + 1) * PN);
  if (sc.err != cudaSuccess) return sc.release(sc.err);
  SSD_TRY(chunk_states<T>(a, d, s, sc, lam, cb, states, a.final_state));
  ssd::ProbY<T> py;
  py.d = d, py.x = static_cast<const T*>(a.x), py.Cm = static_cast<const T*>(a.Cm), py.D = static_cast<const T*>(a.D);
  py.dy = nullptr, py.dt = a.dt, py.lam = lam, py.cb = cb, py.states = states, py.y = static_cast<T*>(a.y);
  py.r1 = nullptr, py.n_tiles = 0;
  SSD_TRY(ssd::launch_tile_gemm(py, int64_t(d.B) * d.nc * d.nH, d.Q, d.P, s));
  return sc.release(cudaSuccess);
}

template <class T>
cudaError_t backward(const SsdScanCudaArgs& a, cudaStream_t s) {
  const Dims d = make_dims(a);
  const int64_t PN = int64_t(d.P) * d.N, bch = int64_t(d.B) * d.nc * d.nH, bcg = int64_t(d.B) * d.nc * d.G;
  const int n_tiles = (d.P + ssd::kBN - 1) / ssd::kBN;
  const int slices = static_cast<int>(blocks_for(PN, kPassSlice));
  Scratch sc{s};
  float* lam = sc.get(int64_t(d.B) * d.nH * d.T);
  float* cb = sc.get(bcg * d.Qm * d.Qm);
  float* dcb = sc.get(bcg * d.Qm * d.Qm);
  float* states = sc.get(int64_t(d.B) * d.nH * (d.nc + 1) * PN);
  float* dstates = sc.get(bch * PN);
  float* sdot = sc.get(bch * slices);
  float* r1 = sc.get(int64_t(d.B) * d.nH * d.T * n_tiles);
  float* rx = sc.get(int64_t(d.B) * d.nH * d.T * n_tiles);
  float* rdd = sc.get(int64_t(d.B) * d.nH * d.T * n_tiles);
  float* dA_part = sc.get(bch);
  float* dD_part = sc.get(bch);
  if (sc.err != cudaSuccess) return sc.release(sc.err);
  const T *x = static_cast<const T*>(a.x), *dy = static_cast<const T*>(a.dy);
  const T *Bm = static_cast<const T*>(a.Bm), *Cm = static_cast<const T*>(a.Cm);

  SSD_TRY(chunk_states<T>(a, d, s, sc, lam, cb, states, nullptr));
  ssd::ProbChunkState<T> pz;
  pz.d = d, pz.x = x, pz.dy = dy, pz.BC = Cm, pz.dt = a.dt, pz.lam = lam, pz.out = dstates;
  SSD_TRY(ssd::launch_tile_gemm(pz, bch, d.P, d.N, s));
  state_adjoint_pass_kernel<<<dim3(d.B * d.nH, slices), kPassThreads, 0, s>>>(d, lam, states, a.d_final_state, dstates,
                                                                               sdot, a.d_initial_state);
  SSD_TRY(cudaGetLastError());

  ssd::ProbY<T> py;
  py.d = d, py.x = x, py.Cm = Cm, py.D = static_cast<const T*>(a.D), py.dy = dy, py.dt = a.dt, py.lam = lam;
  py.cb = cb, py.states = states, py.y = nullptr, py.r1 = r1, py.n_tiles = n_tiles;
  SSD_TRY(ssd::launch_tile_gemm(py, bch, d.Q, d.P, s));
  ssd::ProbDxb<T> pdx;
  pdx.d = d, pdx.x = x, pdx.Bm = Bm, pdx.D = static_cast<const T*>(a.D), pdx.dy = dy, pdx.dt = a.dt, pdx.lam = lam;
  pdx.cb = cb, pdx.dstates = dstates, pdx.dx = static_cast<T*>(a.dx), pdx.rx = rx, pdx.rdd = rdd;
  pdx.n_tiles = n_tiles;
  SSD_TRY(ssd::launch_tile_gemm(pdx, bch, d.Q, d.P, s));
  ssd::ProbDCB<T> pdcb;
  pdcb.d = d, pdcb.x = x, pdcb.dy = dy, pdcb.dt = a.dt, pdcb.lam = lam, pdcb.dcb = dcb;
  SSD_TRY(ssd::launch_tile_gemm(pdcb, bcg, d.Q, d.Q, s));
  for (bool is_dB : {false, true}) {
    ssd::ProbDBC<T> p;
    p.d = d, p.is_dB = is_dB, p.x = x, p.dy = dy, p.Bm = Bm, p.Cm = Cm, p.dt = a.dt, p.lam = lam, p.dcb = dcb;
    p.states = states, p.dstates = dstates, p.out = static_cast<T*>(is_dB ? a.dBm : a.dCm);
    SSD_TRY(ssd::launch_tile_gemm(p, bcg, d.Q, d.N, s));
  }
  dlam_kernel<<<blocks_for(bch, 128), 128, 0, s>>>(d, a.dt, a.A, r1, rx, rdd, n_tiles, sdot, slices, a.ddt, dA_part,
                                                   dD_part);
  SSD_TRY(cudaGetLastError());
  param_reduce_kernel<<<blocks_for(d.nH, 128), 128, 0, s>>>(d, dA_part, dD_part, a.dA, a.dD);
  SSD_TRY(cudaGetLastError());
  return sc.release(cudaSuccess);
}

}  // namespace

cudaError_t ssd_scan_forward_cuda(const SsdScanCudaArgs& a, cudaStream_t s) {
  if (a.B == 0 || a.T == 0 || a.nH == 0) return cudaSuccess;
  return a.bf16 ? forward<__nv_bfloat16>(a, s) : forward<float>(a, s);
}

cudaError_t ssd_scan_backward_cuda(const SsdScanCudaArgs& a, cudaStream_t s) {
  if (a.B == 0 || a.T == 0 || a.nH == 0) return cudaSuccess;
  return a.bf16 ? backward<__nv_bfloat16>(a, s) : backward<float>(a, s);
}

}  // namespace nemotron::ops
