// The chunked SSD scan on CUDA: the chunk products are tile GEMMs (ssd_scan_cuda_problems.cuh),
// the two sequential passes over chunks (the state and its adjoint) are elementwise kernels.
// Backward uses the identity dlam_l = dy_l . (y_l - D x_l) - xb_l . dxb_l + [l = last] <dSout, Sout>
// (the decay gradients of all chunk products collapse to these row dots), so no per-element
// decay gradient is formed. All reductions run in a fixed order (no atomics): deterministic.
// Packed rows (seq_idx): the masks live in the decay factors, CB/dCB and the passes' chunk decay
// (ssd_scan_cuda_problems.cuh); every term of the identity above is a masked product or absent, so
// it holds unchanged. Without seq_idx each mask is one uniform branch on a null pointer.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <type_traits>

#include "ops/ssd_scan_cuda.h"
#include "ops/ssd_scan_chunk_y.cuh"
#include "ops/ssd_scan_cuda_problems.cuh"

namespace nemotron::ops {

namespace {

using ssd::Dims;

constexpr int kPassThreads = 256;

Dims make_dims(const SsdScanCudaArgs& a) {
  Dims d;
  d.B = static_cast<int>(a.B), d.T = static_cast<int>(a.T), d.nH = static_cast<int>(a.nH);
  d.P = static_cast<int>(a.P), d.G = static_cast<int>(a.G), d.N = static_cast<int>(a.N);
  d.Q = static_cast<int>(std::min(a.Q, a.T)), d.nc = static_cast<int>((a.T + d.Q - 1) / d.Q);
  d.hpg = d.nH / d.G, d.Qm = d.Q;
  d.seq = a.seq_idx;
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  d.vec = d.P % 8 == 0 && d.N % 8 == 0 && d.Qm % 8 == 0 && aligned(a.x) && aligned(a.Bm) && aligned(a.Cm) &&
          aligned(a.dy) && aligned(a.y) && aligned(a.dx) && aligned(a.dBm) && aligned(a.dCm);
  return d;
}

// lam[b, h, t] = in-chunk cumulative sum of dt A_h; one warp per (b, chunk, head), 32 tokens per
// step with a shuffle scan. Then the per-token decay factors the chunk products scale their operand
// runs with (one load each where they are used): el = exp(lam_t), w = exp(lam_last - lam_t),
// wdt = dt_t w.
__global__ void lam_kernel(Dims d, const float* __restrict__ dt, const float* __restrict__ A, float* __restrict__ lam,
                           ssd::Decay dk) {
  const int64_t warp = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= int64_t(d.B) * d.nc * d.nH) return;  // whole warps leave together
  const int h = static_cast<int>(warp % d.nH), c = static_cast<int>((warp / d.nH) % d.nc);
  const int b = static_cast<int>(warp / (int64_t(d.nH) * d.nc));
  const int t0 = c * d.Q, t1 = min(d.T, t0 + d.Q);
  const float Ah = A[h];
  float carry = 0.f;
  for (int base = t0; base < t1; base += 32) {
    const int t = base + lane;
    float v = t < t1 ? dt[d.dti(b, t, h)] * Ah : 0.f;
    for (int o = 1; o < 32; o <<= 1) {
      const float u = __shfl_up_sync(0xffffffffu, v, o);
      if (lane >= o) v += u;
    }
    v += carry;
    if (t < t1) lam[d.lami(b, h, t)] = v;
    carry = __shfl_sync(0xffffffffu, v, 31);
  }
  // Packed: the carried state reaches only tokens of its sequence, only tokens of the chunk's last
  // sequence reach the outgoing state.
  const int32_t* ids = d.seq ? d.seq + int64_t(b) * d.T : nullptr;
  const int32_t in_id = ids ? d.entering(b, c) : 0, out_id = ids ? ids[t1 - 1] : 0;
  for (int t = t0 + lane; t < t1; t += 32) {  // carry = lam of the chunk's last token
    const int64_t i = d.lami(b, h, t);
    const float l = lam[i];
    const float wt = !ids || ids[t] == out_id ? expf(carry - l) : 0.f;
    dk.el[i] = !ids || ids[t] == in_id ? expf(l) : 0.f, dk.w[i] = wt, dk.wdt[i] = dt[d.dti(b, t, h)] * wt;
  }
}

__device__ inline float chunk_last(const Dims& d, const float* lam, int b, int h, int c) {
  return lam[d.lami(b, h, min(d.T, (c + 1) * d.Q) - 1)];
}

// The state passes walk the chunks of one (b, h) in order; each thread owns kV consecutive state
// elements (kV = 8: one 16-byte bf16 load or store per chunk where P, N and the pointers allow it,
// else 1) and issues the loads of kAhead chunks at once, so that a pass moves at the copy
// bandwidth rather than one load latency per chunk (the old one-element, one-chunk-ahead pass kept
// too few bytes in flight). kV = 8 keeps 64 bytes per thread in flight: 4 chunks of one operand
// (forward, 80 registers: 3 blocks/SM) or 2 of two (adjoint); 8 floats per operand per chunk.
template <int kV, int kOperands>
struct PassShape {
  static constexpr int kAhead = kV == 1 ? (kOperands == 2 ? 8 : 2) : 4 / kOperands;
};

template <class T, int kV>
__device__ inline void ld_vec(const T* p, float* v) {
  if constexpr (kV == 8) ssd::ld_run(p, 8, true, v);
  else v[0] = ssd::to_f(p[0]);
}
template <class T, int kV>
__device__ inline void st_vec(T* p, const float* v) {
  if constexpr (kV == 8) ssd::st_run(p, 8, true, v);
  else p[0] = ssd::from_f<T>(v[0]);
}

// Where the state after each chunk goes besides sin (SsdChunkStates; slots null = nowhere).
struct ChunkOut {
  const int32_t* slots = nullptr;
  float* states = nullptr;
};

// sin slot c = the state entering chunk c (from the S_loc of every chunk), slot nc = the final
// state; the state after chunk c also to out.states[out.slots[b, c]] where that is >= 0 (in
// float32, before sin's rounding to T).
template <class T, int kV>
__global__ void state_pass_kernel(Dims d, const float* __restrict__ lam, const float* __restrict__ init,
                                  const T* __restrict__ sloc, T* __restrict__ sin, float* __restrict__ final_state,
                                  ChunkOut out) {
  constexpr int kAhead = PassShape<kV, 1>::kAhead;
  const int bh = blockIdx.x, b = bh / d.nH, h = bh % d.nH;
  const int64_t PN = int64_t(d.P) * d.N, e = (blockIdx.y * int64_t(kPassThreads) + threadIdx.x) * kV;
  if (e >= PN) return;
  float S[kV];
#pragma unroll
  for (int j = 0; j < kV; ++j) S[j] = 0.f;
  if (init) ld_vec<float, kV>(init + bh * PN + e, S);
  for (int top = 0; top < d.nc; top += kAhead) {  // chunks top .. top + kAhead - 1
    float loc[kAhead][kV], decay[kAhead];
#pragma unroll
    for (int i = 0; i < kAhead; ++i) {
      const int c = top + i;
      decay[i] = 0.f;
#pragma unroll
      for (int j = 0; j < kV; ++j) loc[i][j] = 0.f;
      if (c < d.nc) {
        ld_vec<T, kV>(sloc + d.dsti(b, h, c) + e, loc[i]);
        decay[i] = chunk_last(d, lam, b, h, c);
      }
    }
#pragma unroll
    for (int i = 0; i < kAhead; ++i) {
      const int c = top + i;
      if (c >= d.nc) break;
      st_vec<T, kV>(sin + d.sti(b, h, c) + e, S);
      const float f = d.state_survives(b, c) ? expf(decay[i]) : 0.f;
#pragma unroll
      for (int j = 0; j < kV; ++j) S[j] = f * S[j] + loc[i][j];
      if (out.slots) {
        const int32_t r = out.slots[int64_t(b) * d.nc + c];
        if (r >= 0) st_vec<float, kV>(out.states + (int64_t(r) * d.nH + h) * PN + e, S);
      }
    }
  }
  st_vec<T, kV>(sin + d.sti(b, h, d.nc) + e, S);
  if (final_state) st_vec<float, kV>(final_state + bh * PN + e, S);
}

// The adjoint pass, chunks in reverse, from the Z of every chunk: dsout slot c = dSout of chunk c;
// sdot[b, h, c, slice] = <dSout_c, Sout_c> over the slice (kPassThreads * kV elements, one block);
// d_init = dS entering chunk 0. The block sums of kAhead chunks share one barrier.
template <class T, int kV>
__global__ void state_adjoint_pass_kernel(Dims d, const float* __restrict__ lam, const T* __restrict__ sin,
                                          const float* __restrict__ d_final, const T* __restrict__ z_all,
                                          T* __restrict__ dsout, float* __restrict__ sdot, float* __restrict__ d_init) {
  constexpr int kAhead = PassShape<kV, 2>::kAhead;
  __shared__ float red[kAhead][kPassThreads / 32];
  const int bh = blockIdx.x, b = bh / d.nH, h = bh % d.nH;
  const int64_t PN = int64_t(d.P) * d.N, e = (blockIdx.y * int64_t(kPassThreads) + threadIdx.x) * kV;
  const bool live = e < PN;  // every thread stays for the block sums
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float dS[kV];
#pragma unroll
  for (int j = 0; j < kV; ++j) dS[j] = 0.f;
  if (live && d_final) ld_vec<float, kV>(d_final + bh * PN + e, dS);
  for (int top = d.nc - 1; top >= 0; top -= kAhead) {  // chunks top, top - 1, ..., top - kAhead + 1
    float z[kAhead][kV], sout[kAhead][kV], decay[kAhead], dot[kAhead];
#pragma unroll
    for (int i = 0; i < kAhead; ++i) {
      const int c = top - i;
      decay[i] = 0.f;
#pragma unroll
      for (int j = 0; j < kV; ++j) z[i][j] = sout[i][j] = 0.f;
      if (c >= 0) {
        decay[i] = chunk_last(d, lam, b, h, c);
        if (live) ld_vec<T, kV>(z_all + d.dsti(b, h, c) + e, z[i]), ld_vec<T, kV>(sin + d.sti(b, h, c + 1) + e, sout[i]);
      }
    }
#pragma unroll
    for (int i = 0; i < kAhead; ++i) {
      const int c = top - i;
      dot[i] = 0.f;
#pragma unroll
      for (int j = 0; j < kV; ++j) dot[i] += dS[j] * sout[i][j];
      if (c >= 0) {
        if (live) st_vec<T, kV>(dsout + d.dsti(b, h, c) + e, dS);
        const float f = d.state_survives(b, c) ? expf(decay[i]) : 0.f;
#pragma unroll
        for (int j = 0; j < kV; ++j) dS[j] = f * dS[j] + z[i][j];
      }
    }
#pragma unroll
    for (int i = 0; i < kAhead; ++i) {
      float v = dot[i];
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      if (lane == 0) red[i][warp] = v;
    }
    __syncthreads();
    if (threadIdx.x < kAhead && top - static_cast<int>(threadIdx.x) >= 0) {
      float t = 0.f;
      for (int w = 0; w < kPassThreads / 32; ++w) t += red[threadIdx.x][w];
      sdot[(int64_t(bh) * d.nc + top - threadIdx.x) * gridDim.y + blockIdx.y] = t;
    }
    __syncthreads();
  }
  if (d_init && live) st_vec<float, kV>(d_init + bh * PN + e, dS);
}

// Elements per thread of the state passes: 8 where every state tensor they touch takes 16-byte
// runs (P N a multiple of 8 and the caller's float32 states 16-byte aligned; scratch always is).
int pass_width(const SsdScanCudaArgs& a, const Dims& d) {
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool ok = d.P % 8 == 0 && d.N % 8 == 0 && aligned(a.initial_state) && aligned(a.final_state) &&
                  aligned(a.d_final_state) && aligned(a.d_initial_state) && aligned(a.chunk_states);
  return ok ? 8 : 1;
}

// Per (b, c, h), one warp: dlam from the row dots, then ddt = A da + rx (da = reverse cumsum of
// dlam, 32 tokens per step with a shuffle scan from the chunk's end) and the per-chunk partial sums
// of dA and dD (fixed shuffle trees: deterministic).
__global__ void dlam_kernel(Dims d, const float* __restrict__ dt, const float* __restrict__ A,
                            const float* __restrict__ r1, const float* __restrict__ rx,
                            const float* __restrict__ rdd, int n_tiles, const float* __restrict__ sdot, int slices,
                            float* __restrict__ ddt, float* __restrict__ dA_part, float* __restrict__ dD_part) {
  const int64_t warp = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= int64_t(d.B) * d.nc * d.nH) return;  // whole warps leave together
  const int h = static_cast<int>(warp % d.nH), c = static_cast<int>((warp / d.nH) % d.nc);
  const int b = static_cast<int>(warp / (int64_t(d.nH) * d.nc));
  const int t0 = c * d.Q, t1 = min(d.T, t0 + d.Q);
  const int64_t bhc = (int64_t(b) * d.nH + h) * d.nc + c;
  float s_out = 0.f;
  for (int s = lane; s < slices; s += 32) s_out += sdot[bhc * slices + s];
  for (int o = 16; o > 0; o >>= 1) s_out += __shfl_xor_sync(0xffffffffu, s_out, o);
  const float Ah = A[h];
  float carry = 0.f, dA = 0.f, dD = 0.f;
  for (int top = t1 - 1; top >= t0; top -= 32) {
    const int t = top - lane;  // lane 0 holds the latest token of this step
    float term = 0.f, x_dot = 0.f, dtv = 0.f;
    if (t >= t0) {
      const int64_t row = d.lami(b, h, t) * n_tiles;
      float y_dot = 0.f;
      for (int j = 0; j < n_tiles; ++j) y_dot += r1[row + j], x_dot += rx[row + j], dD += rdd[row + j];
      dtv = dt[d.dti(b, t, h)];
      term = y_dot - dtv * x_dot + (t == t1 - 1 ? s_out : 0.f);
    }
    for (int o = 1; o < 32; o <<= 1) {  // inclusive scan from lane 0 = sum over later tokens
      const float u = __shfl_up_sync(0xffffffffu, term, o);
      if (lane >= o) term += u;
    }
    const float da = term + carry;
    if (t >= t0) {
      ddt[d.dti(b, t, h)] = Ah * da + x_dot;
      dA += dtv * da;
    }
    carry = __shfl_sync(0xffffffffu, da, 31);
  }
  for (int o = 16; o > 0; o >>= 1) {
    dA += __shfl_xor_sync(0xffffffffu, dA, o);
    dD += __shfl_xor_sync(0xffffffffu, dD, o);
  }
  if (lane == 0) dA_part[bhc] = dA, dD_part[bhc] = dD;
}

