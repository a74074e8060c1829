// Gated grouped RMSNorm kernels. A warp owns one (row, group) segment at a time: lanes stride
// over the group's channels (VEC per lane as one aligned access), sums use warp shuffles; the
// forward keeps the gated values in registers for groups up to 4 * 32 * VEC channels, otherwise
// (and in the backward) the second pass re-reads its inputs (L1 hits). The backward block owns one group over a chunk of
// rows; each warp keeps its own dw accumulators in shared memory (a lane owns its channels, so
// no atomics), the block folds its warps in a fixed order into a per-chunk partial, and a second
// kernel sums the chunks in order into dw: deterministic. Given `out`, the backward also writes the
// forward's output from the values it has loaded anyway (Mamba's out_proj dW reads it).
#include <cuda_bf16.h>

#include <type_traits>

#include "ops/cuda_reduce.cuh"
#include "ops/cuda_vec_io.cuh"
#include "ops/gated_rmsnorm_cuda.h"

namespace nemotron::ops {

namespace {

using namespace vec_io;

constexpr int kWarps = 8;           // warps per forward block, and most per backward block
constexpr int kRowsPerChunk = 64;   // rows per backward block

__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// IT > 0: the group is at most IT * 32 * VEC channels and the gated values stay in registers
// between the two passes; IT = 0: any group size, the second pass re-reads y, z.
template <class T, int VEC, int IT>
__global__ void forward_kernel(const T* __restrict__ y, const T* __restrict__ z, const T* __restrict__ w,
                               T* __restrict__ out, float* __restrict__ rstd, int64_t rows, int64_t d, int64_t G,
                               float eps) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t seg = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  if (seg >= rows * G) return;
  const int64_t gs = d / G, row = seg / G, g = seg % G;
  const int64_t base = row * d + g * gs;
  float ss = 0.0f;
  if constexpr (IT > 0) {
    float v[IT][VEC];
#pragma unroll
    for (int it = 0; it < IT; ++it) {
      const int64_t i = (static_cast<int64_t>(it) * 32 + lane) * VEC;
      if (i < gs) {
        float yv[VEC], zv[VEC];
        load<VEC>(y + base + i, yv);
        load<VEC>(z + base + i, zv);
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
          v[it][k] = yv[k] * zv[k] * sigmoid(zv[k]);
          ss += v[it][k] * v[it][k];
        }
      }
    }
    const float s = rsqrtf(warp_sum(ss) / static_cast<float>(gs) + eps);
    if (lane == 0) rstd[seg] = s;
#pragma unroll
    for (int it = 0; it < IT; ++it) {
      const int64_t i = (static_cast<int64_t>(it) * 32 + lane) * VEC;
      if (i < gs) {
        float wv[VEC], o[VEC];
        load<VEC>(w + g * gs + i, wv);
#pragma unroll
        for (int k = 0; k < VEC; ++k) o[k] = wv[k] * v[it][k] * s;
        store<VEC>(out + base + i, o);
      }
    }
  } else {
    for (int64_t i = lane * VEC; i < gs; i += 32 * VEC) {
      float yv[VEC], zv[VEC];
      load<VEC>(y + base + i, yv);
      load<VEC>(z + base + i, zv);
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const float v = yv[k] * zv[k] * sigmoid(zv[k]);
        ss += v * v;
      }
    }
    const float s = rsqrtf(warp_sum(ss) / static_cast<float>(gs) + eps);
    if (lane == 0) rstd[seg] = s;
    for (int64_t i = lane * VEC; i < gs; i += 32 * VEC) {
      float yv[VEC], zv[VEC], wv[VEC], o[VEC];
      load<VEC>(y + base + i, yv);
      load<VEC>(z + base + i, zv);
      load<VEC>(w + g * gs + i, wv);
#pragma unroll
      for (int k = 0; k < VEC; ++k) o[k] = wv[k] * (yv[k] * zv[k] * sigmoid(zv[k])) * s;
      store<VEC>(out + base + i, o);
    }
  }
}

