// Grouped bf16 GEMM on Hopper tensor cores (wgmma, sm_90a): one launch over all experts. Every
// CTA is one warpgroup computing one 128 x 128 tile of one problem (found by a binary search over
// the problems' tile prefix, built on the host) as two wgmma m64n128k16 per k16 step, float32
// accumulators in registers. Operands stream through a 3-stage cp.async pipeline (zero-filled
// tails) into 128-byte-swizzled shared memory, the canonical layouts wgmma reads directly: K-major
// tiles as 128-byte rows of 64 k, M/N-major tiles as two 64-wide halves of 64 k rows (wgmma's
// transpose flag). Two CTAs per SM, so one's epilogue and pipeline fill overlap the other's math.
// Epilogue through shared memory with 16-byte global accesses (dW's old values are pulled into L2
// a few k-steps ahead); each C element belongs to one thread and K is summed in order, so the
// float32 `+=` (dW) is deterministic without atomics. Measured on an H200 at the MoE config (b)
// shapes (bench/cuda_moe, 64 experts, 49152 slots, 2..2075 rows per expert): y ~465, dx ~445,
// dW ~355 TFLOP/s (cuBLAS's grouped GEMM: ~270, ~265, and ~165 per expert).
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cub/block/block_scan.cuh>
#include <type_traits>
#include <vector>

#include "ops/grouped_gemm_wgmma.h"
#include "ops/param_upload_cuda.h"

namespace nemotron::ops {

namespace {

constexpr int BM = 128, BN = 128, BK = 64, kThreads = 128, kStages = 3;
constexpr int kOperandBytes = 128 * BK * 2;     // one operand's 128 x 64 bf16 tile: 16 KiB
constexpr int kHalfBytes = 64 * BK * 2;         // 64 rows of it (one wgmma's A): 8 KiB
constexpr int kStageBytes = 2 * kOperandBytes;  // A then B
constexpr int kEpiStride = BN + 8;              // padded row of the epilogue tile (elements)
constexpr int kSmemBytes = kStages * kStageBytes + 1024;  // + alignment slack (swizzle atoms are 1 KiB)
static_assert(BM * kEpiStride * 4 <= kStages * kStageBytes, "the float32 epilogue tile reuses the stages");

struct Desc {
  GroupedGemmProblem p;
  int tiles_n;     // tiles along N
  int tile_begin;  // first tile index of this problem
};

__device__ inline uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__device__ inline void cp_async16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ inline void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
// cp.async writes through the generic proxy; wgmma reads through the async proxy.
__device__ inline void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ inline void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ inline void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ inline void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
// Keeps the compiler from moving accumulator reads/writes across the asynchronous wgmma.
__device__ inline void pin(float (&d)[64]) {
#pragma unroll
  for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Pulls the float32 C tile into L2 ahead of the epilogue's read-modify-write (128-byte lines; N is
// a multiple of 8, so a tile row's lines lie within C's row or start past N).
__device__ inline void prefetch_c_tile(const float* c, int ldc, int M, int N, int m0, int n0) {
#pragma unroll
  for (int i = 0; i < BM * 4 / kThreads; ++i) {
    const int line = threadIdx.x + i * kThreads, row = m0 + line / 4, col = n0 + (line % 4) * 32;
    if (row < M && col < N) asm volatile("prefetch.global.L2 [%0];\n" ::"l"(c + static_cast<int64_t>(row) * ldc + col));
  }
}

// Shared-memory matrix descriptor: start address, leading/stride byte offsets, 128-byte swizzle.
__device__ inline uint64_t smem_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32) | (uint64_t{1} << 62);
}

// D[64 x 128] += A[64 x 16] B[16 x 128]; TransA/TransB = 1: the operand is M/N-major in shared memory.
template <int TransA, int TransB>
__device__ inline void wgmma_m64n128k16(float (&d)[64], uint64_t da, uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, %67, %68;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db), "r"(scale_d), "n"(TransA), "n"(TransB));
}

