// Causal depthwise conv kernels. Threads run along channels (the contiguous last dim, VEC
// channels per thread as one aligned access) and each walks a tile of kTile timesteps, keeping the
// last K-1 inputs in registers, so every x element is read from memory once per tile plus a K-1
// halo. The backward recomputes pre-activations tile by tile, emits dx with a K-1 step lag, and
// reduces dw/dbias deterministically: registers over the tile, shared memory over the block's
// tiles in a fixed order, a float32 partial per (batch, block of time), then a second kernel that
// sums those partials in a fixed order into dw, dbias.
#include <cuda_bf16.h>

#include "ops/causal_conv1d_cuda.h"
#include "ops/cuda_vec_io.cuh"

namespace nemotron::ops {

namespace {

using namespace vec_io;

constexpr int kTile = 32;      // timesteps per thread
constexpr int kTilesY = 4;     // thread rows per block, one time tile each
constexpr int kLanes = 32;     // thread columns per block, VEC channels each
constexpr int kUnroll = 4;     // rows loaded ahead of use

struct Dims {
  int64_t B, T, C;
};

template <int VEC, int K, class T>
__device__ inline void load_weights(const T* w, const T* bias, int64_t c0, float (&wk)[K][VEC], float (&bs)[VEC]) {
#pragma unroll
  for (int v = 0; v < VEC; ++v) {
#pragma unroll
    for (int k = 0; k < K; ++k) wk[k][v] = to_f(w[(c0 + v) * K + k]);
    bs[v] = bias ? to_f(bias[c0 + v]) : 0.0f;
  }
}

// xw[i] = x[b, t0 - (K-1) + i] for i < K-1 (zero before the sequence start).
template <int VEC, int K, class T>
__device__ inline void load_halo(const T* x, const Dims& d, int64_t b, int64_t t0, int64_t c0,
                                 float (&xw)[K > 1 ? K - 1 : 1][VEC]) {
#pragma unroll
  for (int i = 0; i < K - 1; ++i) {
    int64_t t = t0 - (K - 1) + i;
    if (t >= 0) {
      load<VEC>(x + (b * d.T + t) * d.C + c0, xw[i]);
    } else {
#pragma unroll
      for (int v = 0; v < VEC; ++v) xw[i][v] = 0.0f;
    }
  }
}

template <class T, int VEC, int K>
__global__ void forward_kernel(const T* x, const T* w, const T* bias, T* y, Dims d) {
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * kLanes + threadIdx.x) * VEC;
  if (c0 >= d.C) return;
  const int64_t b = blockIdx.z, t0 = (static_cast<int64_t>(blockIdx.y) * kTilesY + threadIdx.y) * kTile;
  if (t0 >= d.T) return;
  const int64_t t_end = t0 + kTile < d.T ? t0 + kTile : d.T;
  float wk[K][VEC], bs[VEC], xw[K > 1 ? K - 1 : 1][VEC];
  load_weights<VEC, K>(w, bias, c0, wk, bs);
  load_halo<VEC, K>(x, d, b, t0, c0, xw);
  for (int64_t t = t0; t < t_end; t += kUnroll) {
    float xv[kUnroll][VEC];
#pragma unroll
    for (int j = 0; j < kUnroll; ++j)
      if (t + j < t_end) load<VEC>(x + (b * d.T + t + j) * d.C + c0, xv[j]);
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      if (t + j >= t_end) break;
      float out[VEC];
#pragma unroll
      for (int v = 0; v < VEC; ++v) {
        float p = bs[v] + wk[K - 1][v] * xv[j][v];
#pragma unroll
        for (int k = 0; k < K - 1; ++k) p += wk[k][v] * xw[k][v];
        out[v] = p * sigmoid(p);
#pragma unroll
        for (int k = 0; k + 1 < K - 1; ++k) xw[k][v] = xw[k + 1][v];
        if (K > 1) xw[K > 1 ? K - 2 : 0][v] = xv[j][v];
      }
      store<VEC>(y + (b * d.T + t + j) * d.C + c0, out);
    }
  }
}

// partial [R, K + 1, C] with R = B * gridDim.y: rows k < K hold dw[:, k], row K holds dbias.
template <class T, int VEC, int K>
__global__ void backward_kernel(const T* x, const T* w, const T* bias, const T* dy, T* dx, float* partial, Dims d) {
  __shared__ float red[kTilesY][K + 1][kLanes * VEC];
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * kLanes + threadIdx.x) * VEC;
  const int64_t b = blockIdx.z, t0 = (static_cast<int64_t>(blockIdx.y) * kTilesY + threadIdx.y) * kTile;
  float acc[K + 1][VEC];
