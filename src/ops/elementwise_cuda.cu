// Elementwise add/scale and dtype casts: 16-byte packs, grid-stride (cuda_pack.cuh).
#include "ops/cuda_pack.cuh"
#include "ops/elementwise_cuda.h"

namespace nemotron::ops {

namespace {

template <class T>
struct AddOp {
  static constexpr int kWidth = pack::pack_width<T>();
  const T *a, *b;
  T* out;
  __device__ void operator()(int64_t i, int count, bool whole) const {
    float x[kWidth], y[kWidth];
    pack::load(a + i, count, whole, x);
    pack::load(b + i, count, whole, y);
#pragma unroll
    for (int k = 0; k < kWidth; ++k) x[k] += y[k];
    pack::store(out + i, count, whole, x);
  }
};

template <class T>
struct ScaleOp {
  static constexpr int kWidth = pack::pack_width<T>();
  const T* a;
  T* out;
  float s;
  __device__ void operator()(int64_t i, int count, bool whole) const {
    float x[kWidth];
    pack::load(a + i, count, whole, x);
#pragma unroll
    for (int k = 0; k < kWidth; ++k) x[k] *= s;
    pack::store(out + i, count, whole, x);
  }
};

template <class S, class D>
struct CastOp {
  static constexpr int kWidth = pack::pack_width<S, D>();
  const S* src;
  D* dst;
  __device__ void operator()(int64_t i, int count, bool whole) const {
    float x[kWidth];
    pack::load(src + i, count, whole, x);
    pack::store(dst + i, count, whole, x);
  }
};

template <class F>
cudaError_t by_dtype(bool bf16, F&& f) {
  return bf16 ? f(__nv_bfloat16{}) : f(float{});
}

}  // namespace

cudaError_t add_cuda(const ElementwiseCudaArgs& g, cudaStream_t s) {
  bool vec = pack::aligned16(g.a) && pack::aligned16(g.b) && pack::aligned16(g.out);
  return by_dtype(g.bf16, [&](auto zero) {
    using T = decltype(zero);
    return pack::launch_map(AddOp<T>{static_cast<const T*>(g.a), static_cast<const T*>(g.b), static_cast<T*>(g.out)},
                            g.n, vec, s);
  });
}

cudaError_t scale_cuda(const ElementwiseCudaArgs& g, float scale, cudaStream_t s) {
  bool vec = pack::aligned16(g.a) && pack::aligned16(g.out);
  return by_dtype(g.bf16, [&](auto zero) {
    using T = decltype(zero);
    return pack::launch_map(ScaleOp<T>{static_cast<const T*>(g.a), static_cast<T*>(g.out), scale}, g.n, vec, s);
  });
}

cudaError_t cast_cuda(const CastCudaArgs& g, cudaStream_t s) {
  bool vec = pack::aligned16(g.src) && pack::aligned16(g.dst);
  return by_dtype(g.src_bf16, [&](auto src_zero) {
    using S = decltype(src_zero);
    return by_dtype(g.dst_bf16, [&](auto dst_zero) {
      using D = decltype(dst_zero);
      return pack::launch_map(CastOp<S, D>{static_cast<const S*>(g.src), static_cast<D*>(g.dst)}, g.n, vec, s);
    });
  });
}

}  // namespace nemotron::ops
