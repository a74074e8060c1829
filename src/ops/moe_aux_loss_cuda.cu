// Sequence aux loss kernels. Forward: one warp per token finds 1/Z and its unbiased top-k (warp
// argmax, ties to the lower index); then per sequence, chunks of tokens are summed per expert
// column into float32 partials, and the partials are summed in chunk order (deterministic, no
// atomics). Backward: one warp per token adds its row of the gradient.
#include <cuda_bf16.h>

#include "ops/moe_aux_loss_cuda.h"
#include "ops/cuda_vec_io.cuh"

namespace nemotron::ops {

namespace {

constexpr int kWarps = 8;
constexpr int kChunk = 32;     // tokens per partial sum
constexpr int kColumns = 128;  // experts per block in the column sums
constexpr float kEps = 1e-20f;

using vec_io::from_f;
using vec_io::to_f;

__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// zinv [N], topk [N, K].
__global__ void token_kernel(MoeSeqAuxCudaArgs a, float* zinv, int32_t* topk) {
  extern __shared__ float smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t n = blockIdx.x * static_cast<int64_t>(kWarps) + warp;
  if (n >= a.B * a.S) return;
  const int E = static_cast<int>(a.E);
  float* q = smem + static_cast<size_t>(warp) * E;
  const float* s = a.scores + n * a.E;
  float z = 0;
  for (int e = lane; e < E; e += 32) z += (q[e] = s[e]);
  z = warp_sum(z);
  if (lane == 0) zinv[n] = a.K > 1 ? 1.0f / (z + kEps) : 1.0f;
  __syncwarp();
  for (int64_t j = 0; j < a.K; ++j) {
    float v = -INFINITY;
    int idx = -1;
    for (int e = lane; e < E; e += 32)
      if (!isnan(q[e]) && (idx < 0 || q[e] > v)) v = q[e], idx = e;
    for (int o = 16; o > 0; o >>= 1) {
      float ov = __shfl_xor_sync(0xffffffffu, v, o);
      int oi = __shfl_xor_sync(0xffffffffu, idx, o);
      if (oi >= 0 && (idx < 0 || ov > v || (ov == v && oi < idx))) v = ov, idx = oi;
    }
    if (lane == 0) topk[n * a.K + j] = idx, q[idx] = NAN;
    __syncwarp();
  }
}

// part_c/part_p [B, chunks, E]: sums over the tokens of chunk c of sequence b.
__global__ void column_kernel(MoeSeqAuxCudaArgs a, const float* zinv, const int32_t* topk, float* part_c,
                              float* part_p, int64_t chunks) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(kColumns) + threadIdx.x;
  const int64_t c = blockIdx.y, b = blockIdx.z;
  if (i >= a.E) return;
  const int64_t t0 = c * kChunk, t1 = t0 + kChunk < a.S ? t0 + kChunk : a.S;
  float cnt = 0, p = 0;
#pragma unroll 4
  for (int64_t t = t0; t < t1; ++t) {  // unrolled so that the loads of several tokens overlap
    const int64_t n = b * a.S + t;
    p += a.scores[n * a.E + i] * zinv[n];
    for (int64_t j = 0; j < a.K; ++j) cnt += topk[n * a.K + j] == i ? 1.0f : 0.0f;
  }
  part_c[(b * chunks + c) * a.E + i] = cnt;
  part_p[(b * chunks + c) * a.E + i] = p;
}

// One warp per (b, i): lanes take strided chunks, then a fixed shuffle tree (deterministic).
__global__ void reduce_kernel(MoeSeqAuxCudaArgs a, const float* part_c, const float* part_p, int64_t chunks) {
  const int64_t k = blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / 32;  // b * E + i
  const int lane = threadIdx.x % 32;
  if (k >= a.B * a.E) return;
  const int64_t b = k / a.E, i = k % a.E;
  float cnt = 0, p = 0;
  for (int64_t c = lane; c < chunks; c += 32) cnt += part_c[(b * chunks + c) * a.E + i], p += part_p[(b * chunks + c) * a.E + i];
  cnt = warp_sum(cnt);
  p = warp_sum(p);
  if (lane == 0) a.counts[k] = cnt, a.psum[k] = p;
}

// g_i = weight c_bi = dL/dp_ti; ds_j = g_j / Z - (sum_i g_i s_i) / Z^2 (ds = g when K = 1);
// dlogit_j += ds_j s_j (1 - s_j).
template <class T>
__global__ void backward_kernel(MoeSeqAuxCudaArgs a) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t n = blockIdx.x * static_cast<int64_t>(kWarps) + warp;
  if (n >= a.B * a.S) return;
  const float* s = a.scores + n * a.E;
  const float* c = a.counts + (n / a.S) * a.E;
  float z = 0, dot = 0;
  for (int64_t e = lane; e < a.E; e += 32) z += s[e], dot += a.weight * c[e] * s[e];
  z = warp_sum(z) + kEps;
  dot = warp_sum(dot);
  T* dl = static_cast<T*>(a.dlogits) + n * a.E;
  for (int64_t e = lane; e < a.E; e += 32) {
    const float sj = s[e];
    const float ds = a.K > 1 ? a.weight * c[e] / z - dot / (z * z) : a.weight * c[e];
    dl[e] = from_f<T>(to_f(dl[e]) + ds * sj * (1.0f - sj));
  }
}

