// RMSNorm kernels. The main path (rows of 16-byte-aligned vectors, D <= 8192 bf16 / 4096 f32):
// one 128-thread block per row keeps the row in registers as 16-byte vectors, so each element is
// read once and written once; the backward block walks kBwdRows rows, accumulating its dw partial
// in registers, and a column-sum kernel adds the partials in a fixed order. Other shapes take the
// scalar kernels (one 256-thread block per row; dw in a separate pass). Deterministic, no atomics.
#include <cuda_bf16.h>

#include "ops/cuda_reduce.cuh"
#include "ops/cuda_vec_io.cuh"
#include "ops/rmsnorm_cuda.h"

#include <initializer_list>

namespace nemotron::ops {

namespace {

constexpr int kThreads = 256;

using vec_io::from_f;
using vec_io::to_f;

__device__ float block_sum(float v) {
  __shared__ float warp_sums[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  float total = 0;
  if (warp == 0) {
    total = lane < kThreads / 32 ? warp_sums[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) total += __shfl_xor_sync(0xffffffffu, total, o);
    if (lane == 0) warp_sums[0] = total;
  }
  __syncthreads();
  total = warp_sums[0];
  __syncthreads();
  return total;
}

template <class T>
__global__ void forward_kernel(const T* x, const T* res, T* sum, const T* w, float eps, T* y, float* rstd, int64_t D) {
  const int64_t base = blockIdx.x * D;
  float ss = 0;
  for (int64_t i = threadIdx.x; i < D; i += kThreads) {
    float v = to_f(x[base + i]);
    if (res) {  // the residual join: the rounded sum is what the next layer and the backward see
      T s = from_f<T>(v + to_f(res[base + i]));
      sum[base + i] = s;
      v = to_f(s);
    }
    ss += v * v;
  }
  float s = rsqrtf(block_sum(ss) / static_cast<float>(D) + eps);
  if (threadIdx.x == 0) rstd[blockIdx.x] = s;
  const T* xr = res ? sum : x;  // this thread wrote the sum elements it reads back
  for (int64_t i = threadIdx.x; i < D; i += kThreads) y[base + i] = from_f<T>(to_f(w[i]) * to_f(xr[base + i]) * s);
}

template <class T>
__global__ void backward_dx_kernel(const T* x, const T* w, const float* rstd, const T* dy, const T* dx_add, T* dx,
                                   int64_t D) {
  const int64_t base = blockIdx.x * D;
  float s = rstd[blockIdx.x], dot = 0;
  for (int64_t i = threadIdx.x; i < D; i += kThreads) dot += to_f(w[i]) * to_f(dy[base + i]) * to_f(x[base + i]);
  dot = block_sum(dot) * s / static_cast<float>(D);
  for (int64_t i = threadIdx.x; i < D; i += kThreads) {
    float g = s * (to_f(w[i]) * to_f(dy[base + i]) - to_f(x[base + i]) * s * dot);
    if (dx_add) g += to_f(dx_add[base + i]);
    dx[base + i] = from_f<T>(g);
  }
}

constexpr int kRowsPerChunk = 64;

// partial[c, i] = sum over rows of chunk c of dy * x * rstd (column i).
template <class T>
__global__ void backward_dw_partial_kernel(const T* x, const float* rstd, const T* dy, float* partial, int64_t rows,
                                           int64_t D) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= D) return;
  const int64_t r0 = blockIdx.y * static_cast<int64_t>(kRowsPerChunk);
  const int64_t r1 = r0 + kRowsPerChunk < rows ? r0 + kRowsPerChunk : rows;
  float acc = 0;
  for (int64_t r = r0; r < r1; ++r) acc += to_f(dy[r * D + i]) * to_f(x[r * D + i]) * rstd[r];
  partial[blockIdx.y * D + i] = acc;
}

__global__ void backward_dw_reduce_kernel(const float* partial, int64_t chunks, float* dw, int64_t D) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= D) return;
  float acc = 0;
  for (int64_t c = 0; c < chunks; ++c) acc += partial[c * D + i];
  dw[i] += acc;
}

// ---- the vector path ----
// kBwdRows: 16 rows per backward block gives 1024 blocks for 16384 rows, ~8 per SM, enough loads
// in flight to stream at bandwidth (32 rows left an H100 at ~1.5 TB/s on 768-wide rows); the dw
// partials stay small (64 KiB per 1024 rows of 1024 floats).
constexpr int kVecThreads = 128, kMaxVecs = 8, kBwdRows = 16;

