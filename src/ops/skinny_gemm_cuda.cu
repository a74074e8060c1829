// The skinny GEMM (skinny_gemm_cuda.h). One block owns 16 rows of W and up to 8 warps split K
// among them in chunks of 128 columns; a warp's chunk is one mma.sync m16n8k16 pair per 32
// columns. The fragments come straight from global memory in 16-byte loads, which works because
// a sum over k may visit k in any order as long as W and x agree on it: thread (g = lane / 4,
// t = lane % 4) loads W rows g and g + 8 and x row g at columns [8t, 8t + 8) of each 32, and
// those 8 values serve as its logical columns {2t, 2t+1, 2t+8, 2t+9} of two k16 steps. Loads for
// the next chunk are issued before the current chunk's multiplies; W bypasses L1 (read once).
// The warps' partial sums meet in shared memory and are added in warp order (deterministic).
// Few rows (k/v_proj, and every projection at tensor parallel halves) would leave most
// multiprocessors idle: there a cluster of S blocks (Hopper thread block clusters) shares one
// 16-row tile, each block taking every S-th group of chunks, and block 0 of the cluster adds the
// others' sums from their shared memory (distributed shared memory) in block order: one launch,
// no workspace, no atomics, the same order every call.
#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <atomic>

#include "ops/skinny_gemm_cuda.h"

namespace nemotron::ops {

namespace {

constexpr int kRows = 16;           // W rows per block (the mma's M)
constexpr int kMaxWarps = 8;        // warps splitting K within a block
constexpr int kVecs = 4;            // 16-byte vectors per W row per thread per chunk
constexpr int kChunk = 32 * kVecs;  // columns a warp covers per chunk
constexpr int kMaxSplits = 8;       // blocks per tile (the portable cluster size)

struct Vec {  // 8 bfloat16 as 4 registers
  uint32_t r[4];
};

__device__ __forceinline__ Vec load_stream(const __nv_bfloat16* p, bool ok) {
  Vec v{{0u, 0u, 0u, 0u}};
  if (ok)
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.r[0]), "=r"(v.r[1]), "=r"(v.r[2]), "=r"(v.r[3])
        : "l"(p));
  return v;
}

__device__ __forceinline__ Vec load_cached(const __nv_bfloat16* p, bool ok) {
  Vec v{{0u, 0u, 0u, 0u}};
  if (ok) {
    const uint4 u = __ldg(reinterpret_cast<const uint4*>(p));
    v.r[0] = u.x, v.r[1] = u.y, v.r[2] = u.z, v.r[3] = u.w;
  }
  return v;
}