// dA[h] += sum over (b, c) of the partials, dD likewise; one warp per head, a fixed order.
__global__ void param_reduce_kernel(Dims d, const float* __restrict__ dA_part, const float* __restrict__ dD_part,
                                    float* __restrict__ dA, float* __restrict__ dD) {
  const int h = static_cast<int>((blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32), lane = threadIdx.x % 32;
  if (h >= d.nH) return;
  float a = 0.f, s = 0.f;
  for (int bc = lane; bc < d.B * d.nc; bc += 32) {
    const int64_t i = (int64_t(bc / d.nc) * d.nH + h) * d.nc + bc % d.nc;
    a += dA_part[i], s += dD_part[i];
  }
  for (int o = 16; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o), s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) dA[h] += a, dD[h] += s;
}

// Scratch of one call: one cudaMallocAsync'd block (one driver call instead of a dozen), carved
// into 256-byte aligned pieces. The pieces are named twice: a sizing pass, then the real one.
struct Scratch {
  cudaStream_t s;
  unsigned char* base = nullptr;
  int64_t used = 0;
  cudaError_t err = cudaSuccess;
  float* get(int64_t count) {
    float* p = base ? reinterpret_cast<float*>(base + used) : nullptr;
    used += (std::max<int64_t>(count, 1) * 4 + 255) / 256 * 256;
    return p;
  }
  void allocate() {  // after the sizing pass
    err = cudaMallocAsync(reinterpret_cast<void**>(&base), std::max<int64_t>(used, 256), s);
    used = 0;
  }
  cudaError_t release(cudaError_t e) {
    if (base) {
      cudaError_t f = cudaFreeAsync(base, s);
      if (e == cudaSuccess) e = f;
    }
    return e != cudaSuccess ? e : err;
  }
};

