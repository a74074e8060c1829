// Fused softmax cross-entropy: one block per row (512 threads, two rows per SM, so one block's
// reduction and launch overlap the other's streaming). Pass 1 reads the row once with a
// per-thread online max/sum (float32, 16-byte loads when the row allows), merged across the
// block; pass 2 re-reads the row backwards (the packs read last, likeliest still in L2, first) and
// writes the gradient, in place when dlogits aliases logits. No float32 copy of the logits is made.
// Measured on an H200 (copy 4.27 TB/s), [8192, 131072] bf16: forward 0.63 ms, forward + backward
// in place 1.58 ms (256 threads: 0.58 / 1.58 ms; a cluster form holding the row in shared memory
// was slower, 1.93 ms, see git history).
#include <cuda_bf16.h>

#include <cmath>

#include "ops/cross_entropy_cuda.h"
#include "ops/cuda_online_softmax.cuh"
#include "ops/cuda_vec_io.cuh"

namespace nemotron::ops {

namespace {

using u64 = unsigned long long;
constexpr int kUnroll = 4;

using online_softmax::block_merge;
using online_softmax::kLog2e;
using online_softmax::merge;
using vec_io::from_f;
using vec_io::to_f;

// VEC consecutive elements as one aligned load/store (VEC * sizeof(T) is 16 bytes or 1 element).
template <class T, int VEC>
struct alignas(VEC * sizeof(T)) Pack {
  T v[VEC];
};

// kThreads per block, 1024 / kThreads blocks per SM (64 registers a thread).
template <class T, int VEC, int kThreads>
__global__ void __launch_bounds__(kThreads, 1024 / kThreads)
    ce_kernel(const T* logits, T* dlogits, const void* targets, bool targets64, const void* mask, bool mask_f32,
              float* losses, int64_t V, float grad_scale, u64* bad) {
  using P = Pack<T, VEC>;
  const int64_t n = blockIdx.x;
  const T* row = logits + n * V;
  const int64_t y = targets64 ? static_cast<const int64_t*>(targets)[n] : static_cast<const int32_t*>(targets)[n];
  float mk = 1.0f;
  if (mask) mk = mask_f32 ? static_cast<const float*>(mask)[n] : to_f(static_cast<const T*>(mask)[n]);
  if (y >= V) {
    if (threadIdx.x == 0) atomicMin(bad, static_cast<u64>(n)), losses[n] = NAN;
    mk = 0.0f;
  }
  const bool live = y >= 0 && y < V && mk != 0.0f;  // a row whose loss and gradient are not zero
  float lse = 0.0f;
  if (live) {
    float m = -INFINITY, s = 0.0f;
    const int64_t packs = V / VEC;
    const P* prow = reinterpret_cast<const P*>(row);
    // kUnroll loads in flight per thread before any math: enough bytes in flight per SM to keep
    // HBM busy with one row per SM.
    for (int64_t p0 = threadIdx.x; p0 < packs; p0 += kUnroll * kThreads) {
      P x[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (p0 + u * kThreads < packs) x[u] = prow[p0 + u * kThreads];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (p0 + u * kThreads >= packs) break;
        float f[VEC], mx = -INFINITY;
#pragma unroll
        for (int k = 0; k < VEC; ++k) f[k] = to_f(x[u].v[k]), mx = fmaxf(mx, f[k]);
        float part = 0.0f;
#pragma unroll
        for (int k = 0; k < VEC; ++k) part += exp2f((f[k] - mx) * kLog2e);
        merge(m, s, mx, part);
      }
    }
    block_merge<kThreads>(m, s);
    lse = m + logf(s);
    if (threadIdx.x == 0) losses[n] = mk * (lse - to_f(row[y]));
  } else if (threadIdx.x == 0 && y < V) {
    losses[n] = 0.0f;
  }
  if (!dlogits) return;
  __syncthreads();  // every read of pass 1 (and of row[y]) precedes the in-place writes
  const float g = live ? grad_scale * mk : 0.0f;
  const int64_t packs = V / VEC;
  const P* prow = reinterpret_cast<const P*>(row);
  P* drow = reinterpret_cast<P*>(dlogits + n * V);
  // Backwards over the row: the packs pass 1 read last are the likeliest to be still in L2.
  const int64_t last = packs - 1 - threadIdx.x;
  for (int64_t p0 = last; p0 >= 0; p0 -= kUnroll * kThreads) {
    P x[kUnroll];
    if (g != 0.0f) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (p0 - u * kThreads >= 0) x[u] = prow[p0 - u * kThreads];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t p = p0 - u * kThreads;
      if (p < 0) break;
      P out;
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        float d = 0.0f;
        if (g != 0.0f) {
          d = g * exp2f((to_f(x[u].v[k]) - lse) * kLog2e);
          if (p * VEC + k == y) d -= g;
        }
        out.v[k] = from_f<T>(d);
      }
      drow[p] = out;
    }
  }
}

template <class T, int kThreads>
void launch(const CrossEntropyCudaArgs& a, cudaStream_t s, u64* bad) {
  constexpr int kVec = 16 / sizeof(T);
  const bool vec = a.V % kVec == 0 && reinterpret_cast<uintptr_t>(a.logits) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(a.dlogits) % 16 == 0;
  const unsigned grid = static_cast<unsigned>(a.N);
  const T* x = static_cast<const T*>(a.logits);
  T* d = static_cast<T*>(a.dlogits);
  if (vec)
    ce_kernel<T, kVec, kThreads><<<grid, kThreads, 0, s>>>(x, d, a.targets, a.targets64, a.mask, a.mask_f32,
                                                           a.losses, a.V, a.grad_scale, bad);
  else
    ce_kernel<T, 1, kThreads><<<grid, kThreads, 0, s>>>(x, d, a.targets, a.targets64, a.mask, a.mask_f32, a.losses,
                                                        a.V, a.grad_scale, bad);
}

template <class T>
cudaError_t launch_threads(const CrossEntropyCudaArgs& a, cudaStream_t s, u64* bad) {
  switch (a.threads) {
    case 256: launch<T, 256>(a, s, bad); break;
    case 0:
    case 512: launch<T, 512>(a, s, bad); break;
    case 1024: launch<T, 1024>(a, s, bad); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t softmax_cross_entropy_cuda(const CrossEntropyCudaArgs& a, cudaStream_t s, int64_t* bad_row) {
  *bad_row = -1;
  if (a.N == 0) return cudaSuccess;
  u64* bad = nullptr;
  cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&bad), sizeof(u64), s);
  if (err != cudaSuccess) return err;
  err = cudaMemsetAsync(bad, 0xff, sizeof(u64), s);
  if (err == cudaSuccess) {
    err = a.bf16 ? launch_threads<__nv_bfloat16>(a, s, bad) : launch_threads<float>(a, s, bad);
  }
  u64 host = ~0ull;
  if (err == cudaSuccess) err = cudaMemcpyAsync(&host, bad, sizeof(u64), cudaMemcpyDeviceToHost, s);
  if (err == cudaSuccess) err = cudaStreamSynchronize(s);
  *bad_row = host == ~0ull ? -1 : static_cast<int64_t>(host);
  cudaError_t free_err = cudaFreeAsync(bad, s);
  return err != cudaSuccess ? err : free_err;
}

}  // namespace nemotron::ops
