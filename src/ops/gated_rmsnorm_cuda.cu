// Gated grouped RMSNorm kernels. A warp owns one (row, group) segment at a time: lanes stride
// over the group's channels (VEC per lane as one aligned access), sums use warp shuffles; the
// forward keeps the gated values in registers for groups up to 4 * 32 * VEC channels, otherwise
// the second pass re-reads its inputs (L1 hits). The backward block owns one group over a chunk of
// rows. For groups up to 4 * 32 * VEC channels (the model's) it keeps a row's y, z and dout in
// registers as loaded (packed storage values: a pass over them is one read of memory) and its dw
// sums in registers too (a lane owns the same channels on every row); wider groups re-read their
// inputs in the second pass and sum dw per warp in shared memory. Either way the block folds its
// warps in a fixed order into a per-chunk partial, and a second kernel sums the chunks in order
// into dw: deterministic. Given `out`, the backward also writes the forward's output from the
// values it has loaded anyway (Mamba's out_proj dW reads it).
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
// The register backward: 4 warps a block, 16 rows (4 per warp) a block: 2048 blocks for the
// bench model's 16k rows of 2 groups, several waves at 3 blocks per SM, so the last wave's tail is
// short. Its threads hold about 24 channels' values at once (the compiler keeps a row's floats
// between the passes): at up to 170 registers (3 blocks of 128 threads) bf16 at 3 iterations per
// lane (768 channels) does not spill, where 128 (8 warps, 2 blocks) did; 4 spills a little.
constexpr int kRegWarps = 4;
constexpr int kRegRowsPerChunk = 16;

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

// The backward with a row in registers: group size gs <= IT * 32 * VEC (lane channels i = (it * 32
// + lane) * VEC). y, z, dout stay packed as loaded; w is loaded once per block (packed too); each lane sums its
// channels' dw over the warp's rows in registers, in row order. Same products and sums as
// backward_kernel, so the same dy, dz and out; dw folds in chunks of kRegRowsPerChunk rows.
template <class T, int VEC, int IT, bool OUT>
__global__ void __launch_bounds__(kRegWarps * 32, 3)
    backward_reg_kernel(const T* __restrict__ y, const T* __restrict__ z, const T* __restrict__ w,
                        const float* __restrict__ rstd, const T* __restrict__ dout, T* __restrict__ dy,
                        T* __restrict__ dz, T* __restrict__ out, float* __restrict__ partial, int64_t rows, int64_t d,
                        int64_t G) {
  using PackT = Pack<T, VEC>;
  __shared__ float acc_s[kRegWarps][IT * 32 * VEC];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t gs = d / G, g = blockIdx.x;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kRegRowsPerChunk;
  const int64_t r1 = r0 + kRegRowsPerChunk < rows ? r0 + kRegRowsPerChunk : rows;
  const float inv_gs = 1.0f / static_cast<float>(gs);
  PackT wp[IT];  // packed too: float copies of w would push the 3-iteration bf16 kernel into spills
  float acc[IT][VEC];
#pragma unroll
  for (int it = 0; it < IT; ++it) {
    const int64_t i = (static_cast<int64_t>(it) * 32 + lane) * VEC;
#pragma unroll
    for (int k = 0; k < VEC; ++k) acc[it][k] = 0.0f;
    if (i < gs) wp[it] = *reinterpret_cast<const PackT*>(w + g * gs + i);
  }
  // One row at a time: the row's 3 * IT loads are in flight together, other warps cover the latency.
#pragma unroll 1
  for (int64_t r = r0 + warp; r < r1; r += kRegWarps) {
    const int64_t base = r * d + g * gs;
    const float s = rstd[r * G + g];
    PackT yp[IT], zp[IT], gp[IT];
#pragma unroll
    for (int it = 0; it < IT; ++it) {
      const int64_t i = (static_cast<int64_t>(it) * 32 + lane) * VEC;
      if (i < gs) {
        yp[it] = *reinterpret_cast<const PackT*>(y + base + i);
        zp[it] = *reinterpret_cast<const PackT*>(z + base + i);
        gp[it] = *reinterpret_cast<const PackT*>(dout + base + i);
      }
    }
    float dot = 0.0f;
#pragma unroll
    for (int it = 0; it < IT; ++it) {
      const int64_t i = (static_cast<int64_t>(it) * 32 + lane) * VEC;
      if (i < gs) {
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
          const float yv = to_f(yp[it].v[k]), zv = to_f(zp[it].v[k]), gv = to_f(gp[it].v[k]);
          dot += to_f(wp[it].v[k]) * gv * (yv * zv * sigmoid(zv));
        }
      }
    }
    dot = warp_sum(dot) * s * inv_gs;  // mean over the group of w dout v rstd
#pragma unroll
    for (int it = 0; it < IT; ++it) {
      const int64_t i = (static_cast<int64_t>(it) * 32 + lane) * VEC;
      if (i < gs) {
        float dyv[VEC], dzv[VEC], o[VEC];
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
          const float yv = to_f(yp[it].v[k]), zv = to_f(zp[it].v[k]), gv = to_f(gp[it].v[k]);
          const float wv = to_f(wp[it].v[k]), sz = sigmoid(zv), silu = zv * sz, v = yv * silu;
          const float dv = s * (wv * gv - v * s * dot);
          dyv[k] = dv * silu;
          dzv[k] = dv * yv * sz * (1.0f + zv * (1.0f - sz));
          acc[it][k] += gv * v * s;
          if constexpr (OUT) o[k] = wv * (yv * zv * sigmoid(zv)) * s;  // forward_kernel's order
        }
        store<VEC>(dy + base + i, dyv);
        store<VEC>(dz + base + i, dzv);
        if constexpr (OUT) store<VEC>(out + base + i, o);
      }
    }
  }