// Block (group g = blockIdx.x, rows chunk blockIdx.y); partial [chunks, d]. OUT: also write the
// forward's output (a template flag: with a branch in the loop instead, the plain backward ran
// ~10% slower on an H100).
template <class T, int VEC, bool OUT>
__global__ void __launch_bounds__(kWarps * 32, 4)
    backward_kernel(const T* __restrict__ y, const T* __restrict__ z, const T* __restrict__ w,
                    const float* __restrict__ rstd, const T* __restrict__ dout, T* __restrict__ dy,
                    T* __restrict__ dz, T* __restrict__ out, float* __restrict__ partial, int64_t rows, int64_t d,
                    int64_t G) {
  extern __shared__ float acc[];  // [warps, gs]
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t gs = d / G, g = blockIdx.x;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kRowsPerChunk;
  const int64_t r1 = r0 + kRowsPerChunk < rows ? r0 + kRowsPerChunk : rows;
  float* mine = acc + warp * gs;
  for (int64_t i = lane * VEC; i < gs; i += 32 * VEC)
#pragma unroll
    for (int k = 0; k < VEC; ++k) mine[i + k] = 0.0f;
  const float inv_gs = 1.0f / static_cast<float>(gs);
  for (int64_t r = r0 + warp; r < r1; r += warps) {
    const int64_t base = r * d + g * gs;
    const float s = rstd[r * G + g];
    float dot = 0.0f;
    for (int64_t i = lane * VEC; i < gs; i += 32 * VEC) {
      float yv[VEC], zv[VEC], gv[VEC], wv[VEC];
      load<VEC>(y + base + i, yv);
      load<VEC>(z + base + i, zv);
      load<VEC>(dout + base + i, gv);
      load<VEC>(w + g * gs + i, wv);
#pragma unroll
      for (int k = 0; k < VEC; ++k) dot += wv[k] * gv[k] * (yv[k] * zv[k] * sigmoid(zv[k]));
    }
    dot = warp_sum(dot) * s * inv_gs;  // mean over the group of w dout v rstd
    for (int64_t i = lane * VEC; i < gs; i += 32 * VEC) {
      float yv[VEC], zv[VEC], gv[VEC], wv[VEC], dyv[VEC], dzv[VEC];
      load<VEC>(y + base + i, yv);
      load<VEC>(z + base + i, zv);
      load<VEC>(dout + base + i, gv);
      load<VEC>(w + g * gs + i, wv);
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const float sz = sigmoid(zv[k]), silu = zv[k] * sz, v = yv[k] * silu;
        const float dv = s * (wv[k] * gv[k] - v * s * dot);
        dyv[k] = dv * silu;
        dzv[k] = dv * yv[k] * sz * (1.0f + zv[k] * (1.0f - sz));
        mine[i + k] += gv[k] * v * s;
      }
      store<VEC>(dy + base + i, dyv);
      store<VEC>(dz + base + i, dzv);
      if constexpr (OUT) {  // the forward's output, in forward_kernel's order of products (bit for bit)
        float o[VEC];
#pragma unroll
        for (int k = 0; k < VEC; ++k) o[k] = wv[k] * (yv[k] * zv[k] * sigmoid(zv[k])) * s;
        store<VEC>(out + base + i, o);
      }
    }
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < gs; c += blockDim.x) {
    float t = 0.0f;
    for (int k = 0; k < warps; ++k) t += acc[k * gs + c];
    partial[blockIdx.y * d + g * gs + c] = t;
  }
}

// dw[c] += sum over chunks of partial[chunk, c] (chunks in a fixed order).
__global__ void reduce_kernel(const float* __restrict__ partial, int64_t chunks, int64_t d, float* __restrict__ dw) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * reduce::kReduceCols + threadIdx.x;
  const float total = reduce::column_sum(partial, chunks, d, c);
  if (threadIdx.y == 0 && c < d) dw[c] += total;
}

