// Memory-bound kernels in packs of 8 elements: one 16-byte load/store for bfloat16, two for
// float32, when the pointers are 16-byte aligned and the pack is whole; scalar accesses at the
// tail or on unaligned views. Values are float32 in registers. A grid-stride loop covers any n.
// Included by .cu files only.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops::pack {

constexpr int kPack = 8;
constexpr int kThreads = 256;

__device__ inline float to_f(float v) { return v; }
__device__ inline float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T> __device__ inline T from_f(float v);
template <> __device__ inline float from_f<float>(float v) { return v; }
template <> __device__ inline __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

__device__ inline void load8(const float* p, float (&v)[kPack]) {
  float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
__device__ inline void load8(const __nv_bfloat16* p, float (&v)[kPack]) {
  uint4 u = *reinterpret_cast<const uint4*>(p);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    float2 f = __bfloat1622float2(h[k]);
    v[2 * k] = f.x, v[2 * k + 1] = f.y;
  }
}
__device__ inline void store8(float* p, const float (&v)[kPack]) {
  reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
  reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}
__device__ inline void store8(__nv_bfloat16* p, const float (&v)[kPack]) {
  uint4 u;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
  for (int k = 0; k < 4; ++k) h[k] = __floats2bfloat162_rn(v[2 * k], v[2 * k + 1]);
  *reinterpret_cast<uint4*>(p) = u;
}

// Elements [0, count) of the pack at p; `whole` = a full, aligned pack (vector access).
template <class T>
__device__ inline void load(const T* p, int count, bool whole, float (&v)[kPack]) {
  if (whole) {
    load8(p, v);
  } else {
#pragma unroll
    for (int k = 0; k < kPack; ++k) v[k] = k < count ? to_f(p[k]) : 0.0f;
  }
}
template <class T>
__device__ inline void store(T* p, int count, bool whole, const float (&v)[kPack]) {
  if (whole) {
    store8(p, v);
  } else {
#pragma unroll
    for (int k = 0; k < kPack; ++k)
      if (k < count) p[k] = from_f<T>(v[k]);
  }
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// op(i, count, whole) handles elements [i, i + count) of n; `vec` = every pointer is aligned.
template <class Op>
__global__ void map_kernel(Op op, int64_t n, bool vec) {
  const int64_t packs = (n + kPack - 1) / kPack;
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < packs;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = p * kPack;
    const int count = n - i < kPack ? static_cast<int>(n - i) : kPack;
    op(i, count, vec && count == kPack);
  }
}

// Enough blocks to fill the GPU a few times over; the grid-stride loop does the rest.
inline unsigned grid_for(int64_t packs) {
  static int sms = [] {
    int dev = 0, n = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
    return n > 0 ? n : 132;
  }();
  int64_t blocks = (packs + kThreads - 1) / kThreads, cap = static_cast<int64_t>(sms) * 8;
  return static_cast<unsigned>(blocks < cap ? (blocks > 0 ? blocks : 1) : cap);
}

template <class Op>
cudaError_t launch_map(const Op& op, int64_t n, bool vec, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  map_kernel<Op><<<grid_for((n + kPack - 1) / kPack), kThreads, 0, s>>>(op, n, vec);
  return cudaGetLastError();
}

}  // namespace nemotron::ops::pack