// Loads the 128 x 64 tile at (r0 rows, k0) of an operand (A: rows are m; B: rows are n) into the
// swizzled stage at `s`. KMajor: element (row, k) at g[row * ld + k], stored as 128-byte rows
// with 16-byte chunk c of row r at chunk c ^ (r % 8). Else element (row, k) at g[k * ld + row],
// stored as two 64-row halves, each 64 k rows of 128 bytes swizzled the same way on k % 8.
// Chunks outside [rows, K) are zero-filled (rows and K multiples of 8 along the contiguous side).
template <bool KMajor>
__device__ inline void load_tile(uint32_t s, const __nv_bfloat16* g, int ld, int rows, int K, int r0, int k0) {
#pragma unroll
  for (int i = 0; i < 128 * BK / 8 / kThreads; ++i) {
    const int c = threadIdx.x + i * kThreads;
    bool ok;
    const __nv_bfloat16* src;
    uint32_t dst;
    if (KMajor) {
      const int row = c >> 3, kc = c & 7;
      ok = r0 + row < rows && k0 + kc * 8 < K;
      src = g + static_cast<int64_t>(r0 + row) * ld + k0 + kc * 8;
      dst = s + row * 128 + ((kc ^ (row & 7)) << 4);
    } else {
      const int kr = c >> 4, rc = c & 15, half = rc >> 3, cc = rc & 7;
      ok = k0 + kr < K && r0 + rc * 8 < rows;
      src = g + static_cast<int64_t>(k0 + kr) * ld + r0 + rc * 8;
      dst = s + half * kHalfBytes + kr * 128 + ((cc ^ (kr & 7)) << 4);
    }
    cp_async16(dst, ok ? src : g, ok);
  }
}

// Descriptor of the k16 slice kk of a stored operand tile (64 or 128 rows from `s`). K-major: the
// slice starts 32 bytes further along the swizzled rows, 8-row groups 1 KiB apart. M/N-major: the
// slice starts 16 k rows (2 KiB) further, 8-k groups 1 KiB apart, 64-wide halves 8 KiB apart.
template <bool KMajor>
__device__ inline uint64_t operand_desc(uint32_t s, int kk) {
  return KMajor ? smem_desc(s + kk * 32, 16, 1024) : smem_desc(s + kk * 2048, kHalfBytes, 1024);
}

