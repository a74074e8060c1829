// MoE router kernels: an elementwise sigmoid; the selection with one warp per token (its biased
// scores in shared memory, each of the K picks a warp argmax whose ties go to the lower index,
// exactly the CPU rule); the combine weights with one thread per token; the backward with one warp
// per token writing its whole dlogits row (zero outside the choice), so nothing is accumulated.
#include <cuda_bf16.h>

#include "ops/moe_router_cuda.h"
#include "ops/cuda_vec_io.cuh"

namespace nemotron::ops {

namespace {

constexpr int kWarps = 8;  // tokens per block in the warp-per-token kernels
constexpr float kNormEps = 1e-20f;

using vec_io::from_f;
using vec_io::to_f;

template <class T>
__global__ void scores_kernel(const T* logits, float* scores, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) scores[i] = 1.0f / (1.0f + expf(-to_f(logits[i])));
}

// (value, index) argmax over a warp: larger value wins, equal values go to the lower index;
// index -1 means "none" and loses to everything.
__device__ inline void warp_argmax(float& v, int& idx) {
  for (int o = 16; o > 0; o >>= 1) {
    float ov = __shfl_xor_sync(0xffffffffu, v, o);
    int oi = __shfl_xor_sync(0xffffffffu, idx, o);
    bool take = oi >= 0 && (idx < 0 || ov > v || (ov == v && oi < idx));
    if (take) v = ov, idx = oi;
  }
}

// Shared memory per warp: q[E] biased scores, then group scores [G] and kept flags [G].
__global__ void select_kernel(MoeRouterCudaArgs a) {
  extern __shared__ float smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t n = blockIdx.x * static_cast<int64_t>(kWarps) + warp;
  if (n >= a.N) return;  // whole warps leave together
  const int E = static_cast<int>(a.E), K = static_cast<int>(a.K), G = static_cast<int>(a.n_group);
  const int gs = E / G;
  float* q = smem + static_cast<size_t>(warp) * (E + 2 * G);
  float* gscore = q + E;
  float* eligible = gscore + G;  // per group: 1 = kept
  const float* s = a.scores + n * a.E;
  for (int e = lane; e < E; e += 32) q[e] = s[e] + (a.bias ? a.bias[e] : 0.0f);
  __syncwarp();
  if (G > 1) {
    for (int g = lane; g < G; g += 32) {  // the CPU's best/second scan, per group
      float best = -INFINITY, second = -INFINITY;
      for (int e = g * gs; e < (g + 1) * gs; ++e) {
        float v = q[e];
        if (v > best) second = best, best = v;
        else if (v > second) second = v;
      }
      gscore[g] = best + second;
      eligible[g] = 0.0f;
    }
    __syncwarp();
    for (int r = 0; r < a.topk_group; ++r) {
      float v = -INFINITY;
      int idx = -1;
      for (int g = lane; g < G; g += 32)
        if (eligible[g] == 0.0f && (idx < 0 || gscore[g] > v)) v = gscore[g], idx = g;
      warp_argmax(v, idx);
      if (lane == 0) eligible[idx] = 1.0f;
      __syncwarp();
    }
  }
  // Experts of dropped groups and experts already taken are out: marked by NaN in q.
  if (G > 1)
    for (int e = lane; e < E; e += 32)
      if (eligible[e / gs] == 0.0f) q[e] = NAN;
  __syncwarp();
  for (int j = 0; j < K; ++j) {
    float v = -INFINITY;
    int idx = -1;
    for (int e = lane; e < E; e += 32) {
      float qe = q[e];
      if (!isnan(qe) && (idx < 0 || qe > v)) v = qe, idx = e;
    }
    warp_argmax(v, idx);
    if (lane == 0) {
      a.topk_idx[n * a.K + j] = idx;
      q[idx] = NAN;
    }
    __syncwarp();
  }
}

__global__ void weights_kernel(MoeRouterCudaArgs a) {
  int64_t n = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (n >= a.N) return;
  const float* s = a.scores + n * a.E;
  const int32_t* I = a.topk_idx + n * a.K;
  float sum = 0;
  for (int64_t j = 0; j < a.K; ++j) sum += s[I[j]];
  float f = a.norm_topk_prob ? a.scale / (sum + kNormEps) : a.scale;
  for (int64_t j = 0; j < a.K; ++j) a.topk_w[n * a.K + j] = s[I[j]] * f;
}

// dL/da_k = (c/S)(g_k - sum_j g_j a_j / S) (norm) or c g_k; dlogit = dL/da * a (1 - a).
template <class T>
__global__ void backward_kernel(MoeRouterCudaArgs a) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t n = blockIdx.x * static_cast<int64_t>(kWarps) + warp;
  if (n >= a.N) return;
  const float* s = a.scores + n * a.E;
  const int32_t* I = a.topk_idx + n * a.K;
  const float* g = a.dtopk_w + n * a.K;
  float S = 0, dot = 0;
  for (int64_t j = 0; j < a.K; ++j) S += s[I[j]], dot += g[j] * s[I[j]];
  S += kNormEps;
  T* dl = static_cast<T*>(a.dlogits) + n * a.E;
  for (int64_t e = lane; e < a.E; e += 32) {
    float v = 0;
    for (int64_t j = 0; j < a.K; ++j)
      if (I[j] == e) {
        float av = s[e];
        float da = a.norm_topk_prob ? a.scale / S * (g[j] - dot / S) : a.scale * g[j];
        v = da * av * (1.0f - av);
      }
    dl[e] = from_f<T>(v);
  }
}

unsigned blocks(int64_t n, int64_t per) { return static_cast<unsigned>((n + per - 1) / per); }

}  // namespace

cudaError_t moe_router_scores_cuda(const MoeRouterCudaArgs& a, cudaStream_t st) {
  const int64_t n = a.N * a.E;
  if (n == 0) return cudaSuccess;
  if (a.bf16)
    scores_kernel<<<blocks(n, 256), 256, 0, st>>>(static_cast<const __nv_bfloat16*>(a.logits), a.scores, n);
  else
    scores_kernel<<<blocks(n, 256), 256, 0, st>>>(static_cast<const float*>(a.logits), a.scores, n);
  return cudaGetLastError();
}

cudaError_t moe_select_experts_cuda(const MoeRouterCudaArgs& a, cudaStream_t st) {
  if (a.N == 0) return cudaSuccess;
  if (a.E > kMoeRouterMaxExperts) return cudaErrorInvalidValue;
  const size_t shmem = static_cast<size_t>(kWarps) * (a.E + 2 * a.n_group) * sizeof(float);
  select_kernel<<<blocks(a.N, kWarps), kWarps * 32, shmem, st>>>(a);
  return cudaGetLastError();
}

cudaError_t moe_topk_weights_cuda(const MoeRouterCudaArgs& a, cudaStream_t st) {
  if (a.N == 0) return cudaSuccess;
  weights_kernel<<<blocks(a.N, 128), 128, 0, st>>>(a);
  return cudaGetLastError();
}

cudaError_t moe_router_backward_cuda(const MoeRouterCudaArgs& a, cudaStream_t st) {
  if (a.N == 0) return cudaSuccess;
  if (a.bf16) backward_kernel<__nv_bfloat16><<<blocks(a.N, kWarps), kWarps * 32, 0, st>>>(a);
  else backward_kernel<float><<<blocks(a.N, kWarps), kWarps * 32, 0, st>>>(a);
  return cudaGetLastError();
}

}  // namespace nemotron::ops