// Sum over a 128-thread block, the same value returned to every thread.
__device__ float block_sum128(float v) {
  __shared__ float warp_sums[kVecThreads / 32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0;
#pragma unroll
  for (int w = 0; w < kVecThreads / 32; ++w) total += warp_sums[w];
  __syncthreads();  // warp_sums is reused by the next call
  return total;
}

// Thread t owns the vectors at columns (t + k * 128) * V, k < NV (those below D).
template <class T, int NV>
__global__ void __launch_bounds__(kVecThreads) forward_vec_kernel(const T* x, const T* res, T* sum, const T* w,
                                                                   float eps, T* y, float* rstd, int64_t D) {
  constexpr int V = 16 / sizeof(T);
  const int64_t base = blockIdx.x * D;
  float v[NV][V];
  float ss = 0;
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int64_t c = (threadIdx.x + k * kVecThreads) * static_cast<int64_t>(V);
    if (c >= D) continue;
    vec_io::load<V>(x + base + c, v[k]);
    if (res) {  // the residual join: the rounded sum is what the next layer and the backward see
      float r[V];
      vec_io::load<V>(res + base + c, r);
#pragma unroll
      for (int i = 0; i < V; ++i) v[k][i] = to_f(from_f<T>(v[k][i] + r[i]));
      vec_io::store<V>(sum + base + c, v[k]);
    }
#pragma unroll
    for (int i = 0; i < V; ++i) ss += v[k][i] * v[k][i];
  }
  const float s = rsqrtf(block_sum128(ss) / static_cast<float>(D) + eps);
  if (threadIdx.x == 0) rstd[blockIdx.x] = s;
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int64_t c = (threadIdx.x + k * kVecThreads) * static_cast<int64_t>(V);
    if (c >= D) continue;
    float wv[V], out[V];
    vec_io::load<V>(w + c, wv);
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = wv[i] * v[k][i] * s;
    vec_io::store<V>(y + base + c, out);
  }
}

// Rows [blockIdx.x * kBwdRows, +kBwdRows): dx per row, and this block's dw partial
// (sum over its rows of dy * x * rstd) written to partial[blockIdx.x, :].
template <class T, int NV>
__global__ void __launch_bounds__(kVecThreads) backward_vec_kernel(const T* x, const T* w, const float* rstd,
                                                                    const T* dy, const T* dx_add, T* dx,
                                                                    float* partial, int64_t rows, int64_t D) {
  constexpr int V = 16 / sizeof(T);
  float wv[NV][V], acc[NV][V];
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int64_t c = (threadIdx.x + k * kVecThreads) * static_cast<int64_t>(V);
#pragma unroll
    for (int i = 0; i < V; ++i) acc[k][i] = 0.0f, wv[k][i] = 0.0f;
    if (c < D) vec_io::load<V>(w + c, wv[k]);
  }
  const int64_t r0 = blockIdx.x * static_cast<int64_t>(kBwdRows);
  const int64_t r1 = r0 + kBwdRows < rows ? r0 + kBwdRows : rows;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t base = r * D;
    const float s = rstd[r];
    // The residual gradient is loaded with x and dy, before the block sum, so the three loads are
    // in flight together (dx may be dx_add: each thread reads its own elements before writing them);
    // above 4 vectors per thread, after it, to stay within the registers.
    constexpr bool kEarlyAdd = NV <= 4;
    float xv[NV][V], g[NV][V], add[NV][V], dot = 0;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int64_t c = (threadIdx.x + k * kVecThreads) * static_cast<int64_t>(V);
      if (c >= D) continue;
      vec_io::load<V>(x + base + c, xv[k]);
      vec_io::load<V>(dy + base + c, g[k]);
      if (kEarlyAdd && dx_add) vec_io::load<V>(dx_add + base + c, add[k]);
#pragma unroll
      for (int i = 0; i < V; ++i) dot += wv[k][i] * g[k][i] * xv[k][i];
    }
    dot = block_sum128(dot) * s / static_cast<float>(D);
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int64_t c = (threadIdx.x + k * kVecThreads) * static_cast<int64_t>(V);
      if (c >= D) continue;
      float out[V];
      if (!kEarlyAdd && dx_add) vec_io::load<V>(dx_add + base + c, add[k]);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        out[i] = s * (wv[k][i] * g[k][i] - xv[k][i] * s * dot) + (dx_add ? add[k][i] : 0.0f);
        acc[k][i] += g[k][i] * xv[k][i] * s;
      }
      vec_io::store<V>(dx + base + c, out);
    }
  }
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int64_t c = (threadIdx.x + k * kVecThreads) * static_cast<int64_t>(V);
    if (c < D) vec_io::store<V>(partial + blockIdx.x * D + c, acc[k]);
  }
}

__global__ void dw_column_sum_kernel(const float* partial, int64_t chunks, float* dw, int64_t D) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * reduce::kReduceCols + threadIdx.x;
  const float total = reduce::column_sum(partial, chunks, D, i);
  if (threadIdx.y == 0 && i < D) dw[i] += total;
}

// Vectors per thread for the vector path, or 0 when the row or a pointer does not allow it.
template <class T>
int vec_count(const RmsNormCudaArgs& a, std::initializer_list<const void*> ptrs) {
  constexpr int V = 16 / sizeof(T);
  if (a.D % V != 0) return 0;
  for (const void* p : ptrs)
    if (!vec_io::aligned_for<T>(V, p)) return 0;
  const int64_t nv = (a.D / V + kVecThreads - 1) / kVecThreads;
  return nv <= kMaxVecs ? static_cast<int>(nv) : 0;
}