template <bool AK, bool BKm, bool F32Acc>
__global__ void __launch_bounds__(kThreads, 2) grouped_gemm_wgmma_kernel(const Desc* descs, int count,
                                                                          const int* total_tiles) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  // A grid sized on the host for the worst case (expert rows counted on the device): past the total, no work.
  const int tile = blockIdx.x;
  if (total_tiles && tile >= *total_tiles) return;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = (smem_addr(smem_raw) + 1023) & ~1023u;
  unsigned char* smem = smem_raw + (base - smem_addr(smem_raw));

  // Which problem and tile: the last problem whose first tile is <= blockIdx.x (an empty problem
  // shares its first tile with the next one, so it is never the last such).
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (descs[mid].tile_begin <= tile) lo = mid;
    else hi = mid - 1;
  }
  const Desc d = descs[lo];
  const int local = tile - d.tile_begin;
  const int m0 = (local / d.tiles_n) * BM, n0 = (local % d.tiles_n) * BN;
  const int M = d.p.m, N = d.p.n, K = d.p.k;
  const __nv_bfloat16* A = static_cast<const __nv_bfloat16*>(d.p.a);
  const __nv_bfloat16* B = static_cast<const __nv_bfloat16*>(d.p.b);

  float acc[2][64];  // the first wgmma overwrites them (scale_d = 0)

  const int KT = (K + BK - 1) / BK;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < KT) {
      load_tile<AK>(base + s * kStageBytes, A, d.p.lda, M, K, m0, s * BK);
      load_tile<BKm>(base + s * kStageBytes + kOperandBytes, B, d.p.ldb, N, K, n0, s * BK);
    }
    cp_async_commit();
  }
  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<kStages - 2>();  // this thread's part of stage kt has landed
    fence_proxy_async();
    __syncthreads();  // everyone's part has
    const uint32_t sa = base + (kt % kStages) * kStageBytes, sb = sa + kOperandBytes;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      const uint64_t db = operand_desc<BKm>(sb, kk);
      const int accumulate = kt > 0 || kk > 0;
      wgmma_m64n128k16<AK ? 0 : 1, BKm ? 0 : 1>(acc[0], operand_desc<AK>(sa, kk), db, accumulate);
      wgmma_m64n128k16<AK ? 0 : 1, BKm ? 0 : 1>(acc[1], operand_desc<AK>(sa + kHalfBytes, kk), db, accumulate);
    }
    wgmma_commit();
    if (F32Acc && kt == (KT > 3 ? KT - 3 : 0)) prefetch_c_tile(static_cast<const float*>(d.p.c), d.p.ldc, M, N, m0, n0);
    // Stage kt - 1's products are done (the warpgroup's wgmma is collective), so its slot refills.
    wgmma_wait<1>();
    pin(acc[0]);
    pin(acc[1]);
    const int next = kt + kStages - 1;
    if (next < KT) {
      const uint32_t s = base + (next % kStages) * kStageBytes;
      load_tile<AK>(s, A, d.p.lda, M, K, m0, next * BK);
      load_tile<BKm>(s + kOperandBytes, B, d.p.ldb, N, K, n0, next * BK);
    }
    cp_async_commit();
  }
  wgmma_wait<0>();
  pin(acc[0]);
  pin(acc[1]);
  cp_async_wait<0>();
  __syncthreads();  // the stages become the epilogue tile

  // acc[h][4j + r]: row h*64 + 16*warp + lane/4 (+8 for r >= 2), column 8j + 2*(lane%4) + r%2.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  using Out = typename std::conditional<F32Acc, float, __nv_bfloat16>::type;
  Out* tile_s = reinterpret_cast<Out*>(smem);
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int r2 = 0; r2 < 2; ++r2) {
        const int row = h * 64 + warp * 16 + lane / 4 + r2 * 8, col = j * 8 + (lane % 4) * 2;
        const float v0 = acc[h][4 * j + 2 * r2], v1 = acc[h][4 * j + 2 * r2 + 1];
        if (F32Acc) *reinterpret_cast<float2*>(&tile_s[row * kEpiStride + col]) = make_float2(v0, v1);
        else *reinterpret_cast<__nv_bfloat162*>(&tile_s[row * kEpiStride + col]) = __floats2bfloat162_rn(v0, v1);
      }
  __syncthreads();
  // 16-byte chunks, a row's chunks on consecutive threads (N is a multiple of 8, so chunks of
  // 8 bf16 never straddle it; float32 chunks are 4 wide).
  constexpr int kChunk = 16 / sizeof(Out), kRowChunks = BN / kChunk, kRowsPerPass = kThreads / kRowChunks;
  constexpr int kPasses = BM / kRowsPerPass;
  const int cc = threadIdx.x % kRowChunks, r0 = threadIdx.x / kRowChunks;
  const int col = n0 + cc * kChunk;
  Out* C = static_cast<Out*>(d.p.c);
  if constexpr (F32Acc) {
    // dW +=: half of this thread's old values in flight at once (the accumulators are in shared
    // memory now, so the registers are free), then their sums; twice. (Staging the old tile in the
    // pipeline slots the last k-steps free, by cp.async, measured 6% slower on an H200.)
    constexpr int kBatch = kPasses / 2;
#pragma unroll
    for (int p0 = 0; p0 < kPasses; p0 += kBatch) {
      float4 old[kBatch];
#pragma unroll
      for (int p = 0; p < kBatch; ++p) {
        const int row = m0 + r0 + (p0 + p) * kRowsPerPass;
        if (row < M && col < N) old[p] = *reinterpret_cast<const float4*>(C + static_cast<int64_t>(row) * d.p.ldc + col);
      }
#pragma unroll
      for (int p = 0; p < kBatch; ++p) {
        const int r = r0 + (p0 + p) * kRowsPerPass, row = m0 + r;
        if (row >= M || col >= N) continue;
        const float4 a = *reinterpret_cast<const float4*>(&tile_s[r * kEpiStride + cc * kChunk]);
        *reinterpret_cast<float4*>(C + static_cast<int64_t>(row) * d.p.ldc + col) =
            make_float4(old[p].x + a.x, old[p].y + a.y, old[p].z + a.z, old[p].w + a.w);
      }
    }
  } else {
#pragma unroll 4
    for (int p = 0; p < kPasses; ++p) {
      const int r = r0 + p * kRowsPerPass, row = m0 + r;
      if (row >= M || col >= N) continue;
      *reinterpret_cast<int4*>(C + static_cast<int64_t>(row) * d.p.ldc + col) =
          *reinterpret_cast<const int4*>(&tile_s[r * kEpiStride + cc * kChunk]);
    }
  }
