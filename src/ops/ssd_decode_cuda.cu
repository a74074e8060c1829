// Recurrent SSD update: one warp per (sequence, head h, row p of the head). The warp keeps its
// state row S[p, :] in float32 registers (lane l holds n = l, l+32, ...), runs the recurrence
//   S <- exp(dt A_h) S + dt x_p B,   y_p = S . C + D_h x_p
// over the sequence's new tokens (B and C rows read coalesced, the dot product one warp sum), and
// writes the row back to the slot once at the end.
#include <cuda_bf16.h>

#include <cmath>
#include <type_traits>

#include "ops/cuda_vec_io.cuh"
#include "ops/ssd_decode_cuda.h"

namespace nemotron::ops {

namespace {

constexpr int kWarps = 4;

using vec_io::from_f;
using vec_io::to_f;

__device__ inline float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <class T, int PER>
__global__ void __launch_bounds__(kWarps * 32)
ssd_decode_kernel(const T* __restrict__ x, const float* __restrict__ dt, const float* __restrict__ A,
                  const T* __restrict__ Bm, const T* __restrict__ Cm, const T* __restrict__ D,
                  float* __restrict__ state, T* __restrict__ y, const int32_t* __restrict__ slot_ids,
                  const int32_t* __restrict__ cu, int64_t S, int64_t nH, int64_t P, int64_t G, int64_t N,
                  int64_t slots) {
  const int64_t warp = blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (warp >= S * nH * P) return;  // uniform per warp
  const int64_t p = warp % P, h = (warp / P) % nH, i = warp / (P * nH);
  const int64_t g = h / (nH / G);
  const int64_t t0 = cu[i], t1 = cu[i + 1], slot = slot_ids[i];
  if (slot < 0 || slot >= slots) {
    if (lane == 0)
      for (int64_t t = t0; t < t1; ++t) y[(t * nH + h) * P + p] = from_f<T>(NAN);
    return;
  }
  float* srow = state + ((slot * nH + h) * P + p) * N;
  float s[PER];
#pragma unroll
  for (int k = 0; k < PER; ++k) {
    const int64_t n = lane + 32 * k;
    s[k] = n < N ? srow[n] : 0.0f;
  }
  const float a = A[h], d = to_f(D[h]);
  for (int64_t t = t0; t < t1; ++t) {
    const float delta = dt[t * nH + h], decay = expf(delta * a);
    const float xp = to_f(x[(t * nH + h) * P + p]), dx = delta * xp;
    const T* b = Bm + (t * G + g) * N;
    const T* c = Cm + (t * G + g) * N;
    float part = 0.0f;
#pragma unroll
    for (int k = 0; k < PER; ++k) {
      const int64_t n = lane + 32 * k;
      if (n < N) {
        s[k] = decay * s[k] + dx * to_f(b[n]);
        part += s[k] * to_f(c[n]);
      }
    }
    const float acc = warp_sum(part);
    if (lane == 0) y[(t * nH + h) * P + p] = from_f<T>(acc + d * xp);
  }
#pragma unroll
  for (int k = 0; k < PER; ++k) {
    const int64_t n = lane + 32 * k;
    if (n < N) srow[n] = s[k];
  }
}

template <class T>
cudaError_t launch(const SsdDecodeCudaArgs& a, cudaStream_t st) {
  const int64_t warps = a.S * a.nH * a.P;
  const unsigned blocks = static_cast<unsigned>((warps + kWarps - 1) / kWarps);
  auto go = [&](auto per) {
    ssd_decode_kernel<T, decltype(per)::value><<<blocks, kWarps * 32, 0, st>>>(
        static_cast<const T*>(a.x), a.dt, a.A, static_cast<const T*>(a.Bm), static_cast<const T*>(a.Cm),
        static_cast<const T*>(a.D), a.state, static_cast<T*>(a.y), a.slot_ids, a.cu_seqlens, a.S, a.nH, a.P, a.G, a.N,
        a.slots);
  };
  if (a.N <= 32) go(std::integral_constant<int, 1>{});
  else if (a.N <= 64) go(std::integral_constant<int, 2>{});
  else if (a.N <= 128) go(std::integral_constant<int, 4>{});
  else go(std::integral_constant<int, 8>{});
  return cudaGetLastError();
}

}  // namespace

cudaError_t ssd_decode_cuda(const SsdDecodeCudaArgs& a, cudaStream_t s) {
  if (a.S == 0 || a.nH == 0 || a.P == 0) return cudaSuccess;
  if (a.N <= 0 || a.N > kSsdDecodeCudaMaxN || a.G <= 0 || a.nH % a.G != 0) return cudaErrorInvalidValue;
  return a.bf16 ? launch<__nv_bfloat16>(a, s) : launch<float>(a, s);
}

}  // namespace nemotron::ops