// With a.profile or NEMOTRON_SSD_PROFILE set, each call prints the time of its phases (synchronises:
// benchmarks only). The environment is read once: a getenv per call would sit on the step path.
bool profile_env() {
  static const bool on = std::getenv("NEMOTRON_SSD_PROFILE") != nullptr;
  return on;
}

struct Phases {
  static constexpr int kMax = 16;
  bool on;
  cudaStream_t s;
  cudaEvent_t ev[kMax];
  const char* name[kMax];
  int n = 0;
  Phases(const SsdScanCudaArgs& a, cudaStream_t st) : on(a.profile || profile_env()), s(st) { mark("start"); }
  void mark(const char* what) {
    if (!on || n >= kMax) return;
    cudaEventCreate(&ev[n]);
    cudaEventRecord(ev[n], s);
    name[n++] = what;
  }
  ~Phases() {
    if (!on) return;
    cudaEventSynchronize(ev[n - 1]);
    for (int i = 1; i < n; ++i) {
      float ms = 0.f;
      cudaEventElapsedTime(&ms, ev[i - 1], ev[i]);
      std::printf("    %-12s %.3f ms\n", name[i], ms);
    }
    for (int i = 0; i < n; ++i) cudaEventDestroy(ev[i]);
  }
};

// The Y and dxb products by chunk_y_kernel (ssd_scan_chunk_y.cuh) where it fits when
// NEMOTRON_SSD_FUSED=1; by default the tile-GEMM ProbY / ProbDxb. Opt-in because merged main's
// test_cuda on an H200 (session 19, b50ec12, fused on) failed one case, the bfloat16
// mamba2_mixer at Nano's heads with a ragged last chunk (T = 300), while every ssd_scan case
// passed; not yet diagnosed (no device time left): a bound the fused rounding crosses, or a fault
// the scan cases miss. NEMOTRON_SSD_HEADS = heads per block (default: heads_per_block()). Both
// read once.
struct FusedChoice {
  bool on = false;
  int heads = 0;  // 0: heads_per_block()
};
const FusedChoice& fused_choice() {
  static const FusedChoice c = [] {
    FusedChoice f;
    if (const char* v = std::getenv("NEMOTRON_SSD_FUSED")) f.on = std::atoi(v) != 0;
    if (const char* v = std::getenv("NEMOTRON_SSD_HEADS")) f.heads = std::max(1, std::atoi(v));
    return f;
  }();
  return c;
}
// Heads per block: as many as still fill one wave of blocks (2 per SM), so that CB and the group
// operand are read as few times as the GPU allows. H200, dense shape (B=4 T=4096 nH=24 G=2, 12
// heads per group), fwd+bwd: 1.322 / 1.263 / 1.259 / 1.248 / 1.236 / 1.230 ms at 1 / 2 / 3 / 4 / 6
// / 12 heads (12: 256 blocks, one wave; 6: 512).
int heads_per_block(const Dims& d) {
  if (fused_choice().heads > 0) return std::min(fused_choice().heads, d.hpg);
  static int sms[64] = {};
  int dev = 0;
  cudaGetDevice(&dev);
  int& n = sms[dev & 63];
  if (n == 0) cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
  const int64_t wave = 2 * int64_t(std::max(n, 1)), items = int64_t(d.B) * d.nc * d.G;
  int heads = d.hpg;
  while (heads > 1 && items * ((d.hpg + heads - 1) / heads) < wave) heads = (heads + 1) / 2;
  return heads;
}

