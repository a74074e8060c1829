// Causal depthwise conv kernels. Threads run along channels (the contiguous last dim, VEC
// channels per thread as one aligned access); a block covers 32 * VEC channels and a tile of
// time. Forward: each thread owns a run of kRun consecutive timesteps: it loads the run's rows
// plus the K-1 rows before it into registers at once (many loads in flight, each x row fetched
// about once), then slides the K-tap window over them. Backward: one pass in registers; each
// thread streams kSpan timesteps in chunks of kRun rows, computing dpre = dy * SiLU'(pre), its
// dw/dbias terms and dx[t] = sum_k dpre[t+K-1-k] w[k] as soon as the K dpre rows it needs are in,
// and carrying the last K-1 rows of x and dpre into the next chunk (about 1.1 loads per x and dy
// element, one store per dx element, no shared memory until the final reduction).
// dw/dbias are reduced deterministically: registers over a thread's rows, shared memory over the
// block's warps in a fixed order, a float32 partial per (batch, time tile), then a second kernel
// sums those partials in a fixed order.
// Packed rows (seq_idx): a second instance of each kernel (template flag PACKED, so a call without
// seq_idx runs the unchanged code) also loads the run's sequence ids and drops every tap whose
// source row belongs to another sequence than the output row, in y, dx and dw/dbias alike.
// Channel parts (Mamba's x, B and C, each its own tensor): one launch covers them all, the grid's
// columns cut into each part's lanes, so the narrow B and C parts do not each pay a launch and a
// tail of their own.
#include <cuda_bf16.h>

#include "ops/causal_conv1d_cuda.h"
#include "ops/cuda_reduce.cuh"
#include "ops/cuda_vec_io.cuh"

