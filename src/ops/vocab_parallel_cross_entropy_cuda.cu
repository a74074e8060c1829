// Vocab-parallel cross-entropy kernels. stats: one block per row (512 threads) streams the shard's
// row once with a per-thread online max/sum (16-byte loads when the row allows), merged across the
// block as the fused cross_entropy_cuda.cu does. combine: one thread per row over the T gathered
// statistics. grad: a flat grid of 256-thread blocks, each thread one 16-byte pack (or element) of
// one row, so a few long rows (N = 64, Vl = 65536) still fill the GPU; in place when dlogits
// aliases logits (each thread reads its pack before writing it).
#include <cuda_bf16.h>

#include <cmath>

#include "ops/cuda_online_softmax.cuh"
#include "ops/cuda_vec_io.cuh"
#include "ops/vocab_parallel_cross_entropy_cuda.h"

namespace nemotron::ops {

namespace {

using u64 = unsigned long long;
constexpr int kStatsThreads = 512, kGradThreads = 256, kCombineThreads = 256, kUnroll = 4;

using online_softmax::block_merge;
using online_softmax::kLog2e;
using online_softmax::merge;
using vec_io::from_f;
using vec_io::Pack;
using vec_io::to_f;

__device__ inline int64_t target_at(const void* targets, bool targets64, int64_t n) {
  return targets64 ? static_cast<const int64_t*>(targets)[n] : static_cast<const int32_t*>(targets)[n];
}

template <class T>
__device__ inline float mask_at(const void* mask, bool mask_f32, int64_t n) {
  if (!mask) return 1.0f;
  return mask_f32 ? static_cast<const float*>(mask)[n] : to_f(static_cast<const T*>(mask)[n]);
}

template <class T, int VEC>
__global__ void __launch_bounds__(kStatsThreads, 2)
    stats_kernel(const T* logits, const void* targets, bool targets64, float* stats, int64_t Vl, int64_t begin,
                 int64_t vocab_size, u64* bad) {
  using P = Pack<T, VEC>;
  const int64_t n = blockIdx.x;
  const T* row = logits + n * Vl;
  const int64_t packs = Vl / VEC;
  const P* prow = reinterpret_cast<const P*>(row);
  float m = -INFINITY, s = 0.0f;
  // kUnroll loads in flight per thread before any math (as in cross_entropy_cuda.cu).
  for (int64_t p0 = threadIdx.x; p0 < packs; p0 += kUnroll * kStatsThreads) {
    P x[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (p0 + u * kStatsThreads < packs) x[u] = prow[p0 + u * kStatsThreads];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (p0 + u * kStatsThreads >= packs) break;
      float f[VEC], mx = -INFINITY;
#pragma unroll
      for (int k = 0; k < VEC; ++k) f[k] = to_f(x[u].v[k]), mx = fmaxf(mx, f[k]);
      float part = 0.0f;
#pragma unroll
      for (int k = 0; k < VEC; ++k) part += exp2f((f[k] - mx) * kLog2e);
      merge(m, s, mx, part);
    }
  }
  block_merge<kStatsThreads>(m, s);
  if (threadIdx.x == 0) {
    const int64_t y = target_at(targets, targets64, n), local = y - begin;
    if (vocab_size > 0 && y >= vocab_size) atomicMin(bad, static_cast<u64>(n));
    stats[3 * n] = m, stats[3 * n + 1] = s, stats[3 * n + 2] = local >= 0 && local < Vl ? to_f(row[local]) : 0.0f;
  }
}

template <class MaskT>
__global__ void combine_kernel(const float* gathered, const void* targets, bool targets64, const void* mask,
                               bool mask_f32, float* lse, float* losses, int64_t N, int64_t shards) {
  const int64_t n = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (n >= N) return;
  float M = -INFINITY, S = 0.0f, t = 0.0f;
  for (int64_t r = 0; r < shards; ++r) M = fmaxf(M, gathered[(r * N + n) * 3]);
  for (int64_t r = 0; r < shards; ++r) {
    const float* st = gathered + (r * N + n) * 3;
    if (st[0] != -INFINITY) S += st[1] * exp2f((st[0] - M) * kLog2e);  // an all -inf shard adds 0
    t += st[2];
  }
  const float l = M + logf(S);
  lse[n] = l;
  losses[n] = target_at(targets, targets64, n) < 0 ? 0.0f : mask_at<MaskT>(mask, mask_f32, n) * (l - t);
}

template <class T, int VEC>
__global__ void __launch_bounds__(kGradThreads)
    grad_kernel(const T* logits, T* dlogits, const void* targets, bool targets64, const void* mask, bool mask_f32,
                const float* lse, int64_t Vl, int64_t chunks, int64_t begin, float grad_scale) {
  using P = Pack<T, VEC>;
  const int64_t n = blockIdx.x / chunks;
  const int64_t p = (blockIdx.x % chunks) * kGradThreads + threadIdx.x;
  if (p >= Vl / VEC) return;
  const int64_t y = target_at(targets, targets64, n);
  const float g = y < 0 ? 0.0f : grad_scale * mask_at<T>(mask, mask_f32, n);
  const int64_t at = n * Vl + p * VEC;
  P out;
  if (g == 0.0f) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) out.v[k] = from_f<T>(0.0f);
  } else {
    const P x = *reinterpret_cast<const P*>(logits + at);
    const float l = lse[n];
    const int64_t local = y - begin - p * VEC;  // the target's place in this pack, if it is here
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      float d = g * exp2f((to_f(x.v[k]) - l) * kLog2e);
      if (k == local) d -= g;
      out.v[k] = from_f<T>(d);
    }
  }
  *reinterpret_cast<P*>(dlogits + at) = out;
}

