// dt_softplus kernels: the forward is elementwise; the backward writes d_dt_raw and reduces
// d_dt_bias over rows deterministically (a block per chunk of rows sums its column in a fixed
// order through shared memory, then a second kernel adds the chunk partials in order).
#include <cuda_bf16.h>

#include "ops/cuda_reduce.cuh"
#include "ops/cuda_vec_io.cuh"
#include "ops/dt_softplus_cuda.h"

namespace nemotron::ops {

namespace {

using namespace vec_io;

constexpr int kCols = 32;          // heads per block (one warp wide)
constexpr int kRowThreads = 8;     // thread rows per block
constexpr int kRowsPerChunk = 32;  // rows per block in the backward

__device__ inline float softplus(float v) { return fmaxf(v, 0.0f) + log1pf(expf(-fabsf(v))); }

template <class T>
__global__ void forward_kernel(const T* __restrict__ raw, const T* __restrict__ bias, float lo, float hi,
                               float* __restrict__ dt, int64_t n, int64_t nH) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dt[i] = fminf(fmaxf(softplus(to_f(raw[i]) + to_f(bias[i % nH])), lo), hi);
}

template <class T>
__global__ void backward_kernel(const T* __restrict__ raw, const T* __restrict__ bias, float lo, float hi,
                                const float* __restrict__ ddt, T* __restrict__ draw, float* __restrict__ partial,
                                int64_t rows, int64_t nH) {
  __shared__ float red[kRowThreads][kCols];
  const int64_t h = static_cast<int64_t>(blockIdx.x) * kCols + threadIdx.x;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kRowsPerChunk;
  const int64_t r1 = r0 + kRowsPerChunk < rows ? r0 + kRowsPerChunk : rows;
  float acc = 0.0f;
  if (h < nH) {
    const float b = to_f(bias[h]);
#pragma unroll 4
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowThreads) {
      const int64_t i = r * nH + h;
      const float v = to_f(raw[i]) + b, sp = softplus(v);
      const float g = (sp < lo || sp > hi) ? 0.0f : ddt[i] / (1.0f + expf(-v));
      const T gt = from_f<T>(g);
      draw[i] = gt;
      acc += g;
    }
  }
  red[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && h < nH) {
    float s = 0.0f;
#pragma unroll
    for (int y = 0; y < kRowThreads; ++y) s += red[y][threadIdx.x];
    partial[blockIdx.y * nH + h] = s;
  }
}

// dbias[h] += sum over chunks of partial[chunk, h] (chunks in a fixed order).
__global__ void reduce_kernel(const float* __restrict__ partial, int64_t chunks, int64_t nH,
                              float* __restrict__ dbias) {
  const int64_t h = static_cast<int64_t>(blockIdx.x) * reduce::kReduceCols + threadIdx.x;
  const float total = reduce::column_sum(partial, chunks, nH, h);
  if (threadIdx.y == 0 && h < nH) dbias[h] += total;
}

}  // namespace

cudaError_t dt_softplus_forward_cuda(const DtSoftplusCudaArgs& a, cudaStream_t s) {
  const int64_t n = a.rows * a.nH;
  if (n == 0) return cudaSuccess;
  const int64_t blocks_needed = (n + 255) / 256;
  const unsigned blocks = static_cast<unsigned>(blocks_needed < 65535 * 16 ? blocks_needed : 65535 * 16);
  if (a.bf16)
    forward_kernel<<<blocks, 256, 0, s>>>(static_cast<const __nv_bfloat16*>(a.dt_raw),
                                          static_cast<const __nv_bfloat16*>(a.dt_bias), a.lo, a.hi, a.dt, n, a.nH);
  else
    forward_kernel<<<blocks, 256, 0, s>>>(static_cast<const float*>(a.dt_raw), static_cast<const float*>(a.dt_bias),
                                          a.lo, a.hi, a.dt, n, a.nH);
  return cudaGetLastError();
}

cudaError_t dt_softplus_backward_cuda(const DtSoftplusCudaArgs& a, cudaStream_t s) {
  if (a.rows == 0 || a.nH == 0) return cudaSuccess;
  const int64_t chunks = (a.rows + kRowsPerChunk - 1) / kRowsPerChunk;
  float* partial = nullptr;
  cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&partial), chunks * a.nH * sizeof(float), s);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>((a.nH + kCols - 1) / kCols), static_cast<unsigned>(chunks));
  const dim3 block(kCols, kRowThreads);
  if (a.bf16)
    backward_kernel<<<grid, block, 0, s>>>(static_cast<const __nv_bfloat16*>(a.dt_raw),
                                           static_cast<const __nv_bfloat16*>(a.dt_bias), a.lo, a.hi, a.ddt,
                                           static_cast<__nv_bfloat16*>(a.d_dt_raw), partial, a.rows, a.nH);
  else
    backward_kernel<<<grid, block, 0, s>>>(static_cast<const float*>(a.dt_raw), static_cast<const float*>(a.dt_bias),
                                           a.lo, a.hi, a.ddt, static_cast<float*>(a.d_dt_raw), partial, a.rows,
                                           a.nH);
  reduce_kernel<<<reduce::column_sum_grid(a.nH), reduce::column_sum_block(), 0, s>>>(partial, chunks, a.nH,
                                                                                      a.d_dt_bias);
  err = cudaGetLastError();
  cudaError_t free_err = cudaFreeAsync(partial, s);
  return err != cudaSuccess ? err : free_err;
}

}  // namespace nemotron::ops