// Widest access: 16 bytes per lane when the group size and every pointer allow it, else scalar.
template <class T>
int vec_width(const GatedRmsNormCudaArgs& a, bool backward) {
  constexpr int kWide = 16 / sizeof(T);
  const int64_t gs = a.d / a.G;
  bool ok = gs % kWide == 0 && aligned_for<T>(kWide, a.y, a.z, a.w);
  ok = ok && aligned_for<T>(kWide, a.out) && (!backward || aligned_for<T>(kWide, a.dout, a.dy, a.dz));
  return ok ? kWide : 1;
}

template <class F>
void dispatch(const GatedRmsNormCudaArgs& a, bool backward, F&& f) {
  auto with_t = [&](auto zero) {
    using T = decltype(zero);
    constexpr int kWide = 16 / sizeof(T);
    if (vec_width<T>(a, backward) == kWide) f.template operator()<T, kWide>();
    else f.template operator()<T, 1>();
  };
  if (a.bf16) with_t(__nv_bfloat16{});
  else with_t(float{});
}

}  // namespace

cudaError_t gated_rmsnorm_forward_cuda(const GatedRmsNormCudaArgs& a, cudaStream_t s) {
  const int64_t segs = a.rows * a.G;
  if (segs == 0 || a.d == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>((segs + kWarps - 1) / kWarps);
  const int64_t gs = a.d / a.G;
  dispatch(a, false, [&]<class T, int V>() {
    auto launch = [&](auto it) {
      constexpr int IT = decltype(it)::value;
      forward_kernel<T, V, IT><<<blocks, kWarps * 32, 0, s>>>(
          static_cast<const T*>(a.y), static_cast<const T*>(a.z), static_cast<const T*>(a.w),
          static_cast<T*>(a.out), a.rstd, a.rows, a.d, a.G, a.eps);
    };
    if constexpr (V == 1) {  // odd group sizes (tests, not the model): the general loop
      launch(std::integral_constant<int, 0>{});
      return;
    }
    switch ((gs + 32 * V - 1) / (32 * V)) {
      case 1: launch(std::integral_constant<int, 1>{}); break;
      case 2: launch(std::integral_constant<int, 2>{}); break;
      case 3: launch(std::integral_constant<int, 3>{}); break;
      case 4: launch(std::integral_constant<int, 4>{}); break;
      default: launch(std::integral_constant<int, 0>{}); break;
    }
  });
  return cudaGetLastError();
}

cudaError_t gated_rmsnorm_backward_cuda(const GatedRmsNormCudaArgs& a, cudaStream_t s) {
  if (a.rows == 0 || a.d == 0) return cudaSuccess;
  const int64_t gs = a.d / a.G;
  if (gs > kGatedRmsNormCudaMaxGroup) return cudaErrorInvalidValue;
  const int64_t fit = kGatedRmsNormCudaMaxGroup / gs;
  const int warps = static_cast<int>(fit < kWarps ? fit : kWarps);
  const size_t smem = static_cast<size_t>(warps) * gs * sizeof(float);
  const int64_t chunks = (a.rows + kRowsPerChunk - 1) / kRowsPerChunk;
  float* partial = nullptr;
  cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&partial), chunks * a.d * sizeof(float), s);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>(a.G), static_cast<unsigned>(chunks));
  dispatch(a, true, [&]<class T, int V>() {
    auto launch = [&](auto with_out) {
      backward_kernel<T, V, decltype(with_out)::value><<<grid, warps * 32, smem, s>>>(
          static_cast<const T*>(a.y), static_cast<const T*>(a.z), static_cast<const T*>(a.w), a.rstd,
          static_cast<const T*>(a.dout), static_cast<T*>(a.dy), static_cast<T*>(a.dz), static_cast<T*>(a.out), partial,
          a.rows, a.d, a.G);
    };
    if (a.out) launch(std::true_type{});
    else launch(std::false_type{});
  });
  reduce_kernel<<<reduce::column_sum_grid(a.d), reduce::column_sum_block(), 0, s>>>(partial, chunks, a.d, a.dw);
  err = cudaGetLastError();
  cudaError_t free_err = cudaFreeAsync(partial, s);
  return err != cudaSuccess ? err : free_err;
}

}  // namespace nemotron::ops