#pragma unroll
  for (int k = 0; k <= K; ++k)
#pragma unroll
    for (int v = 0; v < VEC; ++v) acc[k][v] = 0.0f;

  if (c0 < d.C && t0 < d.T) {
    const int64_t t_end = t0 + kTile < d.T ? t0 + kTile : d.T;
    // u walks pre-activation times t0 .. t_end + K - 2: dx[s] needs dpre[s .. s + K - 1].
    const int64_t u_end = t_end + K - 1;
    float wk[K][VEC], bs[VEC], xw[K > 1 ? K - 1 : 1][VEC], dpw[K > 1 ? K - 1 : 1][VEC];
    load_weights<VEC, K>(w, bias, c0, wk, bs);
    load_halo<VEC, K>(x, d, b, t0, c0, xw);
#pragma unroll
    for (int i = 0; i < (K > 1 ? K - 1 : 1); ++i)
#pragma unroll
      for (int v = 0; v < VEC; ++v) dpw[i][v] = 0.0f;  // dpre before t0 never reaches dx[t >= t0]
    for (int64_t u = t0; u < u_end; u += kUnroll) {
      float xv[kUnroll][VEC], gv[kUnroll][VEC];
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) {
        if (u + j < u_end && u + j < d.T) {
          load<VEC>(x + (b * d.T + u + j) * d.C + c0, xv[j]);
          load<VEC>(dy + (b * d.T + u + j) * d.C + c0, gv[j]);
        } else {
#pragma unroll
          for (int v = 0; v < VEC; ++v) xv[j][v] = 0.0f, gv[j][v] = 0.0f;
        }
      }
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) {
        const int64_t uj = u + j;
        if (uj >= u_end) break;
        const bool in_tile = uj < t_end;
        float dxo[VEC];
#pragma unroll
        for (int v = 0; v < VEC; ++v) {
          float p = bs[v] + wk[K - 1][v] * xv[j][v];
#pragma unroll
          for (int k = 0; k < K - 1; ++k) p += wk[k][v] * xw[k][v];
          const float s = sigmoid(p);
          // Past the sequence end dy is zero, so dp is too.
          const float dp = gv[j][v] * s * (1.0f + p * (1.0f - s));
          if (in_tile) {
#pragma unroll
            for (int k = 0; k < K - 1; ++k) acc[k][v] += dp * xw[k][v];
            acc[K - 1][v] += dp * xv[j][v];
            acc[K][v] += dp;
          }
          // dx[uj - (K-1)] = sum_k dpre[uj - k] w[k]; dpw[i] = dpre[uj - (K-1) + i].
          float g = dp * wk[0][v];
#pragma unroll
          for (int k = 1; k < K; ++k) g += dpw[K - 1 - k][v] * wk[k][v];
          dxo[v] = g;
#pragma unroll
          for (int k = 0; k + 1 < K - 1; ++k) xw[k][v] = xw[k + 1][v], dpw[k][v] = dpw[k + 1][v];
          if (K > 1) xw[K > 1 ? K - 2 : 0][v] = xv[j][v], dpw[K > 1 ? K - 2 : 0][v] = dp;
        }
        const int64_t s_out = uj - (K - 1);
        if (s_out >= t0) store<VEC>(dx + (b * d.T + s_out) * d.C + c0, dxo);
      }
    }
  }

  // Block reduction over the time tiles (fixed order), then one partial row per block.
#pragma unroll
  for (int k = 0; k <= K; ++k)
#pragma unroll
    for (int v = 0; v < VEC; ++v) red[threadIdx.y][k][threadIdx.x * VEC + v] = acc[k][v];
  __syncthreads();
  const int64_t r = b * gridDim.y + blockIdx.y;
  for (int i = threadIdx.y * kLanes + threadIdx.x; i < (K + 1) * kLanes * VEC; i += kLanes * kTilesY) {
    const int k = i / (kLanes * VEC), cl = i % (kLanes * VEC);
    const int64_t c = static_cast<int64_t>(blockIdx.x) * kLanes * VEC + cl;
    if (c >= d.C) continue;
    float s = 0.0f;
#pragma unroll
    for (int ty = 0; ty < kTilesY; ++ty) s += red[ty][k][cl];
    partial[(r * (K + 1) + k) * d.C + c] = s;
  }
}

