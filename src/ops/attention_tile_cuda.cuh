// Building blocks of the flash attention kernels (sm_80+ PTX): async tile copies into swizzled
// shared memory, ldmatrix fragment loads and the m16n8k16 bf16 MMA with float32 accumulators.
//
// Fragment layouts (PTX ISA, mma.m16n8k16): lane l, g = l / 4, c = 2 * (l % 4).
//   A 16x16: a[0] = (g, c..c+1), a[1] = (g+8, c..), a[2] = (g, c+8..), a[3] = (g+8, c+8..)
//   B 16x8 (k x n): b[0] = (k c..c+1, n g), b[1] = (k c+8.., n g)
//   C 16x8 float: c[0..1] = (g, c..c+1), c[2..3] = (g+8, c..c+1)
// so two adjacent C tiles of a 16-row strip, rounded to bf16, are the A fragment of the next
// product (P -> P V) without touching shared memory.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

namespace nemotron::ops::attn {

using bf16 = __nv_bfloat16;

// A tile of rows x KHD bf16 in shared memory; 16-byte chunk c of row r sits at chunk c ^ (r % 8),
// so the 8 rows an ldmatrix reads hit 8 different bank groups.
template <int KHD>
__device__ inline uint32_t tile_addr(uint32_t base, int row, int chunk) {
  return base + static_cast<uint32_t>(row * KHD * 2 + ((chunk ^ (row & 7)) << 4));
}

__device__ inline uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__device__ inline void cp_async16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ inline void cp_async4(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0));
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ inline void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Copies rows [r0, r0 + ROWS) of a [T, ld] bf16 matrix (columns [0, hd)) into a swizzled tile;
// rows >= T and columns >= hd are zero-filled. hd % 8 == 0, 16-byte aligned rows.
template <int ROWS, int KHD, int NT>
__device__ inline void load_tile(uint32_t dst, const bf16* src, int64_t ld, int64_t r0, int64_t T, int hd) {
  constexpr int kChunks = KHD / 8;
#pragma unroll
  for (int i = threadIdx.x; i < ROWS * kChunks; i += NT) {
    const int row = i / kChunks, c = i % kChunks;
    const bool valid = r0 + row < T && c * 8 < hd;
    const bf16* p = valid ? src + (r0 + row) * ld + c * 8 : src;
    cp_async16(tile_addr<KHD>(dst, row, c), p, valid);
  }
}

// Copies n floats from src[r0..] (r0 + i < T, else zero) into dst.
template <int N, int NT>
__device__ inline void load_vec(uint32_t dst, const float* src, int64_t r0, int64_t T) {
  for (int i = threadIdx.x; i < N; i += NT) {
    const bool valid = r0 + i < T;
    cp_async4(dst + 4 * i, valid ? src + r0 + i : src, valid);
  }
}

__device__ inline void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ inline void ldsm_x4_t(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ inline void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ inline uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// A fragment (16 rows from row0, k columns [16 kc, 16 kc + 16)) of a row-major tile.
template <int KHD>
__device__ inline void ldsm_a(uint32_t (&a)[4], uint32_t tile, int row0, int kc, int lane) {
  ldsm_x4(a, tile_addr<KHD>(tile, row0 + (lane & 15), kc * 2 + (lane >> 4)));
}
// B fragments of two n-tiles (rows n0..n0+15 of a tile stored [n][k]), k columns [16 kc, +16):
// b[0], b[1] for n-tile n0, b[2], b[3] for n0 + 8.
template <int KHD>
__device__ inline void ldsm_b_nk(uint32_t (&b)[4], uint32_t tile, int n0, int kc, int lane) {
  ldsm_x4(b, tile_addr<KHD>(tile, n0 + ((lane >> 4) << 3) + (lane & 7), kc * 2 + ((lane >> 3) & 1)));
}
// B fragments from a tile stored [k][n] (k = rows k0..k0+15), n columns [16 np, +16):
// b[0], b[1] for n-tile 2 np, b[2], b[3] for 2 np + 1.
template <int KHD>
__device__ inline void ldsm_b_kn(uint32_t (&b)[4], uint32_t tile, int k0, int np, int lane) {
  ldsm_x4_t(b, tile_addr<KHD>(tile, k0 + (lane & 7) + (((lane >> 3) & 1) << 3), np * 2 + (lane >> 4)));
}

// Stores a 16-row strip of C tiles (acc[n-tile][4]) scaled by mul[row half] as bf16 rows
// row0 + g, row0 + g + 8 of a [T, ld] matrix, columns < hd.
template <int NTILES>
__device__ inline void store_strip(bf16* dst, int64_t ld, int64_t row0, int64_t T, int hd, const float (&acc)[NTILES][4],
                                   float mul0, float mul1, int lane) {
  const int g = lane >> 2, c = 2 * (lane & 3);
#pragma unroll
  for (int nt = 0; nt < NTILES; ++nt) {
    if (nt * 8 >= hd) break;
    if (row0 + g < T)
      *reinterpret_cast<__nv_bfloat162*>(dst + (row0 + g) * ld + nt * 8 + c) =
          __floats2bfloat162_rn(acc[nt][0] * mul0, acc[nt][1] * mul0);
    if (row0 + g + 8 < T)
      *reinterpret_cast<__nv_bfloat162*>(dst + (row0 + g + 8) * ld + nt * 8 + c) =
          __floats2bfloat162_rn(acc[nt][2] * mul1, acc[nt][3] * mul1);
  }
}

// The same strip as float32 (partial sums), columns < hd.
template <int NTILES>
__device__ inline void store_strip_f32(float* dst, int64_t ld, int64_t row0, int64_t T, int hd,
                                       const float (&acc)[NTILES][4], float mul, int lane) {
  const int g = lane >> 2, c = 2 * (lane & 3);
#pragma unroll
  for (int nt = 0; nt < NTILES; ++nt) {
    if (nt * 8 >= hd) break;
    if (row0 + g < T)
      *reinterpret_cast<float2*>(dst + (row0 + g) * ld + nt * 8 + c) = make_float2(acc[nt][0] * mul, acc[nt][1] * mul);
    if (row0 + g + 8 < T)
      *reinterpret_cast<float2*>(dst + (row0 + g + 8) * ld + nt * 8 + c) =
          make_float2(acc[nt][2] * mul, acc[nt][3] * mul);
  }
}

}  // namespace nemotron::ops::attn