// d += A[16 x 16] B[16 x 8], A row-major and B column-major bf16 fragments, d float32.
__device__ __forceinline__ void mma16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float load_out(const float* p) { return *p; }
__device__ __forceinline__ float load_out(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void store_out(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_out(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }

// NT: 8-row tiles of x (1 for M <= 8, 2 for M <= 16).
template <int NT, class OutT>
__global__ void __launch_bounds__(kMaxWarps * 32, 2) skinny_gemm_kernel(SkinnyGemmCudaArgs a, int64_t nchunks, int splits) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  // splits > 1: blocks tile * splits + split form one cluster; split s takes chunks
  // s * warps + warp, + splits * warps, ... (splits 1: the warp's chunks warp, + warps, ...).
  const int split = static_cast<int>(blockIdx.x % static_cast<unsigned>(splits));
  const int64_t n0 = static_cast<int64_t>(blockIdx.x / static_cast<unsigned>(splits)) * kRows;
  // Rows past N or M repeat the last row: their results are never stored, and an mma's columns
  // (and rows) do not mix, so the clamped copies change nothing else.
  auto lesser = [](int64_t u, int64_t v) { return u < v ? u : v; };
  const int64_t wr0 = lesser(n0 + g, a.N - 1), wr1 = lesser(n0 + g + 8, a.N - 1);
  const auto* W = static_cast<const __nv_bfloat16*>(a.w);
  const auto* X = static_cast<const __nv_bfloat16*>(a.x);
  const __nv_bfloat16* w0 = W + wr0 * a.ldw + 8 * t;
  const __nv_bfloat16* w1 = W + wr1 * a.ldw + 8 * t;
  const __nv_bfloat16* x0 = X + lesser(g, a.M - 1) * a.lda + 8 * t;
  const __nv_bfloat16* x1 = X + lesser(g + 8, a.M - 1) * a.lda + 8 * t;
  const int64_t K = a.K;

  float acc[NT][4];
#pragma unroll
  for (int j = 0; j < NT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;

  Vec wa[kVecs], wb[kVecs];
  auto load_w = [&](int64_t c, Vec (&va)[kVecs], Vec (&vb)[kVecs]) {
#pragma unroll
    for (int u = 0; u < kVecs; ++u) {
      const int64_t k = c * kChunk + 32 * u;
      const bool ok = k + 8 * t + 8 <= K;  // K is a multiple of 8
      va[u] = load_stream(w0 + k, ok);
      vb[u] = load_stream(w1 + k, ok);
    }
  };
  const int64_t first = static_cast<int64_t>(split) * warps + warp, stride = static_cast<int64_t>(splits) * warps;
  load_w(first, wa, wb);
  for (int64_t c = first; c < nchunks; c += stride) {
    Vec na[kVecs], nb[kVecs];
    load_w(c + stride, na, nb);  // past the end: predicated off
    Vec xa[kVecs], xb[kVecs];
#pragma unroll
    for (int u = 0; u < kVecs; ++u) {
      const int64_t k = c * kChunk + 32 * u;
      const bool ok = k + 8 * t + 8 <= K;
      xa[u] = load_cached(x0 + k, ok);
      if constexpr (NT == 2) xb[u] = load_cached(x1 + k, ok);
    }
#pragma unroll
    for (int u = 0; u < kVecs; ++u) {
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        mma16816(acc[0], wa[u].r[2 * s], wb[u].r[2 * s], wa[u].r[2 * s + 1], wb[u].r[2 * s + 1], xa[u].r[2 * s],
                 xa[u].r[2 * s + 1]);
        if constexpr (NT == 2)
          mma16816(acc[1], wa[u].r[2 * s], wb[u].r[2 * s], wa[u].r[2 * s + 1], wb[u].r[2 * s + 1], xb[u].r[2 * s],
                   xb[u].r[2 * s + 1]);
      }
    }
#pragma unroll
    for (int u = 0; u < kVecs; ++u) wa[u] = na[u], wb[u] = nb[u];
  }

  // acc[j][i]: W row n0 + g (+ 8 for i >= 2), x row 8 j + 2 t + (i & 1).
  __shared__ float red[kMaxWarps][NT * 4][32];
  __shared__ float block_sum[NT * 4][32];  // this block's sums, read by block 0 of the cluster
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) red[warp][j * 4 + i][lane] = acc[j][i];
  __syncthreads();
  float sum[NT * 4];
#pragma unroll
  for (int q = 0; q < NT * 4; ++q) {
    sum[q] = red[0][q][lane];
    for (int w = 1; w < warps; ++w) sum[q] += red[w][q][lane];
  }
  if (splits > 1) {
    // Every thread of every block reaches both barriers (none returns before them).
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    if (warp == 0)
#pragma unroll
      for (int q = 0; q < NT * 4; ++q) block_sum[q][lane] = sum[q];
    cluster.sync();  // every block's sums written
    if (split == 0 && warp == 0)
      for (int r = 1; r < splits; ++r) {
        const float* other = cluster.map_shared_rank(&block_sum[0][0], r);
#pragma unroll
        for (int q = 0; q < NT * 4; ++q) sum[q] += other[q * 32 + lane];
      }
    cluster.sync();  // block 0 done reading: the others' shared memory may go
    if (split != 0) return;
  }
  if (warp != 0) return;
  auto* Y = static_cast<OutT*>(a.y);
  const auto* bias = static_cast<const OutT*>(a.bias);
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t m = 8 * j + 2 * t + (i & 1), n = n0 + g + (i >= 2 ? 8 : 0);
      if (m >= a.M || n >= a.N) continue;
      OutT* out = Y + m * a.N + n;
      float v = a.alpha * sum[j * 4 + i];
      if (a.beta != 0.0f) v += a.beta * load_out(out);
      if (bias) v += load_out(bias + n);
      store_out(out, v);
    }
}