// dw[c, k] += sum_r partial[r, k, c]; dbias[c] += sum_r partial[r, K, c] (rows in order).
__global__ void reduce_kernel(const float* partial, int64_t R, int64_t C, int K, float* dw, float* dbias) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t n = (K + 1) * C;
  if (i >= n) return;
  const int64_t k = i / C, c = i % C;
  if (k == K && !dbias) return;
  float s = 0.0f;
  for (int64_t r = 0; r < R; ++r) s += partial[r * n + i];
  if (k < K) dw[c * K + k] += s;
  else dbias[c] += s;
}

dim3 grid_for(const CausalConv1dCudaArgs& a, int vec) {
  const int64_t lanes = (a.C / vec + kLanes - 1) / kLanes;
  const int64_t rows = (a.T + kTile * kTilesY - 1) / (kTile * kTilesY);
  return dim3(static_cast<unsigned>(lanes), static_cast<unsigned>(rows), static_cast<unsigned>(a.B));
}

template <class T, int VEC, int K>
void launch_forward(const CausalConv1dCudaArgs& a, cudaStream_t s) {
  forward_kernel<T, VEC, K><<<grid_for(a, VEC), dim3(kLanes, kTilesY), 0, s>>>(
      static_cast<const T*>(a.x), static_cast<const T*>(a.w), static_cast<const T*>(a.bias), static_cast<T*>(a.y),
      Dims{a.B, a.T, a.C});
}

template <class T, int VEC, int K>
void launch_backward(const CausalConv1dCudaArgs& a, float* partial, cudaStream_t s) {
  backward_kernel<T, VEC, K><<<grid_for(a, VEC), dim3(kLanes, kTilesY), 0, s>>>(
      static_cast<const T*>(a.x), static_cast<const T*>(a.w), static_cast<const T*>(a.bias),
      static_cast<const T*>(a.dy), static_cast<T*>(a.dx), partial, Dims{a.B, a.T, a.C});
}

// Calls f.template operator()<T, VEC, K>() for the runtime dtype, vector width and K.
template <class F>
cudaError_t dispatch(const CausalConv1dCudaArgs& a, const void* const* ptrs, int nptrs, F&& f) {
  if (a.K < 1 || a.K > kCausalConv1dCudaMaxK) return cudaErrorInvalidValue;
  auto with_t = [&](auto zero) {
    using T = decltype(zero);
    bool vec4 = a.C % 4 == 0;
    for (int i = 0; i < nptrs; ++i) vec4 = vec4 && aligned_for<T>(4, ptrs[i]);
    auto with_vec = [&](auto vec) {
      constexpr int V = decltype(vec)::value;
      switch (a.K) {
        case 1: f.template operator()<T, V, 1>(); break;
        case 2: f.template operator()<T, V, 2>(); break;
        case 3: f.template operator()<T, V, 3>(); break;
        default: f.template operator()<T, V, 4>(); break;
      }
    };
    if (vec4) with_vec(std::integral_constant<int, 4>{});
    else with_vec(std::integral_constant<int, 1>{});
  };
  if (a.bf16) with_t(__nv_bfloat16{});
  else with_t(float{});
  return cudaSuccess;
}

}  // namespace

cudaError_t causal_conv1d_forward_cuda(const CausalConv1dCudaArgs& a, cudaStream_t s) {
  if (a.B == 0 || a.T == 0 || a.C == 0) return cudaSuccess;
  const void* ptrs[] = {a.x, a.y};
  cudaError_t err = dispatch(a, ptrs, 2, [&]<class T, int V, int K>() { launch_forward<T, V, K>(a, s); });
  return err != cudaSuccess ? err : cudaGetLastError();
}

cudaError_t causal_conv1d_backward_cuda(const CausalConv1dCudaArgs& a, cudaStream_t s) {
  if (a.B == 0 || a.T == 0 || a.C == 0) return cudaSuccess;
  const int64_t R = a.B * static_cast<int64_t>(grid_for(a, 1).y), n = (a.K + 1) * a.C;
  float* partial = nullptr;
  cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&partial), R * n * sizeof(float), s);
  if (err != cudaSuccess) return err;
  const void* ptrs[] = {a.x, a.dy, a.dx};
  err = dispatch(a, ptrs, 3, [&]<class T, int V, int K>() { launch_backward<T, V, K>(a, partial, s); });
  if (err == cudaSuccess) {
    reduce_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(partial, R, a.C, static_cast<int>(a.K),
                                                                          a.dw, a.dbias);
    err = cudaGetLastError();
  }
  cudaError_t free_err = cudaFreeAsync(partial, s);
  return err != cudaSuccess ? err : free_err;
}

}  // namespace nemotron::ops