template <class T>
bool use_fused(const Dims& d) {
  return std::is_same_v<T, __nv_bfloat16> && fused_choice().on && ssd::chunk_y_fits(d, true);
}
template <class T>
ssd::ChunkYArgs fused_args(const SsdScanCudaArgs& a, const Dims& d, ssd::Decay dk, const float* lam, const T* cb) {
  ssd::ChunkYArgs f{};
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    f.d = d, f.dk = dk, f.x = static_cast<const T*>(a.x), f.D = static_cast<const T*>(a.D), f.cb = cb;
    f.dt = a.dt, f.lam = lam, f.heads_per_block = heads_per_block(d);
  }
  return f;
}

// Y_ssm of every (b, c, h): forward y = Y_ssm + D x (dy null), backward r1 = dy . Y_ssm per row.
template <class T>
cudaError_t launch_y(const SsdScanCudaArgs& a, const Dims& d, ssd::Decay dk, const float* lam, const T* cb,
                     const T* sin, const T* dy, float* r1, int n_tiles, cudaStream_t s) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if (use_fused<T>(d)) {
      ssd::ChunkYArgs f = fused_args<T>(a, d, dk, lam, cb);
      f.bc = static_cast<const T*>(a.Cm), f.st = sin, f.dy = dy, f.y = dy ? nullptr : static_cast<T*>(a.y), f.r1 = r1;
      return ssd::launch_chunk_y<false>(f, s);
    }
  }
  ssd::ProbY<T> py;
  py.d = d, py.dk = dk, py.x = static_cast<const T*>(a.x), py.Cm = static_cast<const T*>(a.Cm), py.D = static_cast<const T*>(a.D);
  py.dy = dy, py.dt = a.dt, py.lam = lam, py.cb = cb, py.sin = sin, py.y = dy ? nullptr : static_cast<T*>(a.y);
  py.r1 = r1, py.n_tiles = n_tiles;
  return ssd::launch_tile_gemm(py, int64_t(d.B) * d.nc * d.nH, d.Q, d.P, s);
}