template <class T>
bool vectorizable(const VocabShardCudaArgs& a) {
  constexpr int kVec = 16 / sizeof(T);
  return a.Vl % kVec == 0 && vec_io::aligned_for<T>(kVec, a.logits, a.dlogits);
}

template <class T>
void launch_stats(const VocabShardCudaArgs& a, cudaStream_t s, u64* bad) {
  constexpr int kVec = 16 / sizeof(T);
  const T* x = static_cast<const T*>(a.logits);
  const unsigned grid = static_cast<unsigned>(a.N);
  if (vectorizable<T>(a))
    stats_kernel<T, kVec><<<grid, kStatsThreads, 0, s>>>(x, a.targets, a.targets64, a.stats, a.Vl, a.vocab_begin,
                                                         a.vocab_size, bad);
  else
    stats_kernel<T, 1><<<grid, kStatsThreads, 0, s>>>(x, a.targets, a.targets64, a.stats, a.Vl, a.vocab_begin,
                                                      a.vocab_size, bad);
}

template <class T, int VEC>
void launch_grad_vec(const VocabShardCudaArgs& a, cudaStream_t s) {
  const int64_t chunks = (a.Vl / VEC + kGradThreads - 1) / kGradThreads;
  grad_kernel<T, VEC><<<static_cast<unsigned>(a.N * chunks), kGradThreads, 0, s>>>(
      static_cast<const T*>(a.logits), static_cast<T*>(a.dlogits), a.targets, a.targets64, a.mask, a.mask_f32, a.lse,
      a.Vl, chunks, a.vocab_begin, a.grad_scale);
}

template <class T>
void launch_grad(const VocabShardCudaArgs& a, cudaStream_t s) {
  if (vectorizable<T>(a)) launch_grad_vec<T, 16 / sizeof(T)>(a, s);
  else launch_grad_vec<T, 1>(a, s);
}

}  // namespace

cudaError_t vocab_shard_stats_cuda(const VocabShardCudaArgs& a, cudaStream_t s, int64_t* bad_row) {
  *bad_row = -1;
  if (a.N == 0) return cudaSuccess;
  if (a.N >= (int64_t{1} << 31)) return cudaErrorInvalidValue;
  u64* bad = nullptr;
  cudaError_t err = cudaSuccess;
  if (a.vocab_size > 0) {
    err = cudaMallocAsync(reinterpret_cast<void**>(&bad), sizeof(u64), s);
    if (err != cudaSuccess) return err;
    err = cudaMemsetAsync(bad, 0xff, sizeof(u64), s);
  }
  if (err == cudaSuccess) {
    if (a.bf16) launch_stats<__nv_bfloat16>(a, s, bad);
    else launch_stats<float>(a, s, bad);
    err = cudaGetLastError();
  }
  if (!bad) return err;
  u64 host = ~0ull;
  if (err == cudaSuccess) err = cudaMemcpyAsync(&host, bad, sizeof(u64), cudaMemcpyDeviceToHost, s);
  if (err == cudaSuccess) err = cudaStreamSynchronize(s);
  *bad_row = host == ~0ull ? -1 : static_cast<int64_t>(host);
  cudaError_t free_err = cudaFreeAsync(bad, s);
  return err != cudaSuccess ? err : free_err;
}

cudaError_t vocab_shard_combine_cuda(const VocabShardCudaArgs& a, cudaStream_t s) {
  if (a.N == 0) return cudaSuccess;
  const unsigned grid = static_cast<unsigned>((a.N + kCombineThreads - 1) / kCombineThreads);
  // A float32 mask is read as such whatever the template type; otherwise the mask is bf16.
  combine_kernel<__nv_bfloat16><<<grid, kCombineThreads, 0, s>>>(a.gathered, a.targets, a.targets64, a.mask,
                                                                 a.mask_f32, a.lse, a.losses, a.N, a.shards);
  return cudaGetLastError();
}

cudaError_t vocab_shard_grad_cuda(const VocabShardCudaArgs& a, cudaStream_t s) {
  if (a.N == 0 || a.Vl == 0) return cudaSuccess;
  const int64_t blocks = a.N * ((a.Vl + kGradThreads - 1) / kGradThreads);
  if (blocks >= (int64_t{1} << 31)) return cudaErrorInvalidValue;
  if (a.bf16) launch_grad<__nv_bfloat16>(a, s);
  else launch_grad<float>(a, s);
  return cudaGetLastError();
}

}  // namespace nemotron::ops