#else
  __trap();  // built without sm_90a: the host never launches it (grouped_gemm_wgmma_supported)
#endif
}

// The problems of ExpertRowsGemm from the device counts: one block scans the row counts and the
// tile counts (in chunks of its width, carrying the sums), so no count goes to the host.
constexpr int kDescThreads = 512;

__global__ void __launch_bounds__(kDescThreads) expert_rows_descs_kernel(ExpertRowsGemm g, Desc* descs, int* total) {
  using Scan = cub::BlockScan<int, kDescThreads>;
  __shared__ typename Scan::TempStorage scan;
  __shared__ int carry_rows, carry_tiles;
  if (threadIdx.x == 0) carry_rows = 0, carry_tiles = 0;
  __syncthreads();
  const int tiles_n = (g.n + BN - 1) / BN;
  for (int first = 0; first < g.experts; first += kDescThreads) {
    const int e = first + static_cast<int>(threadIdx.x);
    const int m = e < g.experts ? g.counts[e] : 0;
    int row0 = 0, rows = 0, tile0 = 0, tiles = 0;
    Scan(scan).ExclusiveSum(m, row0, rows);
    __syncthreads();  // the scan's storage is reused
    Scan(scan).ExclusiveSum(((m + BM - 1) / BM) * tiles_n, tile0, tiles);
    if (e < g.experts) {
      Desc d;
      const int64_t r = carry_rows + row0;
      d.p.a = static_cast<const __nv_bfloat16*>(g.a) + r * g.k;
      d.p.b = g.b[e];
      d.p.c = static_cast<__nv_bfloat16*>(g.c) + r * g.n;
      d.p.m = m, d.p.n = g.n, d.p.k = g.k, d.p.lda = g.k, d.p.ldb = g.k, d.p.ldc = g.n;
      d.tiles_n = tiles_n;
      d.tile_begin = carry_tiles + tile0;
      descs[e] = d;
    }
    __syncthreads();
    if (threadIdx.x == 0) carry_rows += rows, carry_tiles += tiles;
    __syncthreads();
  }
  if (threadIdx.x == 0) *total = carry_tiles;
}

template <bool AK, bool BKm, bool F32>
cudaError_t launch(const Desc* dev, int count, int tiles, cudaStream_t st, const int* total_tiles = nullptr) {
  static bool configured = false;  // the opt-in above 48 KiB of dynamic shared memory, once per instance
  if (!configured) {
    cudaError_t err = cudaFuncSetAttribute(grouped_gemm_wgmma_kernel<AK, BKm, F32>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
    if (err != cudaSuccess) return err;
    configured = true;
  }
  grouped_gemm_wgmma_kernel<AK, BKm, F32><<<tiles, kThreads, kSmemBytes, st>>>(dev, count, total_tiles);
  return cudaGetLastError();
}

}  // namespace

