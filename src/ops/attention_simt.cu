// The simt attention path (float32, and bf16 heads the flash path cannot load): one warp per
// query row (forward, dQ) or key row (dK/dV), lane c holding head dims c, c+32, c+64, c+96, and
// every dot product reduced over the warp. Exact float32 softmax (expf/logf) so the float32
// target meets its 1e-5 bound; no atomics, each output row is owned by one warp.
#include <cuda_bf16.h>

#include <cmath>

#include "ops/attention_internal_cuda.h"
#include "ops/cuda_vec_io.cuh"
#include "ops/seq_idx_cuda.cuh"

namespace nemotron::ops::attn {

namespace {

constexpr int kWarps = 8;
constexpr int kPerLane = attention_cuda_max_hd / 32;

using vec_io::from_f;
using vec_io::to_f;

__device__ inline float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

struct Dims {
  int64_t B, T, nq, nkv, hd, Tk;  // T query rows at key positions off + t, off = Tk - T
  float scale;
  const int32_t* seq;  // seq_idx [B, Tk] or null: keys range over the query's own sequence only
  __device__ int64_t off() const { return Tk - T; }
};

// Keys the query at key position p of row b sees start here; the queries key s is seen by end
// before seq_end (key positions).
__device__ inline int64_t key_first(const Dims& d, int64_t b, int64_t p) { return d.seq ? seq_first(d.seq + b * d.Tk, p) : 0; }
__device__ inline int64_t query_end(const Dims& d, int64_t b, int64_t s) {
  return d.seq ? seq_end(d.seq + b * d.Tk, s, d.Tk) : d.Tk;
}

template <class T>
__device__ inline void load_row(const T* p, int64_t hd, int lane, float (&r)[kPerLane]) {
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int64_t c = lane + 32 * i;
    r[i] = c < hd ? to_f(p[c]) : 0.0f;
  }
}

template <class T>
__device__ inline void store_row(T* p, int64_t hd, int lane, const float (&r)[kPerLane], float mul) {
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int64_t c = lane + 32 * i;
    if (c < hd) p[c] = from_f<T>(r[i] * mul);
  }
}

template <class T>
__device__ inline float dot_row(const float (&a)[kPerLane], const T* p, int64_t hd, int lane) {
  float s = 0;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int64_t c = lane + 32 * i;
    if (c < hd) s += a[i] * to_f(p[c]);
  }
  return warp_sum(s);
}

// Row (b, h, t) -> element offset of head h at token t.
__device__ inline int64_t qoff(const Dims& d, int64_t b, int64_t t, int64_t h) { return ((b * d.T + t) * d.nq + h) * d.hd; }
__device__ inline int64_t koff(const Dims& d, int64_t b, int64_t t, int64_t j) { return ((b * d.Tk + t) * d.nkv + j) * d.hd; }

template <class T>
__global__ void forward_kernel(Dims d, const T* q, const T* k, const T* v, T* o, float* lse) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / 32;  // (b, h, t)
  if (row >= d.B * d.nq * d.T) return;
  const int lane = threadIdx.x % 32;
  const int64_t t = row % d.T, h = (row / d.T) % d.nq, b = row / (d.T * d.nq), j = h / (d.nq / d.nkv);
  float qr[kPerLane], acc[kPerLane] = {};
  load_row(q + qoff(d, b, t, h), d.hd, lane, qr);
  float m = -INFINITY, l = 0;
  for (int64_t s = key_first(d, b, t + d.off()); s <= t + d.off(); ++s) {
    const float x = dot_row(qr, k + koff(d, b, s, j), d.hd, lane) * d.scale;
    const float mn = fmaxf(m, x), alpha = expf(m - mn), p = expf(x - mn);
    l = l * alpha + p;
    const T* vr = v + koff(d, b, s, j);
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t c = lane + 32 * i;
      acc[i] = acc[i] * alpha + (c < d.hd ? p * to_f(vr[c]) : 0.0f);
    }
    m = mn;
  }
  store_row(o + qoff(d, b, t, h), d.hd, lane, acc, 1.0f / l);
  if (lane == 0) lse[row] = m + logf(l);
}

