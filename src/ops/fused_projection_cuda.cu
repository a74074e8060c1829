// fused_projection_cuda.h: grid-stride copies and elementwise maps. split_columns moves 16-byte
// units when every block's width and pointer allow it (the 8B's q/k/v widths do), else elements.
#include <cuda_bf16.h>

#include <algorithm>

#include "ops/fused_projection_cuda.h"

namespace nemotron::ops {

namespace {

template <class U>
__global__ void split_columns_kernel(const U* __restrict__ y, SplitColumnsCudaArgs a, int64_t total_units,
                                     int64_t n) {
  // a.widths here in units of U.
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n; e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = e / total_units;
    int64_t c = e - r * total_units;
    int i = 0;
    while (i + 1 < a.blocks && c >= a.widths[i]) c -= a.widths[i], ++i;
    static_cast<U*>(a.outs[i])[r * a.widths[i] + c] = y[e];
  }
}

unsigned grid_for(int64_t n, int threads) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + threads - 1) / threads, 1, int64_t{132} * 32));
}

template <class T>
__device__ inline float to_float(T v) {
  if constexpr (sizeof(T) == 2) return __bfloat162float(v);
  else return v;
}

__device__ inline void store(float* p, float v) { *p = v; }
__device__ inline void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }

// The same sigmoid as activations_cuda.cu (fast division; expf(-g) = inf gives 0).
__device__ inline float sigmoid(float g) { return __fdividef(1.0f, 1.0f + expf(-g)); }

// 16 bytes of gate and of up per thread (8 bfloat16 or 4 float32; F a multiple of that and the
// pointers 16-byte aligned: the 8B's F of 14336 or 7168 is), each element as the scalar form.
template <class T>
__global__ void swiglu_halves_kernel(const T* __restrict__ gu, T* __restrict__ out, int64_t F, int64_t n) {
  constexpr int W = 16 / sizeof(T);
  const int64_t Fp = F / W, packs = n / W;
  for (int64_t p = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; p < packs; p += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = p / Fp, f = (p - r * Fp) * W;
    const uint4 gv = *reinterpret_cast<const uint4*>(gu + r * 2 * F + f);
    const uint4 uv = *reinterpret_cast<const uint4*>(gu + r * 2 * F + F + f);
    const T* g = reinterpret_cast<const T*>(&gv);
    const T* u = reinterpret_cast<const T*>(&uv);
    uint4 ov;
    T* o = reinterpret_cast<T*>(&ov);
#pragma unroll
    for (int k = 0; k < W; ++k) {
      const float gf = to_float(g[k]);
      store(o + k, gf * sigmoid(gf) * to_float(u[k]));
    }
    *reinterpret_cast<uint4*>(out + p * W) = ov;
  }
}

template <class T>
__global__ void swiglu_halves_scalar_kernel(const T* __restrict__ gu, T* __restrict__ out, int64_t F, int64_t n) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n; e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = e / F, f = e - r * F;
    const float g = to_float(gu[r * 2 * F + f]), u = to_float(gu[r * 2 * F + F + f]);
    store(out + e, g * sigmoid(g) * u);
  }
}

template <class T>
cudaError_t swiglu_halves_as(const SwigluHalvesCudaArgs& a, cudaStream_t stream) {
  constexpr int kThreads = 256, W = 16 / sizeof(T);
  const int64_t n = a.rows * a.F;
  const auto* gu = static_cast<const T*>(a.gate_up);
  auto* out = static_cast<T*>(a.out);
  const bool vec = a.F % W == 0 && reinterpret_cast<uintptr_t>(gu) % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0;
  if (vec) swiglu_halves_kernel<T><<<grid_for(n / W, kThreads), kThreads, 0, stream>>>(gu, out, a.F, n);
  else swiglu_halves_scalar_kernel<T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(gu, out, a.F, n);
  return cudaGetLastError();
}

template <class U>
cudaError_t split_as(SplitColumnsCudaArgs a, cudaStream_t stream) {
  const int64_t per = static_cast<int64_t>(sizeof(U)) / a.elem_bytes;  // elements per unit
  for (int i = 0; i < a.blocks; ++i) a.widths[i] /= per;
  const int64_t total = a.total / per, n = a.rows * total;
  constexpr int kThreads = 256;
  split_columns_kernel<U><<<grid_for(n, kThreads), kThreads, 0, stream>>>(static_cast<const U*>(a.y), a, total, n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t split_columns_cuda(const SplitColumnsCudaArgs& a, cudaStream_t stream) {
  if (a.blocks < 1 || a.blocks > kMaxColumnBlocks || (a.elem_bytes != 2 && a.elem_bytes != 4))
    return cudaErrorInvalidValue;
  if (a.rows == 0 || a.total == 0) return cudaSuccess;
  auto fits = [&](int64_t unit) {
    if (reinterpret_cast<uintptr_t>(a.y) % unit) return false;
    for (int i = 0; i < a.blocks; ++i)
      if ((a.widths[i] * a.elem_bytes) % unit || reinterpret_cast<uintptr_t>(a.outs[i]) % unit) return false;
    return true;
  };
  if (fits(16)) return split_as<uint4>(a, stream);
  if (a.elem_bytes == 4) return split_as<uint32_t>(a, stream);
  return split_as<uint16_t>(a, stream);
}

cudaError_t swiglu_halves_forward_cuda(const SwigluHalvesCudaArgs& a, cudaStream_t stream) {
  if (a.rows * a.F == 0) return cudaSuccess;
  return a.bf16 ? swiglu_halves_as<__nv_bfloat16>(a, stream) : swiglu_halves_as<float>(a, stream);
}

}  // namespace nemotron::ops
