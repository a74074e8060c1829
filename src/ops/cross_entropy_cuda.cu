// Fused softmax cross-entropy. Forward only, or rows too long for the cluster form below: one block per row (512 threads, two rows per SM, so one block's
// reduction and launch overlap the other's streaming). Pass 1 reads the row once with a
// per-thread online max/sum (float32, 16-byte loads when the row allows), merged across the
// block; pass 2 re-reads the row backwards (mostly from L2: the packs read last come first) and
// writes the gradient, in place when dlogits aliases logits. No float32 copy of the logits is made.
#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include <cmath>

#include "ops/cross_entropy_cuda.h"

namespace nemotron::ops {

namespace {

using u64 = unsigned long long;
constexpr int kUnroll = 4;
constexpr float kLog2e = 1.4426950408889634f;

__device__ inline float to_f(float v) { return v; }
__device__ inline float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T> __device__ inline T from_f(float v);
template <> __device__ inline float from_f<float>(float v) { return v; }
template <> __device__ inline __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16(v); }

// VEC consecutive elements as one aligned load/store (VEC * sizeof(T) is 16 bytes or 1 element).
template <class T, int VEC>
struct alignas(VEC * sizeof(T)) Pack {
  T v[VEC];
};

// Merges the online softmax state (m, s) = (max, sum of exp(x - max)) of two parts.
__device__ inline void merge(float& m, float& s, float m2, float s2) {
  const float M = fmaxf(m, m2);
  if (M == -INFINITY) return;
  s = (m == -INFINITY ? 0.0f : s * exp2f((m - M) * kLog2e)) + (m2 == -INFINITY ? 0.0f : s2 * exp2f((m2 - M) * kLog2e));
  m = M;
}

template <int kThreads>
__device__ void block_merge(float& m, float& s) {
  __shared__ float sm[kThreads / 32], ss[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) sm[warp] = m, ss[warp] = s;
  __syncthreads();
  if (warp == 0) {
    m = lane < kThreads / 32 ? sm[lane] : -INFINITY;
    s = lane < kThreads / 32 ? ss[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1)
      merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
    if (lane == 0) sm[0] = m, ss[0] = s;
  }
  __syncthreads();
  m = sm[0], s = ss[0];
}

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

// The cluster form for the backward (dlogits set): a cluster of C blocks shares one row, each
// block keeping its part (at most kPartBytes) in shared memory, so the row is read from HBM once
// and written once. The C partial (max, sum) states are exchanged through distributed shared
// memory and merged in rank order (the same lse in every block, reproducibly).
constexpr int kClusterThreads = 512;
constexpr int64_t kPartBytes = 64 << 10;
constexpr int kMaxCluster = 8;  // the portable cluster size limit

template <class T, int VEC>
__global__ void __launch_bounds__(kClusterThreads, 2)
    ce_cluster_kernel(const T* logits, T* dlogits, const void* targets, bool targets64, const void* mask,
                      bool mask_f32, float* losses, int64_t V, int64_t part, float grad_scale, u64* bad) {
  namespace cg = cooperative_groups;
  constexpr int kThreads = kClusterThreads;
  using P = Pack<T, VEC>;
  extern __shared__ uint4 smem_raw[];
  P* cache = reinterpret_cast<P*>(smem_raw);
  __shared__ float2 state;  // this block's (max, sum), read by the whole cluster
  cg::cluster_group cluster = cg::this_cluster();
  const int C = static_cast<int>(cluster.num_blocks()), rank = static_cast<int>(cluster.block_rank());
  const int64_t n = blockIdx.x / C;
  const int64_t begin = rank * part, end = begin + part < V ? begin + part : V;
  const int64_t packs = end > begin ? (end - begin) / VEC : 0;
  const T* row = logits + n * V + begin;
  const int64_t y = targets64 ? static_cast<const int64_t*>(targets)[n] : static_cast<const int32_t*>(targets)[n];
  float mk = 1.0f;
  if (mask) mk = mask_f32 ? static_cast<const float*>(mask)[n] : to_f(static_cast<const T*>(mask)[n]);
  if (y >= V) {
    if (threadIdx.x == 0 && rank == 0) atomicMin(bad, static_cast<u64>(n)), losses[n] = NAN;
    mk = 0.0f;
  }
  const bool live = y >= 0 && y < V && mk != 0.0f;  // uniform over the cluster
  float lse = 0.0f;
  if (live) {
    float m = -INFINITY, s = 0.0f;
    const P* prow = reinterpret_cast<const P*>(row);
    for (int64_t p0 = threadIdx.x; p0 < packs; p0 += kUnroll * kThreads) {
      P x[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (p0 + u * kThreads < packs) x[u] = prow[p0 + u * kThreads];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (p0 + u * kThreads >= packs) break;
        cache[p0 + u * kThreads] = x[u];
        float f[VEC], mx = -INFINITY;
#pragma unroll
        for (int k = 0; k < VEC; ++k) f[k] = to_f(x[u].v[k]), mx = fmaxf(mx, f[k]);
        float part_sum = 0.0f;
#pragma unroll
        for (int k = 0; k < VEC; ++k) part_sum += exp2f((f[k] - mx) * kLog2e);
        merge(m, s, mx, part_sum);
      }
    }
    block_merge<kThreads>(m, s);  // ends with __syncthreads: the cache is complete
    if (threadIdx.x == 0) state = make_float2(m, s);
  }
  cluster.sync();  // every block's state is written
  if (live) {
    float m = -INFINITY, s = 0.0f;
    for (int r = 0; r < C; ++r) {
      const float2 other = *cluster.map_shared_rank(&state, r);
      merge(m, s, other.x, other.y);
    }
    lse = m + logf(s);
    if (threadIdx.x == 0 && y >= begin && y < end)
      losses[n] = mk * (lse - to_f(reinterpret_cast<const T*>(cache)[y - begin]));
  } else if (threadIdx.x == 0 && rank == 0 && y < V) {
    losses[n] = 0.0f;
  }
  cluster.sync();  // no block leaves while another still reads its state
  const float g = live ? grad_scale * mk : 0.0f;
  P* drow = reinterpret_cast<P*>(dlogits + n * V + begin);
  for (int64_t p = threadIdx.x; p < packs; p += kThreads) {
    P out;
    const P x = g != 0.0f ? cache[p] : P{};
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      float d = 0.0f;
      if (g != 0.0f) {
        d = g * exp2f((to_f(x.v[k]) - lse) * kLog2e);
        if (begin + p * VEC + k == y) d -= g;
      }
      out.v[k] = from_f<T>(d);
    }
    drow[p] = out;
  }
}