// dq[t] = scale * sum_{s<=t} p (dp - D) k[s], p = exp(scale q.k - lse), dp = dO.v.
template <class T>
__global__ void dq_kernel(Dims d, const T* q, const T* k, const T* v, const float* lse, const float* D, const T* dout,
                          T* dq) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / 32;
  if (row >= d.B * d.nq * d.T) return;
  const int lane = threadIdx.x % 32;
  const int64_t t = row % d.T, h = (row / d.T) % d.nq, b = row / (d.T * d.nq), j = h / (d.nq / d.nkv);
  float qr[kPerLane], dor[kPerLane], acc[kPerLane] = {};
  load_row(q + qoff(d, b, t, h), d.hd, lane, qr);
  load_row(dout + qoff(d, b, t, h), d.hd, lane, dor);
  const float L = lse[row], Dr = D[row];
  for (int64_t s = key_first(d, b, t + d.off()); s <= t + d.off(); ++s) {
    const T* kr = k + koff(d, b, s, j);
    const float p = expf(dot_row(qr, kr, d.hd, lane) * d.scale - L);
    const float ds = p * (dot_row(dor, v + koff(d, b, s, j), d.hd, lane) - Dr);
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t c = lane + 32 * i;
      if (c < d.hd) acc[i] += ds * to_f(kr[c]);
    }
  }
  store_row(dq + qoff(d, b, t, h), d.hd, lane, acc, d.scale);
}

// One warp per key row (b, j, s): dv[s] = sum p dO[t], dk[s] = scale sum ds q[t] over the group's
// query heads h and t >= s, in a fixed order.
template <class T>
__global__ void dkdv_kernel(Dims d, const T* q, const T* k, const T* v, const float* lse, const float* D,
                            const T* dout, T* dk, T* dv) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / 32;  // (b, j, s)
  if (row >= d.B * d.nkv * d.Tk) return;
  const int lane = threadIdx.x % 32;
  const int64_t s = row % d.Tk, j = (row / d.Tk) % d.nkv, b = row / (d.Tk * d.nkv), g = d.nq / d.nkv;
  float kr[kPerLane], vr[kPerLane], ak[kPerLane] = {}, av[kPerLane] = {};
  load_row(k + koff(d, b, s, j), d.hd, lane, kr);
  load_row(v + koff(d, b, s, j), d.hd, lane, vr);
  const int64_t off = d.off(), t_end = query_end(d, b, s) - off;  // local query rows
  for (int64_t h = j * g; h < (j + 1) * g; ++h) {
    const float* L = lse + (b * d.nq + h) * d.T;
    const float* Dh = D + (b * d.nq + h) * d.T;
    for (int64_t t = s > off ? s - off : 0; t < t_end; ++t) {
      const T* qr = q + qoff(d, b, t, h);
      const T* dor = dout + qoff(d, b, t, h);
      const float p = expf(dot_row(kr, qr, d.hd, lane) * d.scale - L[t]);
      const float ds = p * (dot_row(vr, dor, d.hd, lane) - Dh[t]);
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int64_t c = lane + 32 * i;
        if (c < d.hd) av[i] += p * to_f(dor[c]), ak[i] += ds * to_f(qr[c]);
      }
    }
  }
  store_row(dk + koff(d, b, s, j), d.hd, lane, ak, d.scale);
  store_row(dv + koff(d, b, s, j), d.hd, lane, av, 1.0f);
}

Dims dims(const AttentionCudaArgs& a) {
  return {a.B, a.T, a.nq, a.nkv, a.hd, a.Tk, 1.0f / sqrtf(static_cast<float>(a.hd)), a.seq_idx};
}

unsigned blocks_for(int64_t rows) { return static_cast<unsigned>((rows + kWarps - 1) / kWarps); }

}  // namespace

cudaError_t simt_forward(const AttentionCudaArgs& a, cudaStream_t s) {
  const Dims d = dims(a);
  const unsigned nb = blocks_for(a.B * a.nq * a.T);
  auto run = [&](auto zero) {
    using T = decltype(zero);
    forward_kernel<T><<<nb, kWarps * 32, 0, s>>>(d, static_cast<const T*>(a.q), static_cast<const T*>(a.k),
                                                  static_cast<const T*>(a.v), static_cast<T*>(a.o), a.lse);
  };
  if (a.bf16) run(__nv_bfloat16{});
  else run(float{});
  return cudaGetLastError();
}

cudaError_t simt_backward(const AttentionCudaArgs& a, const float* D, cudaStream_t s) {
  const Dims d = dims(a);
  auto run = [&](auto zero) {
    using T = decltype(zero);
    const T *q = static_cast<const T*>(a.q), *k = static_cast<const T*>(a.k), *v = static_cast<const T*>(a.v);
    const T* dout = static_cast<const T*>(a.dout);
    dq_kernel<T><<<blocks_for(a.B * a.nq * a.T), kWarps * 32, 0, s>>>(d, q, k, v, a.lse, D, dout, static_cast<T*>(a.dq));
    dkdv_kernel<T><<<blocks_for(a.B * a.nkv * a.Tk), kWarps * 32, 0, s>>>(d, q, k, v, a.lse, D, dout,
                                                                          static_cast<T*>(a.dk), static_cast<T*>(a.dv));
  };
  if (a.bf16) run(__nv_bfloat16{});
  else run(float{});
  return cudaGetLastError();
}

}  // namespace nemotron::ops::attn