bool grouped_gemm_wgmma_supported() {
  static const bool supported = [] {
    int dev = 0, major = 0;
    cudaFuncAttributes attr{};
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
      return false;
    // The binary must hold sm_90a code for it (a build for other GPUs has only the trap; a plain
    // sm_90 build reports the same binaryVersion, hence the build flag).
#if NEMOTRON_SM90A_BUILD
    if (cudaFuncGetAttributes(&attr, grouped_gemm_wgmma_kernel<true, true, false>) != cudaSuccess) return false;
    return major == 9 && attr.binaryVersion == 90;
#else
    (void)attr;
    return false;
#endif
  }();
  return supported;
}

cudaError_t grouped_gemm_wgmma_bf16_cuda(const GroupedGemmProblem* problems, int count, bool a_kmajor,
                                         bool b_kmajor, bool c_f32_accumulate, cudaStream_t st) {
  std::vector<Desc> descs;
  int tiles = 0;
  for (int g = 0; g < count; ++g) {
    const GroupedGemmProblem& p = problems[g];
    if (p.m == 0 || p.n == 0) continue;
    if (p.k == 0 && c_f32_accumulate) continue;  // C += 0
    Desc d;
    d.p = p;
    d.tiles_n = (p.n + BN - 1) / BN;
    d.tile_begin = tiles;
    tiles += ((p.m + BM - 1) / BM) * d.tiles_n;
    descs.push_back(d);
  }
  if (descs.empty()) return cudaSuccess;
  Desc* dev = nullptr;
  const size_t bytes = descs.size() * sizeof(Desc);
  cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&dev), bytes, st);
  if (err != cudaSuccess) return err;
  err = upload_by_params(dev, descs.data(), bytes, st);  // no pageable copy for the next kernel to wait behind
  const int n = static_cast<int>(descs.size());
  if (err == cudaSuccess) {
    if (a_kmajor && b_kmajor && !c_f32_accumulate) err = launch<true, true, false>(dev, n, tiles, st);
    else if (a_kmajor && !b_kmajor && !c_f32_accumulate) err = launch<true, false, false>(dev, n, tiles, st);
    else if (!a_kmajor && !b_kmajor && c_f32_accumulate) err = launch<false, false, true>(dev, n, tiles, st);
    else err = cudaErrorInvalidValue;  // a layout no caller uses
  }
  cudaError_t free_err = cudaFreeAsync(dev, st);
  return err != cudaSuccess ? err : free_err;
}

cudaError_t grouped_gemm_wgmma_bf16_expert_rows_cuda(const ExpertRowsGemm& g, cudaStream_t st) {
  if (g.experts <= 0 || g.rows <= 0 || g.n <= 0) return cudaSuccess;
  // Each non-empty expert has at most one partial row tile: at most rows / BM + 1 + min(E, rows) row tiles.
  const int tiles_n = (g.n + BN - 1) / BN;
  const int64_t max_tiles = (static_cast<int64_t>(g.rows) / BM + 1 + std::min(g.experts, g.rows)) * tiles_n;
  if (max_tiles > INT32_MAX) return cudaErrorInvalidValue;
  Desc* descs = nullptr;  // E problems, then the tile total (Desc holds pointers: the int after them is aligned)
  cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&descs), g.experts * sizeof(Desc) + sizeof(int), st);
  if (err != cudaSuccess) return err;
  int* total = reinterpret_cast<int*>(descs + g.experts);
  expert_rows_descs_kernel<<<1, kDescThreads, 0, st>>>(g, descs, total);
  err = cudaGetLastError();
  if (err == cudaSuccess) err = launch<true, true, false>(descs, g.experts, static_cast<int>(max_tiles), st, total);
  cudaError_t free_err = cudaFreeAsync(descs, st);
  return err != cudaSuccess ? err : free_err;
}

}  // namespace nemotron::ops