namespace nemotron::ops {

namespace {

using namespace vec_io;

constexpr int kLanes = 32;      // thread columns per block, VEC channels each
constexpr int kWarps = 8;       // thread rows per block
constexpr int kRun = 8;         // consecutive timesteps per thread run
constexpr int kFwdTile = kWarps * kRun;  // timesteps per forward block: one run per warp
constexpr int kChunk = 8;       // backward: rows loaded at once (in flight together) per thread
constexpr int kSpan = 64;       // backward: timesteps per thread (and warp), streamed in chunks
constexpr int kBwdBlockRows = kWarps * kSpan;  // backward: timesteps per block, one partial row each
constexpr int kFwdVec = 4;      // channels per thread when aligned: 8 B (bf16) or 16 B (f32)
constexpr int kBwdVec = 2;      // the backward holds more per channel: 4 spills at K = 4

// One channel part: its channels (and row stride) C, its first channel in w, bias, dw and dbias
// (the concatenation of the parts), and the grid column where its lanes start.
struct Part {
  int64_t C, c_begin, lane_begin;
};

struct Dims {
  int64_t B, T, C_total;
  int parts;
  Part part[kCausalConv1dCudaMaxParts];
};

// This block's part index (static indices only: the parameter array stays in constant memory).
__device__ inline int my_part(const Dims& d) {
  int p = 0;
#pragma unroll
  for (int q = 1; q < kCausalConv1dCudaMaxParts; ++q)
    if (q < d.parts && blockIdx.x >= d.part[q].lane_begin) p = q;
  return p;
}

// The parts' tensors travel as kernel parameters of their own, not inside Dims: nvcc takes a
// pointer parameter for global memory (ld.global.nc, st.global) but a pointer read out of a struct
// parameter for a generic one (the forward ran ~20% slower so on an H100, C = 6144).
template <class P>
__device__ inline P pick(int p, P p0, P p1, P p2) {
  return p == 0 ? p0 : (p == 1 ? p1 : p2);
}

template <int VEC, int K, class T>
__device__ inline void load_weights(const T* w, const T* bias, int64_t c0, float (&wk)[K][VEC], float (&bs)[VEC]) {
#pragma unroll
  for (int v = 0; v < VEC; ++v) {
#pragma unroll
    for (int k = 0; k < K; ++k) wk[k][v] = to_f(w[(c0 + v) * K + k]);
    bs[v] = bias ? to_f(bias[c0 + v]) : 0.0f;
  }
}

// xs[j] = row u0 - (K-1) + j of `p` (the [T, C] slice of one batch at channel c0), zero outside
// [0, T): the K-1 rows before a run of kRun rows starting at u0, and the run itself.
template <int VEC, int K, class T>
__device__ inline void load_run(const T* __restrict__ p, int64_t u0, int64_t T_, int64_t C,
                                float (&xs)[K - 1 + kRun][VEC]) {
#pragma unroll
  for (int j = 0; j < K - 1 + kRun; ++j) {
    const int64_t u = u0 - (K - 1) + j;
    if (u >= 0 && u < T_) {
      load<VEC>(p + u * C, xs[j]);
    } else {
#pragma unroll
      for (int v = 0; v < VEC; ++v) xs[j][v] = 0.0f;
    }
  }
}

// ids[j] = seq_idx of row u0 - (K-1) + j (0 outside [0, T), where x and dy are zero anyway).
template <int K>
__device__ inline void load_ids(const int32_t* __restrict__ seq, int64_t u0, int64_t T_, int (&ids)[K - 1 + kRun]) {
#pragma unroll
  for (int j = 0; j < K - 1 + kRun; ++j) {
    const int64_t u = u0 - (K - 1) + j;
    ids[j] = u >= 0 && u < T_ ? seq[u] : 0;
  }
}

// Whether tap k of run row r reads its own sequence (always when not PACKED).
template <bool PACKED, int K, int N>
__device__ inline bool tap_on(const int (&ids)[N], int r, int k) {
  return !PACKED || ids[r + k] == ids[r + K - 1];
}

// The pre-activation of run row r: bias + sum_k w[k] xs[r + k] (taps of its own sequence).
template <int VEC, int K, bool PACKED, int N>
__device__ inline void conv_row(const float (&xs)[N][VEC], int r, const float (&wk)[K][VEC], const float (&bs)[VEC],
                                const int (&ids)[N], float (&pre)[VEC]) {
#pragma unroll
  for (int v = 0; v < VEC; ++v) {
    float p = bs[v];
#pragma unroll
    for (int k = 0; k < K; ++k)
      if (tap_on<PACKED, K>(ids, r, k)) p += wk[k][v] * xs[r + k][v];
    pre[v] = p;
  }
}

template <class T, int VEC, int K, bool PACKED>
__global__ void __launch_bounds__(kLanes* kWarps)
    forward_kernel(const T* __restrict__ x0, const T* __restrict__ x1, const T* __restrict__ x2, T* __restrict__ y0,
                   T* __restrict__ y1, T* __restrict__ y2, const T* __restrict__ w, const T* __restrict__ bias,
                   const int32_t* __restrict__ seq, Dims d) {
  const int part = my_part(d);
  const Part P = part == 0 ? d.part[0] : (part == 1 ? d.part[1] : d.part[2]);
  const T* __restrict__ x = pick(part, x0, x1, x2);
  T* __restrict__ y = pick(part, y0, y1, y2);
  const int64_t c0 = ((static_cast<int64_t>(blockIdx.x) - P.lane_begin) * kLanes + threadIdx.x) * VEC;
  const int64_t b = blockIdx.z, u0 = static_cast<int64_t>(blockIdx.y) * kFwdTile + threadIdx.y * kRun;
  if (c0 >= P.C || u0 >= d.T) return;
  float wk[K][VEC], bs[VEC], xs[K - 1 + kRun][VEC];
  load_weights<VEC, K>(w + P.c_begin * K, bias ? bias + P.c_begin : nullptr, c0, wk, bs);
  const int64_t base = b * d.T * P.C + c0;
  load_run<VEC, K>(x + base, u0, d.T, P.C, xs);
  int ids[K - 1 + kRun] = {};
  if constexpr (PACKED) load_ids<K>(seq + b * d.T, u0, d.T, ids);
#pragma unroll
  for (int r = 0; r < kRun; ++r) {
    if (u0 + r >= d.T) break;
    float pre[VEC], out[VEC];
    conv_row<VEC, K, PACKED>(xs, r, wk, bs, ids, pre);
#pragma unroll
    for (int v = 0; v < VEC; ++v) out[v] = pre[v] * sigmoid(pre[v]);
    store<VEC>(y + base + (u0 + r) * P.C, out);
  }
}

// partial [R, K + 1, C_total] with R = B * gridDim.y: rows k < K hold dw[:, k], row K holds dbias.
// One pass, all in registers: each thread streams its kSpan rows (plus the K-1 rows after them,
// whose dpre its last dx rows need) chunk by chunk, carrying the last K-1 rows of x and dpre from
// one chunk to the next, so every row of x and dy is loaded about once and dx is written as soon
// as the K dpre rows it needs are known. Shared memory serves only the final reduction of dw/dbias.
template <class T, int VEC, int K, bool PACKED>
__global__ void __launch_bounds__(kLanes* kWarps, 2)
    backward_kernel(const T* __restrict__ x0, const T* __restrict__ x1, const T* __restrict__ x2,
                    const T* __restrict__ dy0, const T* __restrict__ dy1, const T* __restrict__ dy2,
                    T* __restrict__ dx0, T* __restrict__ dx1, T* __restrict__ dx2, const T* __restrict__ w,
                    const T* __restrict__ bias, float* __restrict__ partial, const int32_t* __restrict__ seq, Dims d) {
  constexpr int kCols = kLanes * VEC, kWin = K - 1 + kChunk;
  __shared__ float red[kWarps][K + 1][kCols];
  const int part = my_part(d);
  const Part P = part == 0 ? d.part[0] : (part == 1 ? d.part[1] : d.part[2]);
  const T* __restrict__ x = pick(part, x0, x1, x2);
  const T* __restrict__ dy = pick(part, dy0, dy1, dy2);
  T* __restrict__ dx = pick(part, dx0, dx1, dx2);
  const int64_t lane0 = (static_cast<int64_t>(blockIdx.x) - P.lane_begin) * kLanes;  // the block's first lane in its part
  const int64_t c0 = (lane0 + threadIdx.x) * VEC;
  const int64_t b = blockIdx.z, u_begin = static_cast<int64_t>(blockIdx.y) * kBwdBlockRows + threadIdx.y * kSpan;
  const int64_t u_end = u_begin + kSpan < d.T ? u_begin + kSpan : d.T;
  const int64_t s_end = u_end + K - 1 < d.T ? u_end + K - 1 : d.T;  // dpre rows this thread needs
  const bool active = c0 < P.C && u_begin < d.T;
  const int64_t base = b * d.T * P.C + c0;
  const int32_t* __restrict__ ids_b = PACKED ? seq + b * d.T : nullptr;
  float acc[K + 1][VEC];
#pragma unroll
  for (int k = 0; k <= K; ++k)
#pragma unroll
    for (int v = 0; v < VEC; ++v) acc[k][v] = 0.0f;

  if (active) {
    float wk[K][VEC], bs[VEC];
    load_weights<VEC, K>(w + P.c_begin * K, bias ? bias + P.c_begin : nullptr, c0, wk, bs);
    // Window slot j holds row s0 - (K-1) + j of the chunk starting at s0: slots < K-1 are carried.
    float xw[kWin][VEC], dpw[kWin][VEC];
    int idw[kWin];
#pragma unroll
    for (int j = 0; j < K - 1; ++j) {
      const int64_t u = u_begin - (K - 1) + j;
      if (u >= 0) {
        load<VEC>(x + base + u * P.C, xw[j]);
      } else {
#pragma unroll
        for (int v = 0; v < VEC; ++v) xw[j][v] = 0.0f;
      }
#pragma unroll
      for (int v = 0; v < VEC; ++v) dpw[j][v] = 0.0f;  // rows before u_begin: their dx is not ours
      idw[j] = PACKED && u >= 0 ? ids_b[u] : 0;
    }
    // Chunks run on to u_end + K - 1 even at the sequence end, where the dpre rows past T are zero
    // (nothing loaded) but the last dx rows are still to be written.
#pragma unroll 1
    for (int64_t s0 = u_begin; s0 < u_end + K - 1; s0 += kChunk) {
      float g[kChunk][VEC];
#pragma unroll
      for (int r = 0; r < kChunk; ++r) {
        const int64_t s = s0 + r;
        if (s < s_end) {
          load<VEC>(x + base + s * P.C, xw[K - 1 + r]);
          load<VEC>(dy + base + s * P.C, g[r]);
          if constexpr (PACKED) idw[K - 1 + r] = ids_b[s];
        } else {  // past what this thread needs (or past T): zero, so dpre is zero
#pragma unroll
          for (int v = 0; v < VEC; ++v) xw[K - 1 + r][v] = g[r][v] = 0.0f;
          if constexpr (PACKED) idw[K - 1 + r] = 0;
        }
      }
#pragma unroll
      for (int r = 0; r < kChunk; ++r) {
        const int64_t s = s0 + r;
        float pre[VEC];
        conv_row<VEC, K, PACKED>(xw, r, wk, bs, idw, pre);
#pragma unroll
        for (int v = 0; v < VEC; ++v) {
          const float sg = sigmoid(pre[v]);
          dpw[K - 1 + r][v] = g[r][v] * sg * (1.0f + pre[v] * (1.0f - sg));
        }
        if (s < u_end) {  // the rows after u_end belong to the next thread's sums
#pragma unroll
          for (int v = 0; v < VEC; ++v) {
#pragma unroll
            for (int k = 0; k < K; ++k)
              if (tap_on<PACKED, K>(idw, r, k)) acc[k][v] += dpw[K - 1 + r][v] * xw[r + k][v];
            acc[K][v] += dpw[K - 1 + r][v];
          }
        }
        // dx of row t = s - (K-1), slot r: sum_k dpre[t + K-1-k] w[k], all known now.
        const int64_t t = s - (K - 1);
        if (t >= u_begin && t < u_end) {
          float gx[VEC];
#pragma unroll
          for (int v = 0; v < VEC; ++v) {
            float sum = 0.0f;
#pragma unroll
            for (int k = 0; k < K; ++k)
              if (!PACKED || idw[r + K - 1 - k] == idw[r]) sum += dpw[r + K - 1 - k][v] * wk[k][v];
            gx[v] = sum;
          }
          store<VEC>(dx + base + t * P.C, gx);
        }
      }
#pragma unroll
      for (int j = 0; j < K - 1; ++j) {  // carry the chunk's last K-1 rows
#pragma unroll
        for (int v = 0; v < VEC; ++v) xw[j][v] = xw[kChunk + j][v], dpw[j][v] = dpw[kChunk + j][v];
        idw[j] = idw[kChunk + j];
      }
    }
  }

  // Block reduction over the warps (fixed order), then one partial row per block.
#pragma unroll
  for (int k = 0; k <= K; ++k)
#pragma unroll
    for (int v = 0; v < VEC; ++v) red[threadIdx.y][k][threadIdx.x * VEC + v] = acc[k][v];
  __syncthreads();
  const int64_t r = b * gridDim.y + blockIdx.y;
  for (int i = threadIdx.y * kLanes + threadIdx.x; i < (K + 1) * kCols; i += kLanes * kWarps) {
    const int k = i / kCols, cl = i % kCols;
    const int64_t c = lane0 * VEC + cl;  // channel within the part
    if (c >= P.C) continue;
    float sum = 0.0f;
#pragma unroll
    for (int wy = 0; wy < kWarps; ++wy) sum += red[wy][k][cl];
    partial[(r * (K + 1) + k) * d.C_total + P.c_begin + c] = sum;
  }
}

// dw[c, k] += sum_r partial[r, k, c]; dbias[c] += sum_r partial[r, K, c] (rows in a fixed order).
__global__ void reduce_kernel(const float* __restrict__ partial, int64_t R, int64_t C, int K, float* __restrict__ dw,
                              float* __restrict__ dbias) {
  const int64_t n = (K + 1) * C, i = static_cast<int64_t>(blockIdx.x) * reduce::kReduceCols + threadIdx.x;
  const float total = reduce::column_sum(partial, R, n, i);
  if (threadIdx.y != 0 || i >= n) return;
  const int64_t k = i / C, c = i % C;
  if (k < K) dw[c * K + k] += total;
  else if (dbias) dbias[c] += total;
}

// The kernels' view of the call: each part's tensors and where its lanes start (vec channels a lane).
// The kernels' view of the call: each part's channels and where its lanes start (vec channels a lane).
Dims dims_for(const CausalConv1dCudaArgs& a, int vec, int64_t* lanes_total) {
  Dims d{a.B, a.T, 0, a.parts, {}};
  int64_t lanes = 0;
  for (int p = 0; p < a.parts; ++p) {
    d.part[p] = Part{a.C[p], d.C_total, lanes};
    d.C_total += a.C[p];
    lanes += (a.C[p] / vec + kLanes - 1) / kLanes;
  }
  *lanes_total = lanes;
  return d;
}

dim3 grid_for(const CausalConv1dCudaArgs& a, int64_t lanes, int tile) {
  const int64_t tiles = (a.T + tile - 1) / tile;
  return dim3(static_cast<unsigned>(lanes), static_cast<unsigned>(tiles), static_cast<unsigned>(a.B));
}

template <class T> const T* in(const void* p) { return static_cast<const T*>(p); }
template <class T> T* out(void* p) { return static_cast<T*>(p); }

template <class T, int VEC, int K, bool PACKED>
void launch_forward(const CausalConv1dCudaArgs& a, cudaStream_t s) {
  int64_t lanes = 0;
  const Dims d = dims_for(a, VEC, &lanes);
  forward_kernel<T, VEC, K, PACKED><<<grid_for(a, lanes, kFwdTile), dim3(kLanes, kWarps), 0, s>>>(
      in<T>(a.x[0]), in<T>(a.x[1]), in<T>(a.x[2]), out<T>(a.y[0]), out<T>(a.y[1]), out<T>(a.y[2]), in<T>(a.w),
      in<T>(a.bias), a.seq_idx, d);
}

template <class T, int VEC, int K, bool PACKED>
void launch_backward(const CausalConv1dCudaArgs& a, float* partial, cudaStream_t s) {
  int64_t lanes = 0;
  const Dims d = dims_for(a, VEC, &lanes);
  backward_kernel<T, VEC, K, PACKED><<<grid_for(a, lanes, kBwdBlockRows), dim3(kLanes, kWarps), 0, s>>>(
      in<T>(a.x[0]), in<T>(a.x[1]), in<T>(a.x[2]), in<T>(a.dy[0]), in<T>(a.dy[1]), in<T>(a.dy[2]), out<T>(a.dx[0]),
      out<T>(a.dx[1]), out<T>(a.dx[2]), in<T>(a.w), in<T>(a.bias), partial, a.seq_idx, d);
}

// Calls f.template operator()<T, VEC, K>() for the runtime dtype, K and the vector width: `wide`
// when every part's C and every pointer allow it, else one channel per thread.
template <int kWide, class F>
cudaError_t dispatch(const CausalConv1dCudaArgs& a, bool backward, F&& f) {
  if (a.K < 1 || a.K > kCausalConv1dCudaMaxK) return cudaErrorInvalidValue;
  if (a.parts < 1 || a.parts > kCausalConv1dCudaMaxParts) return cudaErrorInvalidValue;
  auto with_t = [&](auto zero) {
    using T = decltype(zero);
    bool wide = true;
    for (int p = 0; p < a.parts; ++p) {
      wide = wide && a.C[p] % kWide == 0 && aligned_for<T>(kWide, a.x[p]);
      wide = wide && (backward ? aligned_for<T>(kWide, a.dy[p], a.dx[p]) : aligned_for<T>(kWide, a.y[p]));
    }
    auto with_vec = [&](auto vec) {
      constexpr int V = decltype(vec)::value;
      switch (a.K) {
        case 1: f.template operator()<T, V, 1>(); break;
        case 2: f.template operator()<T, V, 2>(); break;
        case 3: f.template operator()<T, V, 3>(); break;
        default: f.template operator()<T, V, 4>(); break;
      }
    };
    if (wide) with_vec(std::integral_constant<int, kWide>{});
    else with_vec(std::integral_constant<int, 1>{});
  };
  if (a.bf16) with_t(__nv_bfloat16{});
  else with_t(float{});
  return cudaSuccess;
}

int64_t total_channels(const CausalConv1dCudaArgs& a) {
  int64_t C = 0;
  for (int p = 0; p < a.parts && p < kCausalConv1dCudaMaxParts; ++p) C += a.C[p];
  return C;
}

}  // namespace

cudaError_t causal_conv1d_forward_cuda(const CausalConv1dCudaArgs& a, cudaStream_t s) {
  if (a.B == 0 || a.T == 0 || total_channels(a) == 0) return cudaSuccess;
  cudaError_t err =
      dispatch<kFwdVec>(a, false, [&]<class T, int V, int K>() {
    if (a.seq_idx) launch_forward<T, V, K, true>(a, s);
    else launch_forward<T, V, K, false>(a, s);
  });
  return err != cudaSuccess ? err : cudaGetLastError();
}

cudaError_t causal_conv1d_backward_cuda(const CausalConv1dCudaArgs& a, cudaStream_t s) {
  const int64_t C = total_channels(a);
  if (a.B == 0 || a.T == 0 || C == 0) return cudaSuccess;
  const int64_t R = a.B * ((a.T + kBwdBlockRows - 1) / kBwdBlockRows), n = (a.K + 1) * C;
  float* partial = nullptr;
  cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&partial), R * n * sizeof(float), s);
  if (err != cudaSuccess) return err;
  err = dispatch<kBwdVec>(a, true, [&]<class T, int V, int K>() {
    if (a.seq_idx) launch_backward<T, V, K, true>(a, partial, s);
    else launch_backward<T, V, K, false>(a, partial, s);
  });
  if (err == cudaSuccess) {
    reduce_kernel<<<reduce::column_sum_grid(n), reduce::column_sum_block(), 0, s>>>(
        partial, R, C, static_cast<int>(a.K), a.dw, a.dbias);
    err = cudaGetLastError();
  }
  cudaError_t free_err = cudaFreeAsync(partial, s);
  return err != cudaSuccess ? err : free_err;
}

}  // namespace nemotron::ops