#pragma unroll
  for (int it = 0; it < IT; ++it)
#pragma unroll
    for (int k = 0; k < VEC; ++k) acc_s[warp][(it * 32 + lane) * VEC + k] = acc[it][k];
  __syncthreads();
  for (int64_t c = threadIdx.x; c < gs; c += blockDim.x) {
    float t = 0.0f;
#pragma unroll
    for (int k = 0; k < kRegWarps; ++k) t += acc_s[k][c];
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
  // The register kernel for vector access and groups of at most 4 * 32 * VEC channels.
  int reg_it = 0;
  dispatch(a, true, [&]<class T, int V>() {
    if constexpr (V > 1) reg_it = static_cast<int>((gs + 32 * V - 1) / (32 * V));
  });
  if (reg_it > 4) reg_it = 0;
  const int64_t fit = kGatedRmsNormCudaMaxGroup / gs;
  const int warps = static_cast<int>(fit < kWarps ? fit : kWarps);
  const size_t smem = static_cast<size_t>(warps) * gs * sizeof(float);
  const int64_t rows_per_chunk = reg_it > 0 ? kRegRowsPerChunk : kRowsPerChunk;
  const int64_t chunks = (a.rows + rows_per_chunk - 1) / rows_per_chunk;
  float* partial = nullptr;
  cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&partial), chunks * a.d * sizeof(float), s);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>(a.G), static_cast<unsigned>(chunks));
  dispatch(a, true, [&]<class T, int V>() {
    const T* y = static_cast<const T*>(a.y);
    const T* z = static_cast<const T*>(a.z);
    const T* w = static_cast<const T*>(a.w);
    const T* dout = static_cast<const T*>(a.dout);
    T *dy = static_cast<T*>(a.dy), *dz = static_cast<T*>(a.dz), *out = static_cast<T*>(a.out);
    auto reg = [&](auto it, auto with_out) {
      backward_reg_kernel<T, V, decltype(it)::value, decltype(with_out)::value><<<grid, kRegWarps * 32, 0, s>>>(
          y, z, w, a.rstd, dout, dy, dz, out, partial, a.rows, a.d, a.G);
    };
    auto reg_out = [&](auto it) {
      if (a.out) reg(it, std::true_type{});
      else reg(it, std::false_type{});
    };
    auto general = [&](auto with_out) {
      backward_kernel<T, V, decltype(with_out)::value><<<grid, warps * 32, smem, s>>>(
          y, z, w, a.rstd, dout, dy, dz, out, partial, a.rows, a.d, a.G);
    };
    if constexpr (V > 1) {
      switch (reg_it) {
        case 1: reg_out(std::integral_constant<int, 1>{}); return;
        case 2: reg_out(std::integral_constant<int, 2>{}); return;
        case 3: reg_out(std::integral_constant<int, 3>{}); return;
        case 4: reg_out(std::integral_constant<int, 4>{}); return;
        default: break;
      }
    }
    if (a.out) general(std::true_type{});
    else general(std::false_type{});
  });
  reduce_kernel<<<reduce::column_sum_grid(a.d), reduce::column_sum_block(), 0, s>>>(partial, chunks, a.d, a.dw);
  err = cudaGetLastError();
  cudaError_t free_err = cudaFreeAsync(partial, s);
  return err != cudaSuccess ? err : free_err;
}

}  // namespace nemotron::ops
