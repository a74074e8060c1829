// One thread per (token, pair i of the head, group of kHeads heads): the angle of pair i at the
// token's position is formed once (float64, as rope_cuda.cu forms it, so q and k come out bit for
// bit as split_columns + rope_forward made them) and applied to pair (i, i + hd/2) of each head
// of the group, whose element is read from the fused row and written to q or to the token's
// cache row. The group's loads are independent, so at batch 1 (~400 threads for the 8B shape)
// they are in flight together where rope_cuda.cu's thread walked 32 heads one after another.
#include <cuda_bf16.h>

#include "ops/cuda_vec_io.cuh"
#include "ops/qkv_rope_cache_cuda.h"

namespace nemotron::ops {

namespace {

constexpr int kThreads = 128;
constexpr int kHeads = 8;  // heads per thread

using vec_io::from_f;
using vec_io::to_f;

template <class T>
__global__ void qkv_rope_cache_kernel(const T* __restrict__ qkv, const int32_t* __restrict__ pos,
                                      const int32_t* __restrict__ slots, T* __restrict__ q, T* __restrict__ kc,
                                      T* __restrict__ vc, int64_t n, int64_t nq, int64_t nkv, int64_t hd, int64_t rows,
                                      bool rope, RopeFreq freq) {
  const int64_t half = hd / 2, heads = nq + 2 * nkv, groups = (heads + kHeads - 1) / kHeads;
  const int64_t idx = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  if (idx >= n * groups * half) return;
  const int64_t i = idx % half, grp = (idx / half) % groups, t = idx / (half * groups);
  float c = 1.0f, s = 0.0f;
  if (rope) {
    const double a = static_cast<double>(pos[t]) * rope_inv_freq(freq, i, hd);
    constexpr double kTwoPi = 6.283185307179586;
    const float r = static_cast<float>(a - kTwoPi * rint(a / kTwoPi));
    sincosf(r, &s, &c);
  }
  const int64_t slot = slots[t];
  const bool write_cache = slot >= 0 && slot < rows;
  const T* row = qkv + t * heads * hd;
#pragma unroll
  for (int k = 0; k < kHeads; ++k) {
    const int64_t h = grp * kHeads + k;
    if (h >= heads) break;
    const float u = to_f(row[h * hd + i]), w = to_f(row[h * hd + i + half]);
    T* dst;
    bool rotate = rope;
    if (h < nq) {
      dst = q + (t * nq + h) * hd;
    } else if (h < nq + nkv) {
      if (!write_cache) continue;
      dst = kc + (slot * nkv + (h - nq)) * hd;
    } else {
      if (!write_cache) continue;
      dst = vc + (slot * nkv + (h - nq - nkv)) * hd;
      rotate = false;
    }
    if (rotate) {
      dst[i] = from_f<T>(u * c - w * s);
      dst[i + half] = from_f<T>(w * c + u * s);
    } else {
      dst[i] = from_f<T>(u);
      dst[i + half] = from_f<T>(w);
    }
  }
}

}  // namespace

cudaError_t qkv_rope_cache_write_cuda(const QkvRopeCacheCudaArgs& a, cudaStream_t s) {
  const int64_t heads = a.nq + 2 * a.nkv, groups = (heads + kHeads - 1) / kHeads;
  const int64_t total = a.n * groups * (a.hd / 2);
  if (total == 0) return cudaSuccess;
  if (a.hd % 2 != 0) return cudaErrorInvalidValue;
  const unsigned blocks = static_cast<unsigned>((total + kThreads - 1) / kThreads);
  auto run = [&](auto zero) {
    using T = decltype(zero);
    qkv_rope_cache_kernel<T><<<blocks, kThreads, 0, s>>>(
        static_cast<const T*>(a.qkv), a.position_ids, a.slot_mapping, static_cast<T*>(a.q), static_cast<T*>(a.k_cache),
        static_cast<T*>(a.v_cache), a.n, a.nq, a.nkv, a.hd, a.rows, a.rope, a.freq);
  };
  if (a.bf16) run(__nv_bfloat16{});
  else run(float{});
  return cudaGetLastError();
}

}  // namespace nemotron::ops
