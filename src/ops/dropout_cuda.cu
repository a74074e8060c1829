// Dropout in 16-byte packs (4 float32s or 8 bfloat16s: one or two Philox blocks of 4 words each,
// since packs start at multiples of 4); the mask words are Philox 4x32-10 exactly as core/rng.cpp
// draws them (counter = block index and stream, key = seed), so CPU and GPU drop the same elements.
#include "ops/cuda_pack.cuh"
#include "ops/dropout_cuda.h"

namespace nemotron::ops {

namespace {

__device__ inline uint4 philox_block(uint64_t block, uint64_t stream, uint64_t seed) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(block), c1 = static_cast<uint32_t>(block >> 32);
  uint32_t c2 = static_cast<uint32_t>(stream), c3 = static_cast<uint32_t>(stream >> 32);
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    const uint32_t hi0 = __umulhi(kM0, c0), lo0 = kM0 * c0;
    const uint32_t hi1 = __umulhi(kM1, c2), lo1 = kM1 * c2;
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0, c1 = lo1, c2 = n2, c3 = lo0;
    k0 += kW0;
    k1 += kW1;
  }
  return make_uint4(c0, c1, c2, c3);
}

template <class T>
struct DropoutOp {
  static constexpr int kWidth = pack::pack_width<T>();
  const T* x;
  T* y;
  uint64_t seed, stream, threshold;
  float scale;
  bool accumulate;
  __device__ void operator()(int64_t i, int count, bool whole) const {
    float v[kWidth], out[kWidth];
    pack::load(x + i, count, whole, v);
    if (accumulate) pack::load(y + i, count, whole, out);
#pragma unroll
    for (int b = 0; b < kWidth / 4; ++b) {
      const uint4 w = philox_block(static_cast<uint64_t>(i) / 4 + b, stream, seed);
      const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int e = 4 * b + k;
        const float d = static_cast<uint64_t>(words[k]) >= threshold ? v[e] * scale : 0.0f;
        out[e] = accumulate ? out[e] + d : d;
      }
    }
    pack::store(y + i, count, whole, out);
  }
};

template <class T>
cudaError_t run(const DropoutCudaArgs& a, cudaStream_t s) {
  DropoutOp<T> op{static_cast<const T*>(a.x), static_cast<T*>(a.y), a.seed, a.stream, a.threshold, a.scale,
                  a.accumulate};
  return pack::launch_map(op, a.n, pack::aligned16(a.x) && pack::aligned16(a.y), s);
}

}  // namespace

cudaError_t dropout_cuda(const DropoutCudaArgs& a, cudaStream_t s) {
  return a.bf16 ? run<__nv_bfloat16>(a, s) : run<float>(a, s);
}

}  // namespace nemotron::ops