// f.template operator()<NV>() for NV in 1, 2, 4, 8 (the smallest that covers nv).
template <class F>
void with_vecs(int nv, F&& f) {
  if (nv <= 1) f.template operator()<1>();
  else if (nv <= 2) f.template operator()<2>();
  else if (nv <= 4) f.template operator()<4>();
  else f.template operator()<8>();
}

template <class T>
bool forward_vec(const RmsNormCudaArgs& a, cudaStream_t s) {
  const int nv = vec_count<T>(a, {a.x, a.w, a.y, a.residual, a.sum});
  if (nv == 0) return false;
  with_vecs(nv, [&]<int NV>() {
    forward_vec_kernel<T, NV><<<static_cast<unsigned>(a.rows), kVecThreads, 0, s>>>(
        static_cast<const T*>(a.x), static_cast<const T*>(a.residual), static_cast<T*>(a.sum),
        static_cast<const T*>(a.w), a.eps, static_cast<T*>(a.y), a.rstd, a.D);
  });
  return true;
}

template <class T>
cudaError_t backward_vec(const RmsNormCudaArgs& a, cudaStream_t s, bool& done) {
  done = false;
  const int nv = vec_count<T>(a, {a.x, a.w, a.dy, a.dx, a.dx_add});
  if (nv == 0) return cudaSuccess;
  const int64_t chunks = (a.rows + kBwdRows - 1) / kBwdRows;
  float* partial = nullptr;
  cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&partial), chunks * a.D * sizeof(float), s);
  if (err != cudaSuccess) return err;
  with_vecs(nv, [&]<int NV>() {
    backward_vec_kernel<T, NV><<<static_cast<unsigned>(chunks), kVecThreads, 0, s>>>(
        static_cast<const T*>(a.x), static_cast<const T*>(a.w), a.rstd, static_cast<const T*>(a.dy),
        static_cast<const T*>(a.dx_add), static_cast<T*>(a.dx), partial, a.rows, a.D);
  });
  dw_column_sum_kernel<<<reduce::column_sum_grid(a.D), reduce::column_sum_block(), 0, s>>>(partial, chunks, a.dw, a.D);
  err = cudaGetLastError();
  cudaError_t free_err = cudaFreeAsync(partial, s);
  done = true;
  return err != cudaSuccess ? err : free_err;
}

}  // namespace

cudaError_t rmsnorm_forward_cuda(const RmsNormCudaArgs& a, cudaStream_t s) {
  if (a.rows == 0) return cudaSuccess;
  if (a.bf16 ? forward_vec<__nv_bfloat16>(a, s) : forward_vec<float>(a, s)) return cudaGetLastError();
  auto run = [&](auto zero) {
    using T = decltype(zero);
    forward_kernel<T><<<static_cast<unsigned>(a.rows), kThreads, 0, s>>>(
        static_cast<const T*>(a.x), static_cast<const T*>(a.residual), static_cast<T*>(a.sum),
        static_cast<const T*>(a.w), a.eps, static_cast<T*>(a.y), a.rstd, a.D);
  };
  if (a.bf16) run(__nv_bfloat16{});
  else run(float{});
  return cudaGetLastError();
}

cudaError_t rmsnorm_backward_cuda(const RmsNormCudaArgs& a, cudaStream_t s) {
  if (a.rows == 0) return cudaSuccess;
  bool done = false;
  cudaError_t vec_err = a.bf16 ? backward_vec<__nv_bfloat16>(a, s, done) : backward_vec<float>(a, s, done);
  if (done || vec_err != cudaSuccess) return vec_err;
  const int64_t chunks = (a.rows + kRowsPerChunk - 1) / kRowsPerChunk;
  float* partial = nullptr;
  cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&partial), chunks * a.D * sizeof(float), s);
  if (err != cudaSuccess) return err;
  auto run = [&](auto zero) {
    using T = decltype(zero);
    const T *x = static_cast<const T*>(a.x), *dy = static_cast<const T*>(a.dy);
    backward_dx_kernel<T><<<static_cast<unsigned>(a.rows), kThreads, 0, s>>>(
        x, static_cast<const T*>(a.w), a.rstd, dy, static_cast<const T*>(a.dx_add), static_cast<T*>(a.dx), a.D);
    const unsigned col_blocks = static_cast<unsigned>((a.D + kThreads - 1) / kThreads);
    backward_dw_partial_kernel<T><<<dim3(col_blocks, static_cast<unsigned>(chunks)), kThreads, 0, s>>>(
        x, a.rstd, dy, partial, a.rows, a.D);
    backward_dw_reduce_kernel<<<col_blocks, kThreads, 0, s>>>(partial, chunks, a.dw, a.D);
  };
  if (a.bf16) run(__nv_bfloat16{});
  else run(float{});
  err = cudaGetLastError();
  cudaError_t free_err = cudaFreeAsync(partial, s);
  return err != cudaSuccess ? err : free_err;
}

}  // namespace nemotron::ops
