// Bias add in 16-byte packs (a whole pack stays in one row when D is a multiple of 8); the bias
// gradient as a deterministic two-stage column sum (row chunks into float32 partials, then the
// partials in a fixed order), no atomics.
#include <algorithm>

#include "ops/bias_cuda.h"
#include "ops/cuda_pack.cuh"

namespace nemotron::ops {

namespace {

using pack::kPack;

template <class T>
struct BiasAddOp {
  T* y;
  const T* b;
  int64_t D;
  __device__ void operator()(int64_t i, int count, bool whole) const {
    float v[kPack], c[kPack];
    pack::load(y + i, count, whole, v);
    if (whole) {  // vec implies D % 8 == 0, so the pack's columns are contiguous in b
      pack::load8(b + i % D, c);
    } else {
#pragma unroll
      for (int k = 0; k < kPack; ++k) c[k] = k < count ? pack::to_f(b[(i + k) % D]) : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < kPack; ++k) v[k] += c[k];
    pack::store(y + i, count, whole, v);
  }
};

constexpr int64_t kMinRowsPerChunk = 64;
constexpr int64_t kMaxChunks = 65535;  // the grid's y limit
constexpr int kThreads = 256;

// partial[chunk, i] = sum of dy[r, i] over the chunk's rows (threads run along columns: coalesced).
template <class T>
__global__ void column_partial_kernel(const T* dy, float* partial, int64_t rows, int64_t D, int64_t chunk_rows) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= D) return;
  const int64_t r0 = blockIdx.y * chunk_rows;
  const int64_t r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
  float acc = 0;
  for (int64_t r = r0; r < r1; ++r) acc += pack::to_f(dy[r * D + i]);
  partial[blockIdx.y * D + i] = acc;
}

__global__ void column_reduce_kernel(const float* partial, int64_t chunks, float* db, int64_t D) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= D) return;
  float acc = 0;
  for (int64_t c = 0; c < chunks; ++c) acc += partial[c * D + i];
  db[i] += acc;
}

}  // namespace

cudaError_t bias_add_cuda(const BiasCudaArgs& a, cudaStream_t s) {
  const bool vec = a.D % kPack == 0 && pack::aligned16(a.y) && pack::aligned16(a.b);
  if (a.bf16)
    return pack::launch_map(
        BiasAddOp<__nv_bfloat16>{static_cast<__nv_bfloat16*>(a.y), static_cast<const __nv_bfloat16*>(a.b), a.D},
        a.rows * a.D, vec, s);
  return pack::launch_map(BiasAddOp<float>{static_cast<float*>(a.y), static_cast<const float*>(a.b), a.D},
                          a.rows * a.D, vec, s);
}

cudaError_t bias_backward_cuda(const BiasCudaArgs& a, cudaStream_t s) {
  if (a.rows == 0 || a.D == 0) return cudaSuccess;
  const int64_t chunk_rows = std::max(kMinRowsPerChunk, (a.rows + kMaxChunks - 1) / kMaxChunks);
  const int64_t chunks = (a.rows + chunk_rows - 1) / chunk_rows;
  float* partial = nullptr;
  cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&partial), chunks * a.D * sizeof(float), s);
  if (err != cudaSuccess) return err;
  const unsigned col_blocks = static_cast<unsigned>((a.D + kThreads - 1) / kThreads);
  const dim3 grid(col_blocks, static_cast<unsigned>(chunks));
  if (a.bf16)
    column_partial_kernel<<<grid, kThreads, 0, s>>>(static_cast<const __nv_bfloat16*>(a.dy), partial, a.rows, a.D, chunk_rows);
  else
    column_partial_kernel<<<grid, kThreads, 0, s>>>(static_cast<const float*>(a.dy), partial, a.rows, a.D, chunk_rows);
  column_reduce_kernel<<<col_blocks, kThreads, 0, s>>>(partial, chunks, a.db, a.D);
  err = cudaGetLastError();
  cudaError_t free_err = cudaFreeAsync(partial, s);
  return err != cudaSuccess ? err : free_err;
}

}  // namespace nemotron::ops