// dxb of every (b, c, h) and its epilogue: dx, and the row dots rx, rdd.
template <class T>
cudaError_t launch_dxb(const SsdScanCudaArgs& a, const Dims& d, ssd::Decay dk, const float* lam, const T* cb,
                       const T* dsout, float* rx, float* rdd, int n_tiles, cudaStream_t s) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if (use_fused<T>(d)) {
      ssd::ChunkYArgs f = fused_args<T>(a, d, dk, lam, cb);
      f.bc = static_cast<const T*>(a.Bm), f.st = dsout, f.dy = static_cast<const T*>(a.dy), f.y = static_cast<T*>(a.dx);
      f.r1 = rx, f.r2 = rdd;
      return ssd::launch_chunk_y<true>(f, s);
    }
  }
  ssd::ProbDxb<T> pdx;
  pdx.d = d, pdx.dk = dk, pdx.x = static_cast<const T*>(a.x), pdx.Bm = static_cast<const T*>(a.Bm);
  pdx.D = static_cast<const T*>(a.D), pdx.dy = static_cast<const T*>(a.dy), pdx.dt = a.dt, pdx.lam = lam;
  pdx.cb = cb, pdx.dsout = dsout, pdx.dx = static_cast<T*>(a.dx), pdx.rx = rx, pdx.rdd = rdd;
  pdx.n_tiles = n_tiles;
  return ssd::launch_tile_gemm(pdx, int64_t(d.B) * d.nc * d.nH, d.Q, d.P, s);
}

