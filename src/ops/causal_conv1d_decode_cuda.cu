// Windowed causal conv decode: one thread per (sequence, channel). The thread holds the channel's
// K taps and its K-1 window values in float32 registers, runs over the sequence's new rows (the
// window shifting by one per row), and writes the last K-1 inputs back to the slot. Neighbouring
// threads are neighbouring channels, so every row access is coalesced.
#include <cuda_bf16.h>

#include <cmath>
#include <type_traits>

#include "ops/causal_conv1d_decode_cuda.h"
#include "ops/cuda_vec_io.cuh"

namespace nemotron::ops {

namespace {

constexpr int kThreads = 128;
constexpr int kMaxK = static_cast<int>(kCausalConv1dDecodeCudaMaxK);

using vec_io::from_f;
using vec_io::to_f;

template <class T, int K>
__global__ void conv_decode_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                                   T* __restrict__ state, T* __restrict__ y, const int32_t* __restrict__ slot_ids,
                                   const int32_t* __restrict__ cu, int64_t S, int64_t C, int64_t slots) {
  const int64_t idx = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  if (idx >= S * C) return;
  const int64_t i = idx / C, c = idx % C;
  const int64_t t0 = cu[i], t1 = cu[i + 1], slot = slot_ids[i];
  if (slot < 0 || slot >= slots) {
    for (int64_t t = t0; t < t1; ++t) y[t * C + c] = from_f<T>(NAN);
    return;
  }
  float tap[K], win[K];  // win[0..K-2]: the window, oldest first; win[K-1]: the current input
#pragma unroll
  for (int k = 0; k < K; ++k) tap[k] = to_f(w[c * K + k]);
  T* st = state + slot * (K - 1) * C + c;
#pragma unroll
  for (int k = 0; k < K - 1; ++k) win[k] = to_f(st[k * C]);
  const float b = bias ? to_f(bias[c]) : 0.0f;
  for (int64_t t = t0; t < t1; ++t) {
    win[K - 1] = to_f(x[t * C + c]);
    float pre = b;
#pragma unroll
    for (int k = 0; k < K; ++k) pre += tap[k] * win[k];
    y[t * C + c] = from_f<T>(pre / (1.0f + expf(-pre)));
#pragma unroll
    for (int k = 0; k < K - 1; ++k) win[k] = win[k + 1];
  }
  // The window values came from storage (state or x) unchanged, so writing them back is exact.
#pragma unroll
  for (int k = 0; k < K - 1; ++k) st[k * C] = from_f<T>(win[k]);
}

template <class T>
cudaError_t launch(const CausalConv1dDecodeCudaArgs& a, cudaStream_t s) {
  const unsigned blocks = static_cast<unsigned>((a.S * a.C + kThreads - 1) / kThreads);
  auto go = [&](auto kk) {
    conv_decode_kernel<T, decltype(kk)::value><<<blocks, kThreads, 0, s>>>(
        static_cast<const T*>(a.x), static_cast<const T*>(a.w), static_cast<const T*>(a.bias), static_cast<T*>(a.state),
        static_cast<T*>(a.y), a.slot_ids, a.cu_seqlens, a.S, a.C, a.slots);
  };
  switch (a.K) {
    case 1: go(std::integral_constant<int, 1>{}); break;
    case 2: go(std::integral_constant<int, 2>{}); break;
    case 3: go(std::integral_constant<int, 3>{}); break;
    case 4: go(std::integral_constant<int, 4>{}); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t causal_conv1d_decode_cuda(const CausalConv1dDecodeCudaArgs& a, cudaStream_t s) {
  static_assert(kMaxK == 4, "launch() instantiates K = 1..4");
  if (a.S == 0 || a.C == 0) return cudaSuccess;
  return a.bf16 ? launch<__nv_bfloat16>(a, s) : launch<float>(a, s);
}

}  // namespace nemotron::ops
