// RMSNorm kernels: one block per row with a float32 block reduction; dw reduced over rows by
// column-parallel threads in a fixed order (deterministic, no atomics).
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
__global__ void forward_kernel(const T* x, const T* w, float eps, T* y, float* rstd, int64_t D) {
  const T* xr = x + blockIdx.x * D;
  float ss = 0;
  for (int64_t i = threadIdx.x; i < D; i += kThreads) ss += to_f(xr[i]) * to_f(xr[i]);
  float s = rsqrtf(block_sum(ss) / static_cast<float>(D) + eps);
  if (threadIdx.x == 0) rstd[blockIdx.x] = s;
  for (int64_t i = threadIdx.x; i < D; i += kThreads) y[blockIdx.x * D + i] = from_f<T>(to_f(w[i]) * to_f(xr[i]) * s);
}

template <class T>
__global__ void backward_dx_kernel(const T* x, const T* w, const float* rstd, const T* dy, T* dx, int64_t D) {
  const int64_t base = blockIdx.x * D;
  float s = rstd[blockIdx.x], dot = 0;
  for (int64_t i = threadIdx.x; i < D; i += kThreads) dot += to_f(w[i]) * to_f(dy[base + i]) * to_f(x[base + i]);
  dot = block_sum(dot) * s / static_cast<float>(D);
  for (int64_t i = threadIdx.x; i < D; i += kThreads)
    dx[base + i] = from_f<T>(s * (to_f(w[i]) * to_f(dy[base + i]) - to_f(x[base + i]) * s * dot));
}

template <class T>
__global__ void backward_dw_kernel(const T* x, const float* rstd, const T* dy, T* dw, int64_t rows, int64_t D) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= D) return;
  float acc = 0;
  for (int64_t r = 0; r < rows; ++r) acc += to_f(dy[r * D + i]) * to_f(x[r * D + i]) * rstd[r];
  dw[i] = from_f<T>(to_f(dw[i]) + acc);
}

}  // namespace

cudaError_t rmsnorm_forward_cuda(const RmsNormCudaArgs& a, cudaStream_t s) {
  if (a.rows == 0) return cudaSuccess;
  auto run = [&](auto zero) {
    using T = decltype(zero);
    forward_kernel<T><<<static_cast<unsigned>(a.rows), kThreads, 0, s>>>(
        static_cast<const T*>(a.x), static_cast<const T*>(a.w), a.eps, static_cast<T*>(a.y), a.rstd, a.D);
  };
  if (a.bf16) run(__nv_bfloat16{});
  else run(float{});
  return cudaGetLastError();
}

cudaError_t rmsnorm_backward_cuda(const RmsNormCudaArgs& a, cudaStream_t s) {
  if (a.rows == 0) return cudaSuccess;
  auto run = [&](auto zero) {
    using T = decltype(zero);
    const T *x = static_cast<const T*>(a.x), *dy = static_cast<const T*>(a.dy);
    backward_dx_kernel<T><<<static_cast<unsigned>(a.rows), kThreads, 0, s>>>(
        x, static_cast<const T*>(a.w), a.rstd, dy, static_cast<T*>(a.dx), a.D);
    backward_dw_kernel<T><<<static_cast<unsigned>((a.D + kThreads - 1) / kThreads), kThreads, 0, s>>>(
        x, a.rstd, dy, static_cast<T*>(a.dw), a.rows, a.D);
  };
  if (a.bf16) run(__nv_bfloat16{});
  else run(float{});
  return cudaGetLastError();
}

}  // namespace nemotron::ops