// Warps per block: from K alone, so a row's summation order does not depend on M.
int64_t chunks_of(int64_t K) { return (K + kChunk - 1) / kChunk; }
int warps_for(int64_t nchunks) { return static_cast<int>(std::clamp<int64_t>(nchunks, 1, kMaxWarps)); }

// Multiprocessors of the current device (read once per device).
int sm_count() {
  static std::atomic<int> counts[64] = {};
  int dev = 0, n = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 0;
  std::atomic<int>& c = counts[dev & 63];
  n = c.load(std::memory_order_relaxed);
  if (n == 0 && cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess)
    c.store(n, std::memory_order_relaxed);
  return n;
}

template <int NT, class OutT>
cudaError_t launch_as(const SkinnyGemmCudaArgs& a, int64_t nchunks, int warps, int splits, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((a.N + kRows - 1) / kRows * splits)), block(32 * warps);
  if (splits == 1) {
    skinny_gemm_kernel<NT, OutT><<<grid, block, 0, stream>>>(a, nchunks, 1);
    return cudaGetLastError();
  }
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = static_cast<unsigned>(splits), cluster.val.clusterDim.y = cluster.val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = 0, cfg.stream = stream;
  cfg.attrs = &cluster, cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, skinny_gemm_kernel<NT, OutT>, a, nchunks, splits);
}

template <int NT>
cudaError_t launch(const SkinnyGemmCudaArgs& a, cudaStream_t stream) {
  const int64_t nchunks = chunks_of(a.K);
  const int splits = skinny_gemm_k_splits(a, sm_count());
  if (a.y_f32) return launch_as<NT, float>(a, nchunks, warps_for(nchunks), splits, stream);
  return launch_as<NT, __nv_bfloat16>(a, nchunks, warps_for(nchunks), splits, stream);
}

}  // namespace

bool skinny_gemm_supported(const SkinnyGemmCudaArgs& a) {
  auto aligned16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return a.M >= 1 && a.M <= kSkinnyGemmMaxRows && a.N >= 1 && a.K >= 1 && a.K % 8 == 0 && a.lda % 8 == 0 &&
         a.ldw % 8 == 0 && a.lda >= a.K && a.ldw >= a.K && aligned16(a.x) && aligned16(a.w) &&
         (a.N + kRows - 1) / kRows * kMaxSplits < (int64_t{1} << 31) && a.k_splits >= 0;
}

int skinny_gemm_k_splits(const SkinnyGemmCudaArgs& a, int sms) {
  if (a.k_splits > 0) return std::min(a.k_splits, kMaxSplits);
  // One block per multiprocessor at most: on an H200 (132 SMs) 512 x 4096 split 4 (128 blocks)
  // ran 6.3 us against 7.1 unsplit, but 1024 x 4096 split 4 (256 blocks, two per SM) 10.4 us
  // against 7.6 unsplit (bench/results/skinny_gemm.jsonl).
  const int64_t tiles = (a.N + kRows - 1) / kRows, slots = sms;
  if (2 * tiles > slots) return 1;  // half the multiprocessors or more are busy already
  const int64_t nchunks = chunks_of(a.K);
  // Every warp keeps at least one chunk; the tiles times splits fit the multiprocessors.
  const int64_t s = std::min<int64_t>({kMaxSplits, nchunks / warps_for(nchunks), slots / std::max<int64_t>(tiles, 1)});
  return static_cast<int>(std::max<int64_t>(s, 1));
}

cudaError_t skinny_gemm_cuda(const SkinnyGemmCudaArgs& a, cudaStream_t stream) {
  if (!skinny_gemm_supported(a)) return cudaErrorInvalidValue;
  return a.M <= 8 ? launch<1>(a, stream) : launch<2>(a, stream);
}

}  // namespace nemotron::ops