// float32 words holding n elements of T (scratch comes in float32 words).
template <class T>
int64_t words(int64_t n) {
  return (n * static_cast<int64_t>(sizeof(T)) + 3) / 4;
}

unsigned blocks_for(int64_t n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

#define SSD_TRY(call)                        \
  do {                                       \
    cudaError_t e_ = (call);                 \
    if (e_ != cudaSuccess) return sc.release(e_); \
  } while (0)

// Shared first half of forward and backward: lam, CB, and the state entering every chunk.
template <class T>
cudaError_t chunk_states(const SsdScanCudaArgs& a, const Dims& d, cudaStream_t s, Scratch& sc, Phases& ph, float* lam,
                         ssd::Decay dk,
                         T* cb, T* sloc, T* sin, float* final_state, ChunkOut out) {
  const int64_t bch = int64_t(d.B) * d.nc * d.nH, bcg = int64_t(d.B) * d.nc * d.G;
  lam_kernel<<<blocks_for(bch * 32, 256), 256, 0, s>>>(d, a.dt, a.A, lam, dk);
  SSD_TRY(cudaGetLastError());
  ph.mark("lam");
  ssd::ProbCB<T> pcb;
  pcb.d = d, pcb.dk = dk, pcb.Bm = static_cast<const T*>(a.Bm), pcb.Cm = static_cast<const T*>(a.Cm), pcb.cb = cb;
  SSD_TRY(ssd::launch_tile_gemm(pcb, bcg, d.Q, d.Q, s));
  ph.mark("CB");
  ssd::ProbChunkState<T> pst;
  pst.d = d, pst.dk = dk, pst.x = static_cast<const T*>(a.x), pst.dy = nullptr, pst.BC = static_cast<const T*>(a.Bm);
  pst.dt = a.dt, pst.lam = lam, pst.out = sloc;
  SSD_TRY(ssd::launch_tile_gemm(pst, bch, d.P, d.N, s));
  ph.mark("chunk_state");
  const int64_t PN = int64_t(d.P) * d.N;
  const dim3 grid(d.B * d.nH, blocks_for(PN, kPassThreads * pass_width(a, d)));
  if (pass_width(a, d) == 8)
    state_pass_kernel<T, 8><<<grid, kPassThreads, 0, s>>>(d, lam, a.initial_state, sloc, sin, final_state, out);
  else
    state_pass_kernel<T, 1><<<grid, kPassThreads, 0, s>>>(d, lam, a.initial_state, sloc, sin, final_state, out);
  ph.mark("state_pass");
  return cudaGetLastError();
}

template <class T>
cudaError_t forward(const SsdScanCudaArgs& a, cudaStream_t s) {
  const Dims d = make_dims(a);
  const int64_t PN = int64_t(d.P) * d.N;
  Scratch sc{s};
  Phases ph(a, s);
  float* lam = nullptr;
  ssd::Decay dk;
  T *cb = nullptr, *sloc = nullptr, *sin = nullptr;
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) sc.allocate();
    lam = sc.get(int64_t(d.B) * d.nH * d.T);
    dk.el = sc.get(int64_t(d.B) * d.nH * d.T);
    dk.w = sc.get(int64_t(d.B) * d.nH * d.T);
    dk.wdt = sc.get(int64_t(d.B) * d.nH * d.T);
    cb = reinterpret_cast<T*>(sc.get(words<T>(int64_t(d.B) * d.nc * d.G * d.Qm * d.Qm)));
    sloc = reinterpret_cast<T*>(sc.get(words<T>(int64_t(d.B) * d.nH * d.nc * PN)));
    sin = reinterpret_cast<T*>(sc.get(words<T>(int64_t(d.B) * d.nH * (d.nc + 1) * PN)));
  }
  if (sc.err != cudaSuccess) return sc.release(sc.err);
  SSD_TRY(chunk_states<T>(a, d, s, sc, ph, lam, dk, cb, sloc, sin, a.final_state, {a.chunk_slots, a.chunk_states}));
  SSD_TRY(launch_y<T>(a, d, dk, lam, cb, sin, nullptr, nullptr, 0, s));
  ph.mark("Y");
  return sc.release(cudaSuccess);
}

