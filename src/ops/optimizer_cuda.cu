// Multi-tensor optimizer kernels: one block per work item (kOptimizerChunk elements of one
// tensor), 256 threads, float4 accesses when the slot's pointers allow. Everything is computed in
// float32; the gradient norm's partial sums are per item (fixed order within the block), then one
// block sums the partials in float64 in a fixed order: the result is bitwise reproducible.
#include <cuda_bf16.h>

#include "ops/optimizer_cuda.h"

namespace nemotron::ops {

namespace {

constexpr int kThreads = 256;

struct AdamWMath {
  AdamWCudaStep s;
  float wd;
  __device__ inline void operator()(float& w, float g, float& m, float& v) const {
    g *= s.grad_scale;
    m = s.beta1 * m + (1.0f - s.beta1) * g;
    v = s.beta2 * v + (1.0f - s.beta2) * g * g;
    const float mhat = m * s.inv_bc1, vhat = v * s.inv_bc2;
    w -= s.lr * (mhat / (sqrtf(vhat) + s.eps) + wd * w);
  }
};

__global__ void adamw_kernel(const OptimizerSlot* slots, const OptimizerWork* work, AdamWCudaStep step) {
  const OptimizerWork item = work[blockIdx.x];
  const OptimizerSlot sl = slots[item.slot];
  const int64_t end = item.begin + kOptimizerChunk < sl.numel ? item.begin + kOptimizerChunk : sl.numel;
  const AdamWMath f{step, step.weight_decay * sl.weight_decay};
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(sl.value_bf16);
  if (sl.vec4) {  // chunks start at multiples of 4; the tail of the tensor goes element by element
    const int64_t vec_end = item.begin + ((end - item.begin) & ~int64_t{3});
    for (int64_t i = item.begin + 4 * threadIdx.x; i < vec_end; i += 4 * kThreads) {
      float4 w = *reinterpret_cast<const float4*>(sl.truth + i), g = *reinterpret_cast<const float4*>(sl.grad + i);
      float4 m = *reinterpret_cast<const float4*>(sl.m + i), v = *reinterpret_cast<const float4*>(sl.v + i);
      f(w.x, g.x, m.x, v.x), f(w.y, g.y, m.y, v.y), f(w.z, g.z, m.z, v.z), f(w.w, g.w, m.w, v.w);
      *reinterpret_cast<float4*>(sl.truth + i) = w;
      *reinterpret_cast<float4*>(sl.m + i) = m;
      *reinterpret_cast<float4*>(sl.v + i) = v;
      if (out) {
        __nv_bfloat162 lo = __floats2bfloat162_rn(w.x, w.y), hi = __floats2bfloat162_rn(w.z, w.w);
        uint2 packed;
        packed.x = *reinterpret_cast<uint32_t*>(&lo), packed.y = *reinterpret_cast<uint32_t*>(&hi);
        *reinterpret_cast<uint2*>(out + i) = packed;
      }
    }
    for (int64_t i = vec_end + threadIdx.x; i < end; i += kThreads) {
      float w = sl.truth[i], m = sl.m[i], v = sl.v[i];
      f(w, sl.grad[i], m, v);
      sl.truth[i] = w, sl.m[i] = m, sl.v[i] = v;
      if (out) out[i] = __float2bfloat16(w);
    }
    return;
  }
  for (int64_t i = item.begin + threadIdx.x; i < end; i += kThreads) {
    float w = sl.truth[i], m = sl.m[i], v = sl.v[i];
    f(w, sl.grad[i], m, v);
    sl.truth[i] = w, sl.m[i] = m, sl.v[i] = v;
    if (out) out[i] = __float2bfloat16(w);
  }
}

__global__ void sum_sq_kernel(const OptimizerSlot* slots, const OptimizerWork* work, double* partial) {
  const OptimizerWork item = work[blockIdx.x];
  const OptimizerSlot sl = slots[item.slot];
  const int64_t end = item.begin + kOptimizerChunk < sl.numel ? item.begin + kOptimizerChunk : sl.numel;
  float acc = 0;
  if (sl.vec4) {
    const int64_t vec_end = item.begin + ((end - item.begin) & ~int64_t{3});
    for (int64_t i = item.begin + 4 * threadIdx.x; i < vec_end; i += 4 * kThreads) {
      float4 g = *reinterpret_cast<const float4*>(sl.grad + i);
      acc += g.x * g.x + g.y * g.y + g.z * g.z + g.w * g.w;
    }
    for (int64_t i = vec_end + threadIdx.x; i < end; i += kThreads) acc += sl.grad[i] * sl.grad[i];
  } else {
    for (int64_t i = item.begin + threadIdx.x; i < end; i += kThreads) acc += sl.grad[i] * sl.grad[i];
  }
  double d = acc;
  __shared__ double warp_sums[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = d;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0;
    for (int w = 0; w < kThreads / 32; ++w) total += warp_sums[w];
    partial[blockIdx.x] = total;
  }
}

__global__ void sum_partials_kernel(const double* partial, int64_t items, double* out) {
  __shared__ double sums[1024];
  double acc = 0;
  for (int64_t i = threadIdx.x; i < items; i += blockDim.x) acc += partial[i];
  sums[threadIdx.x] = acc;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half >>= 1) {
    if (threadIdx.x < half) sums[threadIdx.x] += sums[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = sums[0];
}

__global__ void scale_kernel(const OptimizerSlot* slots, const OptimizerWork* work, float scale) {
  const OptimizerWork item = work[blockIdx.x];
  const OptimizerSlot sl = slots[item.slot];
  const int64_t end = item.begin + kOptimizerChunk < sl.numel ? item.begin + kOptimizerChunk : sl.numel;
  for (int64_t i = item.begin + threadIdx.x; i < end; i += kThreads) sl.grad[i] *= scale;
}

}  // namespace

cudaError_t adamw_cuda(const OptimizerSlot* slots, const OptimizerWork* work, int64_t items, const AdamWCudaStep& s,
                       cudaStream_t stream) {
  if (items == 0) return cudaSuccess;
  adamw_kernel<<<static_cast<unsigned>(items), kThreads, 0, stream>>>(slots, work, s);
  return cudaGetLastError();
}

cudaError_t grad_sum_sq_cuda(const OptimizerSlot* slots, const OptimizerWork* work, int64_t items, double* sum_sq,
                             cudaStream_t stream) {
  *sum_sq = 0;
  if (items == 0) return cudaSuccess;
  double* partial = nullptr;
  cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&partial), sizeof(double) * (items + 1), stream);
  if (err != cudaSuccess) return err;
  sum_sq_kernel<<<static_cast<unsigned>(items), kThreads, 0, stream>>>(slots, work, partial);
  sum_partials_kernel<<<1, 1024, 0, stream>>>(partial, items, partial + items);
  err = cudaGetLastError();
  if (err == cudaSuccess) err = cudaMemcpyAsync(sum_sq, partial + items, sizeof(double), cudaMemcpyDeviceToHost, stream);
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  cudaError_t free_err = cudaFreeAsync(partial, stream);
  return err != cudaSuccess ? err : free_err;
}

cudaError_t scale_grads_cuda(const OptimizerSlot* slots, const OptimizerWork* work, int64_t items, float scale,
                             cudaStream_t stream) {
  if (items == 0) return cudaSuccess;
  scale_kernel<<<static_cast<unsigned>(items), kThreads, 0, stream>>>(slots, work, scale);
  return cudaGetLastError();
}

}  // namespace nemotron::ops
