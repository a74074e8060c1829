// MoE permutation kernels. The handle: one block per expert counts its slots, then one block per
// expert walks the routing in order and compacts its entries (a block scan per tile), so tokens
// stay ascending within an expert and the result is deterministic. The four row kernels are
// gathers with one warp per row (a token or a slot), 16-byte vectors when the row allows, and
// float32 sums in a fixed order: nothing is scattered by atomics.
#include <cuda_bf16.h>

#include <cstdint>

#include "ops/moe_dispatch_cuda.h"
#include "ops/cuda_vec_io.cuh"

namespace nemotron::ops {

namespace {

constexpr int kBuildThreads = 1024;
constexpr int kPerThread = 4;  // consecutive routing entries per thread and tile
constexpr int kWarps = 8;      // rows per block in the row kernels

using vec_io::from_f;
using vec_io::to_f;

// Block-wide exclusive scan of one int per thread (kBuildThreads threads); total = the block sum.
__device__ int block_scan(int v, int& total) {
  __shared__ int warp_inc[kBuildThreads / 32];
  __shared__ int block_total;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int inc = v;
  for (int o = 1; o < 32; o <<= 1) {
    int t = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += t;
  }
  if (lane == 31) warp_inc[warp] = inc;
  __syncthreads();
  if (warp == 0) {
    int w = warp_inc[lane], winc = w;  // kBuildThreads / 32 == 32 warps
    for (int o = 1; o < 32; o <<= 1) {
      int t = __shfl_up_sync(0xffffffffu, winc, o);
      if (lane >= o) winc += t;
    }
    warp_inc[lane] = winc - w;
    if (lane == 31) block_total = winc;
  }
  __syncthreads();
  int out = warp_inc[warp] + inc - v;
  total = block_total;
  __syncthreads();  // the shared arrays are reused by the next tile
  return out;
}

__device__ int block_sum(int v) {
  int total;
  block_scan(v, total);
  return total;
}

__global__ void count_kernel(MoeMakeDispatchCudaArgs a) {
  const int e = blockIdx.x;
  const int64_t S = a.N * a.K;
  int c = 0;
  for (int64_t i = threadIdx.x; i < S; i += kBuildThreads) c += a.topk_idx[i] == e;
  c = block_sum(c);
  if (threadIdx.x == 0) a.counts[e] = c;
}

__global__ void place_kernel(MoeMakeDispatchCudaArgs a) {
  const int e = blockIdx.x;
  const int64_t S = a.N * a.K;
  int before = 0;
  for (int64_t f = threadIdx.x; f < e; f += kBuildThreads) before += a.counts[f];
  int64_t next = block_sum(before);  // expert e's first slot
  constexpr int64_t kTile = static_cast<int64_t>(kBuildThreads) * kPerThread;
  for (int64_t base = 0; base < S; base += kTile) {
    const int64_t i0 = base + static_cast<int64_t>(threadIdx.x) * kPerThread;
    bool hit[kPerThread];
    int mine = 0;
#pragma unroll
    for (int r = 0; r < kPerThread; ++r) {
      hit[r] = i0 + r < S && a.topk_idx[i0 + r] == e;
      mine += hit[r];
    }
    int total;
    int rank = block_scan(mine, total);
#pragma unroll
    for (int r = 0; r < kPerThread; ++r)
      if (hit[r]) {
        const int64_t slot = next + rank++;
        a.slot_token[slot] = static_cast<int32_t>((i0 + r) / a.K);
        a.slot_of[i0 + r] = static_cast<int32_t>(slot);
      }
    next += total;
  }
}

// V elements of T per access (vec_io packs): 16 bytes when the rows allow it, else 1.
using vec_io::Pack;

__device__ inline int64_t warp_row() { return blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / 32; }

template <class T, int V>
__global__ void dispatch_forward_kernel(MoePermuteCudaArgs a) {
  const int64_t s = warp_row(), lane = threadIdx.x % 32;
  if (s >= a.N * a.K) return;
  const Pack<T, V>* src = reinterpret_cast<const Pack<T, V>*>(static_cast<const T*>(a.src) + a.slot_token[s] * a.d);
  Pack<T, V>* dst = reinterpret_cast<Pack<T, V>*>(static_cast<T*>(a.dst) + s * a.d);
  for (int64_t c = lane; c < a.d / V; c += 32) dst[c] = src[c];
}

// dx[n] = sum_j dxs[slot_of[n, j]]  (weighted by w[n, j] when w is given: the combine).
template <class T, int V>
__global__ void gather_sum_kernel(MoePermuteCudaArgs a) {
  const int64_t n = warp_row(), lane = threadIdx.x % 32;
  if (n >= a.N) return;
  const T* src = static_cast<const T*>(a.src);
  T* dst = static_cast<T*>(a.dst) + n * a.d;
  const int32_t* so = a.slot_of + n * a.K;
  for (int64_t c = lane * V; c < a.d; c += 32 * V) {
    float acc[V] = {};
    for (int64_t j = 0; j < a.K; ++j) {
      float v[V];
      vec_io::load<V>(src + so[j] * a.d + c, v);
      const float wj = a.w ? a.w[n * a.K + j] : 1.0f;
#pragma unroll
      for (int i = 0; i < V; ++i) acc[i] += wj * v[i];
    }
    vec_io::store<V>(dst + c, acc);
  }
}

// dys[slot_of[n, j]] = w[n, j] dy[n];  dw[n, j] = <dy[n], ys[slot_of[n, j]]>.
template <class T, int V>
__global__ void combine_backward_kernel(MoePermuteCudaArgs a) {
  const int64_t n = warp_row(), lane = threadIdx.x % 32;
  if (n >= a.N) return;
  const T* ys = static_cast<const T*>(a.src);
  const T* dy = static_cast<const T*>(a.dy) + n * a.d;
  T* dys = static_cast<T*>(a.dst);
  for (int64_t j = 0; j < a.K; ++j) {
    const int64_t s = a.slot_of[n * a.K + j];
    const float wj = a.w[n * a.K + j];
    float dot = 0;
    for (int64_t c = lane * V; c < a.d; c += 32 * V) {
      float g[V], y[V], out[V];
      vec_io::load<V>(dy + c, g);
      vec_io::load<V>(ys + s * a.d + c, y);
#pragma unroll
      for (int i = 0; i < V; ++i) dot += g[i] * y[i], out[i] = wj * g[i];
      vec_io::store<V>(dys + s * a.d + c, out);
    }
    for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    if (lane == 0) a.dw[n * a.K + j] = dot;
  }
}

bool aligned16(const void* p) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Runs kernel<T, V> with the widest V the row width and pointers allow.
template <template <class, int> class K>
cudaError_t launch_rows(const MoePermuteCudaArgs& a, int64_t rows, cudaStream_t st) {
  if (rows == 0 || a.d == 0) return cudaSuccess;
  const unsigned grid = static_cast<unsigned>((rows + kWarps - 1) / kWarps);
  const size_t esize = a.bf16 ? 2 : 4;
  const bool vec = (a.d * esize) % 16 == 0 && aligned16(a.src) && aligned16(a.dst) && aligned16(a.dy);
  if (a.bf16) {
    if (vec) K<__nv_bfloat16, 8>::launch(a, grid, st);
    else K<__nv_bfloat16, 1>::launch(a, grid, st);
  } else {
    if (vec) K<float, 4>::launch(a, grid, st);
    else K<float, 1>::launch(a, grid, st);
  }
  return cudaGetLastError();
}

template <class T, int V> struct DispatchForward {
  static void launch(const MoePermuteCudaArgs& a, unsigned g, cudaStream_t st) {
    dispatch_forward_kernel<T, V><<<g, kWarps * 32, 0, st>>>(a);
  }
};
template <class T, int V> struct GatherSum {
  static void launch(const MoePermuteCudaArgs& a, unsigned g, cudaStream_t st) {
    gather_sum_kernel<T, V><<<g, kWarps * 32, 0, st>>>(a);
  }
};
template <class T, int V> struct CombineBackward {
  static void launch(const MoePermuteCudaArgs& a, unsigned g, cudaStream_t st) {
    combine_backward_kernel<T, V><<<g, kWarps * 32, 0, st>>>(a);
  }
};

}  // namespace

cudaError_t moe_count_experts_cuda(const MoeMakeDispatchCudaArgs& a, cudaStream_t st) {
  if (a.E == 0) return cudaSuccess;
  count_kernel<<<static_cast<unsigned>(a.E), kBuildThreads, 0, st>>>(a);
  return cudaGetLastError();
}

cudaError_t moe_place_slots_cuda(const MoeMakeDispatchCudaArgs& a, cudaStream_t st) {
  if (a.E == 0 || a.N * a.K == 0) return cudaSuccess;
  place_kernel<<<static_cast<unsigned>(a.E), kBuildThreads, 0, st>>>(a);
  return cudaGetLastError();
}

cudaError_t moe_dispatch_forward_cuda(const MoePermuteCudaArgs& a, cudaStream_t st) {
  return launch_rows<DispatchForward>(a, a.N * a.K, st);
}

cudaError_t moe_dispatch_backward_cuda(const MoePermuteCudaArgs& a, cudaStream_t st) {
  MoePermuteCudaArgs b = a;
  b.w = nullptr;
  return launch_rows<GatherSum>(b, a.N, st);
}

cudaError_t moe_combine_forward_cuda(const MoePermuteCudaArgs& a, cudaStream_t st) {
  return launch_rows<GatherSum>(a, a.N, st);
}

cudaError_t moe_combine_backward_cuda(const MoePermuteCudaArgs& a, cudaStream_t st) {
  return launch_rows<CombineBackward>(a, a.N, st);
}

}  // namespace nemotron::ops