// Launches the cluster form when a row fits kMaxCluster parts; false: use the plain kernel.
template <class T, int VEC>
bool launch_cluster(const CrossEntropyCudaArgs& a, cudaStream_t s, u64* bad, cudaError_t* err) {
  const int64_t row_bytes = a.V * static_cast<int64_t>(sizeof(T));
  int C = 1;
  while (C < kMaxCluster && row_bytes > C * kPartBytes) C *= 2;
  if (row_bytes > C * kPartBytes) return false;
  int64_t part = (a.V + C - 1) / C;
  part = (part + VEC - 1) / VEC * VEC;
  const size_t smem = static_cast<size_t>(part) * sizeof(T);
  auto kernel = ce_cluster_kernel<T, VEC>;
  *err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (*err != cudaSuccess) return true;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(a.N * C));
  cfg.blockDim = dim3(kClusterThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(C), attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr, cfg.numAttrs = 1;
  *err = cudaLaunchKernelEx(&cfg, kernel, static_cast<const T*>(a.logits), static_cast<T*>(a.dlogits), a.targets,
                            a.targets64, a.mask, a.mask_f32, a.losses, a.V, part, a.grad_scale, bad);
  return true;
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
  if (a.dlogits && a.threads == 0) {
    constexpr int kVec = 16 / sizeof(T);
    const bool vec = a.V % kVec == 0 && reinterpret_cast<uintptr_t>(a.logits) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(a.dlogits) % 16 == 0;
    cudaError_t err = cudaSuccess;
    if (vec ? launch_cluster<T, kVec>(a, s, bad, &err) : launch_cluster<T, 1>(a, s, bad, &err))
      return err != cudaSuccess ? err : cudaGetLastError();
  }
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
