// Device helpers for elementwise kernels (nvcc only): float32 <-> storage conversion, and loads /
// stores of N consecutive elements as one aligned access (N * sizeof(T) bytes) when the caller has
// checked the alignment; the float values always live in registers.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

namespace nemotron::ops::vec_io {

__device__ inline float to_f(float v) { return v; }
__device__ inline float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T> __device__ inline T from_f(float v);
template <> __device__ inline float from_f<float>(float v) { return v; }
template <> __device__ inline __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16(v); }

template <class T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

// out[i] = p[i], i < N; p must be aligned to N * sizeof(T).
template <int N, class T>
__device__ inline void load(const T* p, float (&out)[N]) {
  Pack<T, N> pk = *reinterpret_cast<const Pack<T, N>*>(p);
#pragma unroll
  for (int i = 0; i < N; ++i) out[i] = to_f(pk.v[i]);
}

template <int N, class T>
__device__ inline void store(T* p, const float (&in)[N]) {
  Pack<T, N> pk;
#pragma unroll
  for (int i = 0; i < N; ++i) pk.v[i] = from_f<T>(in[i]);
  *reinterpret_cast<Pack<T, N>*>(p) = pk;
}

// True when every pointer is aligned for N-element packs of T (nullptr counts as aligned).
template <class T>
inline bool aligned_for(int n, const void* p) {
  return (reinterpret_cast<uintptr_t>(p) % (sizeof(T) * static_cast<uintptr_t>(n))) == 0;
}
template <class T, class... P>
inline bool aligned_for(int n, const void* p, P... rest) {
  return aligned_for<T>(n, p) && aligned_for<T>(n, rest...);
}

// Fast-math sigmoid (MUFU exp2 and reciprocal, a few ulp): these kernels are memory-bound only when
// their per-element instruction count is small. Saturates correctly: 0 for v -> -inf, 1 for +inf.
__device__ inline float sigmoid(float v) { return __fdividef(1.0f, 1.0f + __expf(-v)); }

}  // namespace nemotron::ops::vec_io
