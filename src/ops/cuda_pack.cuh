// Memory-bound kernels in packs: one 16-byte load/store per tensor (4 float32s or 8 bfloat16s)
// when the pointers are 16-byte aligned and the pack is whole; scalar accesses at the tail or on
// unaligned views. Values are float32 in registers. A grid-stride loop covers any n.
// Included by .cu files only.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/cuda_vec_io.cuh"

namespace nemotron::ops::pack {

constexpr int kMaxPack = 8;
constexpr int kThreads = 256;

// Elements per pack so that each access is one 16-byte vector: 4 float32s or 8 bfloat16s
// (a pack of mixed dtypes takes the narrower count, so the float32 side stays one float4).
template <class... T>
constexpr int pack_width() {
  size_t widest = 0;
  ((widest = sizeof(T) > widest ? sizeof(T) : widest), ...);
  return static_cast<int>(16 / widest);
}

using vec_io::from_f;
using vec_io::to_f;

// Whole, aligned packs: W = 4 or 8 elements.
template <int W>
__device__ inline void load_vec(const float* p, float (&v)[W]) {
#pragma unroll
  for (int j = 0; j < W / 4; ++j) {
    float4 a = reinterpret_cast<const float4*>(p)[j];
    v[4 * j] = a.x, v[4 * j + 1] = a.y, v[4 * j + 2] = a.z, v[4 * j + 3] = a.w;
  }
}
template <int W>
__device__ inline void load_vec(const __nv_bfloat16* p, float (&v)[W]) {
  __nv_bfloat162 h[W / 2];
  if constexpr (W == 8) *reinterpret_cast<uint4*>(h) = *reinterpret_cast<const uint4*>(p);
  else *reinterpret_cast<uint2*>(h) = *reinterpret_cast<const uint2*>(p);
#pragma unroll
  for (int k = 0; k < W / 2; ++k) {
    float2 f = __bfloat1622float2(h[k]);
    v[2 * k] = f.x, v[2 * k + 1] = f.y;
  }
}
template <int W>
__device__ inline void store_vec(float* p, const float (&v)[W]) {
#pragma unroll
  for (int j = 0; j < W / 4; ++j)
    reinterpret_cast<float4*>(p)[j] = make_float4(v[4 * j], v[4 * j + 1], v[4 * j + 2], v[4 * j + 3]);
}
template <int W>
__device__ inline void store_vec(__nv_bfloat16* p, const float (&v)[W]) {
  __nv_bfloat162 h[W / 2];
#pragma unroll
  for (int k = 0; k < W / 2; ++k) h[k] = __floats2bfloat162_rn(v[2 * k], v[2 * k + 1]);
  if constexpr (W == 8) *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(h);
  else *reinterpret_cast<uint2*>(p) = *reinterpret_cast<const uint2*>(h);
}

// Elements [0, count) of the pack at p; `whole` = a full, aligned pack (vector access).
template <class T, int W>
__device__ inline void load(const T* p, int count, bool whole, float (&v)[W]) {
  if (whole) {
    load_vec<W>(p, v);
  } else {
#pragma unroll
    for (int k = 0; k < W; ++k) v[k] = k < count ? to_f(p[k]) : 0.0f;
  }
}
template <class T, int W>
__device__ inline void store(T* p, int count, bool whole, const float (&v)[W]) {
  if (whole) {
    store_vec<W>(p, v);
  } else {
#pragma unroll
    for (int k = 0; k < W; ++k)
      if (k < count) p[k] = from_f<T>(v[k]);
  }
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// op(i, count, whole) handles elements [i, i + count) of n, count <= Op::kWidth; `vec` = every
// pointer is 16-byte aligned.
template <class Op>
__global__ void map_kernel(Op op, int64_t n, bool vec) {
  constexpr int kPack = Op::kWidth;
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
  map_kernel<Op><<<grid_for((n + Op::kWidth - 1) / Op::kWidth), kThreads, 0, s>>>(op, n, vec);
  return cudaGetLastError();
}

}  // namespace nemotron::ops::pack
