// RoPE kernel: one thread per (token, pair i) computes its angle once and rotates that pair in
// every head. The angle (offset + t) * f_i (ops/rope_freq.h, plain or llama3-scaled) is formed and reduced modulo 2 pi in
// float64, so long positions keep float32-exact cos/sin (a float32 angle near t = 4096 would be
// off by ~1e-4 rad). With position_ids (packed rows) the position of token (b, t) is read from it.
#include <cuda_bf16.h>

#include "ops/rope_cuda.h"
#include "ops/cuda_vec_io.cuh"

namespace nemotron::ops {

namespace {

constexpr int kThreads = 256;

using vec_io::from_f;
using vec_io::to_f;

template <class T>
__global__ void rope_kernel(const T* x, T* y, int64_t BT, int64_t T_, int64_t nh, int64_t hd, RopeFreq freq,
                            int64_t offset, const int32_t* __restrict__ pos, float sign) {
  const int64_t half = hd / 2;
  const int64_t idx = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  if (idx >= BT * half) return;
  const int64_t i = idx % half, bt = idx / half, t = bt % T_;
  const int64_t p = pos ? static_cast<int64_t>(pos[bt]) : t;
  const double a = static_cast<double>(offset + p) * rope_inv_freq(freq, i, hd);
  constexpr double kTwoPi = 6.283185307179586;
  const float r = static_cast<float>(a - kTwoPi * rint(a / kTwoPi));
  float s, c;
  sincosf(r, &s, &c);
  s *= sign;
  for (int64_t h = 0; h < nh; ++h) {
    const int64_t base = (bt * nh + h) * hd + i;
    const float u = to_f(x[base]), w = to_f(x[base + half]);  // both read before writing: y may alias x
    y[base] = from_f<T>(u * c - w * s);
    y[base + half] = from_f<T>(w * c + u * s);
  }
}

}  // namespace

cudaError_t rope_cuda(const RopeCudaArgs& a, cudaStream_t s) {
  const int64_t n = a.B * a.T * (a.hd / 2);
  if (n == 0 || a.nh == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>((n + kThreads - 1) / kThreads);
  auto run = [&](auto zero) {
    using T = decltype(zero);
    rope_kernel<T><<<blocks, kThreads, 0, s>>>(static_cast<const T*>(a.x), static_cast<T*>(a.y), a.B * a.T, a.T, a.nh,
                                               a.hd, a.freq, a.position_offset, a.position_ids,
                                               static_cast<float>(a.sign));
  };
  if (a.bf16) run(__nv_bfloat16{});
  else run(float{});
  return cudaGetLastError();
}

}  // namespace nemotron::ops
