// RMSNorm kernels: one block per row with a float32 block reduction; dw reduced over rows in two
// fixed-order stages (row chunks into float32 partials, then the partials), deterministic and
// without atomics.
#include <cuda_bf16.h>

#include "ops/rmsnorm_cuda.h"

namespace nemotron::ops {

namespace {

constexpr int kThreads = 256;

__device__ inline float to_f(float v) { return v; }
__device__ inline float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T> __device__ inline T from_f(float v);
template <> __device__ inline float from_f<float>(float v) { return v; }
template <> __device__ inline __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16(v); }

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

}  // namespace

cudaError_t rmsnorm_forward_cuda(const RmsNormCudaArgs& a, cudaStream_t s) {
  if (a.rows == 0) return cudaSuccess;
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
