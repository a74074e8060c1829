// relu2 and swiglu, forward and backward, in 16-byte packs (cuda_pack.cuh). Every input of a
// pack is loaded before any output is stored, so outputs may alias dy.
#include <initializer_list>
#include <type_traits>

#include "ops/activations_cuda.h"
#include "ops/cuda_pack.cuh"

namespace nemotron::ops {

namespace {

// Fast division (expf(-g) = inf for very negative g gives 0, the right limit).
__device__ inline float sigmoid(float g) { return __fdividef(1.0f, 1.0f + expf(-g)); }

template <class T>
struct Relu2Forward {
  static constexpr int kWidth = pack::pack_width<T>();
  const T* x;
  T* y;
  __device__ void operator()(int64_t i, int count, bool whole) const {
    float v[kWidth];
    pack::load(x + i, count, whole, v);
#pragma unroll
    for (int k = 0; k < kWidth; ++k) v[k] = v[k] > 0.0f ? v[k] * v[k] : 0.0f;
    pack::store(y + i, count, whole, v);
  }
};

template <class T>
struct Relu2Backward {
  static constexpr int kWidth = pack::pack_width<T>();
  const T *x, *dy;
  T* dx;
  __device__ void operator()(int64_t i, int count, bool whole) const {
    float v[kWidth], d[kWidth];
    pack::load(x + i, count, whole, v);
    pack::load(dy + i, count, whole, d);
#pragma unroll
    for (int k = 0; k < kWidth; ++k) v[k] = v[k] > 0.0f ? 2.0f * v[k] * d[k] : 0.0f;
    pack::store(dx + i, count, whole, v);
  }
};

// dx = dy * 2 sqrt(y), sqrt(y) rounded to T first (activations.h: then it is max(x, 0) exactly);
// y = 0 gives +0 as relu2_backward does (not 2 * 0 * dy, -0 for dy < 0). sqrtf never sees the
// zeros (half of y after a ReLU), which take its special-case path: with them this kernel ran
// ~25% slower than relu2_backward on an H100.
template <class T>
struct Relu2BackwardFromOutput {
  static constexpr int kWidth = pack::pack_width<T>();
  const T *y, *dy;
  T* dx;
  __device__ void operator()(int64_t i, int count, bool whole) const {
    float v[kWidth], d[kWidth];
    pack::load(y + i, count, whole, v);
    pack::load(dy + i, count, whole, d);
#pragma unroll
    for (int k = 0; k < kWidth; ++k) {
      const bool on = v[k] > 0.0f;
      const float r = static_cast<float>(static_cast<T>(sqrtf(on ? v[k] : 1.0f)));
      v[k] = on ? 2.0f * r * d[k] : 0.0f;
    }
    pack::store(dx + i, count, whole, v);
  }
};

template <class T>
struct SwigluForward {
  static constexpr int kWidth = pack::pack_width<T>();
  const T *gate, *up;
  T* y;
  __device__ void operator()(int64_t i, int count, bool whole) const {
    float g[kWidth], u[kWidth];
    pack::load(gate + i, count, whole, g);
    pack::load(up + i, count, whole, u);
#pragma unroll
    for (int k = 0; k < kWidth; ++k) g[k] = g[k] * sigmoid(g[k]) * u[k];
    pack::store(y + i, count, whole, g);
  }
};

template <class T>
struct SwigluBackward {
  static constexpr int kWidth = pack::pack_width<T>();
  const T *gate, *up, *dy;
  T *dgate, *dup;
  __device__ void operator()(int64_t i, int count, bool whole) const {
    float g[kWidth], u[kWidth], d[kWidth];
    pack::load(gate + i, count, whole, g);
    pack::load(up + i, count, whole, u);
    pack::load(dy + i, count, whole, d);
#pragma unroll
    for (int k = 0; k < kWidth; ++k) {
      const float s = sigmoid(g[k]), silu = g[k] * s;
      const float dg = d[k] * u[k] * s * (1.0f + g[k] * (1.0f - s));
      u[k] = d[k] * silu;
      g[k] = dg;
    }
    pack::store(dgate + i, count, whole, g);
    pack::store(dup + i, count, whole, u);
  }
};

bool all_aligned(std::initializer_list<const void*> ptrs) {
  for (const void* p : ptrs)
    if (!pack::aligned16(p)) return false;
  return true;
}

template <template <class> class Op, class Make>
cudaError_t launch(const ActivationCudaArgs& a, bool vec, cudaStream_t s, Make make) {
  if (a.bf16) return pack::launch_map(make(Op<__nv_bfloat16>{}), a.n, vec, s);
  return pack::launch_map(make(Op<float>{}), a.n, vec, s);
}

template <class T> const T* in(const void* p) { return static_cast<const T*>(p); }
template <class T> T* out(void* p) { return static_cast<T*>(p); }

}  // namespace

cudaError_t relu2_forward_cuda(const ActivationCudaArgs& a, cudaStream_t s) {
  return launch<Relu2Forward>(a, all_aligned({a.x, a.y}), s, [&](auto op) {
    using T = std::remove_pointer_t<decltype(op.y)>;
    return decltype(op){in<T>(a.x), out<T>(a.y)};
  });
}

cudaError_t relu2_backward_cuda(const ActivationCudaArgs& a, cudaStream_t s) {
  return launch<Relu2Backward>(a, all_aligned({a.x, a.dy, a.dx}), s, [&](auto op) {
    using T = std::remove_pointer_t<decltype(op.dx)>;
    return decltype(op){in<T>(a.x), in<T>(a.dy), out<T>(a.dx)};
  });
}

cudaError_t relu2_backward_from_output_cuda(const ActivationCudaArgs& a, cudaStream_t s) {
  return launch<Relu2BackwardFromOutput>(a, all_aligned({a.x, a.dy, a.dx}), s, [&](auto op) {
    using T = std::remove_pointer_t<decltype(op.dx)>;
    return decltype(op){in<T>(a.x), in<T>(a.dy), out<T>(a.dx)};
  });
}

cudaError_t swiglu_forward_cuda(const ActivationCudaArgs& a, cudaStream_t s) {
  return launch<SwigluForward>(a, all_aligned({a.x, a.up, a.y}), s, [&](auto op) {
    using T = std::remove_pointer_t<decltype(op.y)>;
    return decltype(op){in<T>(a.x), in<T>(a.up), out<T>(a.y)};
  });
}

cudaError_t swiglu_backward_cuda(const ActivationCudaArgs& a, cudaStream_t s) {
  return launch<SwigluBackward>(a, all_aligned({a.x, a.up, a.dy, a.dx, a.dup}), s, [&](auto op) {
    using T = std::remove_pointer_t<decltype(op.dgate)>;
    return decltype(op){in<T>(a.x), in<T>(a.up), in<T>(a.dy), out<T>(a.dx), out<T>(a.dup)};
  });
}

}  // namespace nemotron::ops