template <class T>
cudaError_t backward(const SsdScanCudaArgs& a, cudaStream_t s) {
  const Dims d = make_dims(a);
  const int64_t PN = int64_t(d.P) * d.N, bch = int64_t(d.B) * d.nc * d.nH, bcg = int64_t(d.B) * d.nc * d.G;
  const int n_tiles = (d.P + ssd::kBN - 1) / ssd::kBN;
  const int pv = pass_width(a, d), slices = static_cast<int>(blocks_for(PN, kPassThreads * pv));
  Scratch sc{s};
  Phases ph(a, s);
  float *lam = nullptr, *sdot = nullptr, *r1 = nullptr, *rx = nullptr, *rdd = nullptr;
  float *dA_part = nullptr, *dD_part = nullptr;
  ssd::Decay dk;
  T *cb = nullptr, *dcb = nullptr, *sloc = nullptr, *sin = nullptr, *dsout = nullptr;
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) sc.allocate();
    lam = sc.get(int64_t(d.B) * d.nH * d.T);
    dk.el = sc.get(int64_t(d.B) * d.nH * d.T);
    dk.w = sc.get(int64_t(d.B) * d.nH * d.T);
    dk.wdt = sc.get(int64_t(d.B) * d.nH * d.T);
    cb = reinterpret_cast<T*>(sc.get(words<T>(bcg * d.Qm * d.Qm)));
    dcb = reinterpret_cast<T*>(sc.get(words<T>(bcg * d.Qm * d.Qm)));
    sloc = reinterpret_cast<T*>(sc.get(words<T>(bch * PN)));  // S_loc, then reused for Z
    sin = reinterpret_cast<T*>(sc.get(words<T>(int64_t(d.B) * d.nH * (d.nc + 1) * PN)));
    dsout = reinterpret_cast<T*>(sc.get(words<T>(bch * PN)));
    sdot = sc.get(bch * slices);
    r1 = sc.get(int64_t(d.B) * d.nH * d.T * n_tiles);
    rx = sc.get(int64_t(d.B) * d.nH * d.T * n_tiles);
    rdd = sc.get(int64_t(d.B) * d.nH * d.T * n_tiles);
    dA_part = sc.get(bch);
    dD_part = sc.get(bch);
  }
  if (sc.err != cudaSuccess) return sc.release(sc.err);
  const T *x = static_cast<const T*>(a.x), *dy = static_cast<const T*>(a.dy);
  const T *Bm = static_cast<const T*>(a.Bm), *Cm = static_cast<const T*>(a.Cm);

  SSD_TRY(chunk_states<T>(a, d, s, sc, ph, lam, dk, cb, sloc, sin, nullptr, {}));
  ssd::ProbChunkState<T> pz;
  pz.d = d, pz.dk = dk, pz.x = x, pz.dy = dy, pz.BC = Cm, pz.dt = a.dt, pz.lam = lam, pz.out = sloc;
  SSD_TRY(ssd::launch_tile_gemm(pz, bch, d.P, d.N, s));
  ph.mark("Z");
  if (pv == 8)
    state_adjoint_pass_kernel<T, 8><<<dim3(d.B * d.nH, slices), kPassThreads, 0, s>>>(d, lam, sin, a.d_final_state, sloc,
                                                                                     dsout, sdot, a.d_initial_state);
  else
    state_adjoint_pass_kernel<T, 1><<<dim3(d.B * d.nH, slices), kPassThreads, 0, s>>>(d, lam, sin, a.d_final_state, sloc,
                                                                                     dsout, sdot, a.d_initial_state);
  SSD_TRY(cudaGetLastError());
  ph.mark("adjoint_pass");

  SSD_TRY(launch_y<T>(a, d, dk, lam, cb, sin, dy, r1, n_tiles, s));
  ph.mark("Y_rowdot");
  SSD_TRY(launch_dxb<T>(a, d, dk, lam, cb, dsout, rx, rdd, n_tiles, s));
  ph.mark("dxb");
  ssd::ProbDCB<T> pdcb;
  pdcb.d = d, pdcb.dk = dk, pdcb.x = x, pdcb.dy = dy, pdcb.dt = a.dt, pdcb.lam = lam, pdcb.dcb = dcb;
  SSD_TRY(ssd::launch_tile_gemm(pdcb, bcg, d.Q, d.Q, s));
  ph.mark("dCB");
  ssd::ProbDBC<T> pbc;
  pbc.d = d, pbc.dk = dk, pbc.x = x, pbc.dy = dy, pbc.Bm = Bm, pbc.Cm = Cm, pbc.dt = a.dt, pbc.lam = lam, pbc.dcb = dcb;
  pbc.sin = sin, pbc.dsout = dsout, pbc.dBm = static_cast<T*>(a.dBm), pbc.dCm = static_cast<T*>(a.dCm);
  pbc.groups = bcg;
  SSD_TRY(ssd::launch_tile_gemm(pbc, 2 * bcg, d.Q, d.N, s));
  ph.mark("dC+dB");
  dlam_kernel<<<blocks_for(bch * 32, 256), 256, 0, s>>>(d, a.dt, a.A, r1, rx, rdd, n_tiles, sdot, slices, a.ddt, dA_part,
                                                   dD_part);
  SSD_TRY(cudaGetLastError());
  param_reduce_kernel<<<blocks_for(int64_t(d.nH) * 32, 128), 128, 0, s>>>(d, dA_part, dD_part, a.dA, a.dD);
  SSD_TRY(cudaGetLastError());
  ph.mark("dlam+dA/dD");
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