unsigned blocks(int64_t n, int64_t per) { return static_cast<unsigned>((n + per - 1) / per); }

}  // namespace

cudaError_t moe_seq_aux_forward_cuda(const MoeSeqAuxCudaArgs& a, cudaStream_t st) {
  const int64_t N = a.B * a.S;
  if (a.B == 0 || a.E == 0) return cudaSuccess;
  if (a.E > kMoeSeqAuxMaxExperts) return cudaErrorInvalidValue;
  const int64_t chunks = a.S > 0 ? (a.S + kChunk - 1) / kChunk : 1;
  // One scratch block: zinv [N], topk [N, K], part_c and part_p [B, chunks, E].
  const size_t n_zinv = static_cast<size_t>(N), n_topk = static_cast<size_t>(N * a.K);
  const size_t n_part = static_cast<size_t>(a.B * chunks * a.E);
  char* scratch = nullptr;
  cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&scratch),
                                    (n_zinv + n_topk + 2 * n_part) * 4 + 16, st);
  if (err != cudaSuccess) return err;
  float* zinv = reinterpret_cast<float*>(scratch);
  int32_t* topk = reinterpret_cast<int32_t*>(zinv + n_zinv);
  float* part_c = reinterpret_cast<float*>(topk + n_topk);
  float* part_p = part_c + n_part;
  if (N > 0) {
    token_kernel<<<blocks(N, kWarps), kWarps * 32, kWarps * a.E * sizeof(float), st>>>(a, zinv, topk);
    dim3 grid(blocks(a.E, kColumns), static_cast<unsigned>(chunks), static_cast<unsigned>(a.B));
    column_kernel<<<grid, kColumns, 0, st>>>(a, zinv, topk, part_c, part_p, chunks);
  } else {
    cudaMemsetAsync(part_c, 0, 2 * n_part * 4, st);
  }
  reduce_kernel<<<blocks(a.B * a.E, kWarps), kWarps * 32, 0, st>>>(a, part_c, part_p, chunks);
  err = cudaGetLastError();
  cudaError_t free_err = cudaFreeAsync(scratch, st);
  return err != cudaSuccess ? err : free_err;
}

cudaError_t moe_seq_aux_backward_cuda(const MoeSeqAuxCudaArgs& a, cudaStream_t st) {
  const int64_t N = a.B * a.S;
  if (N == 0 || a.E == 0) return cudaSuccess;
  if (a.bf16) backward_kernel<__nv_bfloat16><<<blocks(N, kWarps), kWarps * 32, 0, st>>>(a);
  else backward_kernel<float><<<blocks(N, kWarps), kWarps * 32, 0, st>>>(a);
  return cudaGetLastError();
}

}  // namespace nemotron::ops
