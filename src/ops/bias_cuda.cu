// Bias add in 16-byte packs (a whole pack stays in one row when D is a multiple of the pack);
// the bias gradient as a deterministic two-stage column sum (row chunks into float32 partials,
// then the partials in a fixed order), no atomics.
#include <algorithm>

#include "ops/bias_cuda.h"
#include "ops/cuda_pack.cuh"

namespace nemotron::ops {

namespace {

// The column of element i; 32-bit division when the indices fit (64-bit division is slow).
__device__ inline int64_t column(int64_t i, int64_t D, bool small) {
  return small ? static_cast<int64_t>(static_cast<uint32_t>(i) % static_cast<uint32_t>(D)) : i % D;
}

template <class T>
struct BiasAddOp {
  static constexpr int kWidth = pack::pack_width<T>();
  T* y;
  const T* b;
  int64_t D;
  bool small;
  __device__ void operator()(int64_t i, int count, bool whole) const {
    float v[kWidth], c[kWidth];
    pack::load(y + i, count, whole, v);
    if (whole) {  // vec implies D % kWidth == 0: the pack's columns are contiguous in b
      pack::load_vec<kWidth>(b + column(i, D, small), c);
    } else {
#pragma unroll
      for (int k = 0; k < kWidth; ++k) c[k] = k < count ? pack::to_f(b[column(i + k, D, small)]) : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < kWidth; ++k) v[k] += c[k];
    pack::store(y + i, count, whole, v);
  }
};

constexpr int64_t kMinRowsPerChunk = 64;
constexpr int64_t kMaxChunks = 65535;  // the grid's y limit
constexpr int kThreads = 256;

// partial[chunk, cols] = sum of dy[r, cols] over the chunk's rows. Each thread owns W adjacent
// columns (one 16-byte load per row when vec; W = 1 otherwise), threads run along the row.
template <class T, int W>
__global__ void column_partial_kernel(const T* dy, float* partial, int64_t rows, int64_t D, int64_t chunk_rows) {
  const int64_t c0 = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) * W;
  if (c0 >= D) return;
  const int64_t r0 = blockIdx.y * chunk_rows;
  const int64_t r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
  float acc[W] = {};
#pragma unroll 4
  for (int64_t r = r0; r < r1; ++r) {
    float v[W];
    if constexpr (W == 1) v[0] = pack::to_f(dy[r * D + c0]);
    else pack::load_vec<W>(dy + r * D + c0, v);
#pragma unroll
    for (int k = 0; k < W; ++k) acc[k] += v[k];
  }
#pragma unroll
  for (int k = 0; k < W; ++k) partial[blockIdx.y * D + c0 + k] = acc[k];
}

// db[i] += sum over chunks of partial[c, i]: 32 columns x 8 lanes per block; lane l sums chunks
// l, l + 8, ... (coalesced across columns), then lane 0 adds the 8 lane sums in order.
constexpr int kReduceCols = 32, kReduceLanes = kThreads / kReduceCols;

__global__ void column_reduce_kernel(const float* partial, int64_t chunks, float* db, int64_t D) {
  __shared__ float lane_sum[kReduceLanes][kReduceCols];
  const int col = threadIdx.x % kReduceCols, lane = threadIdx.x / kReduceCols;
  const int64_t i = blockIdx.x * static_cast<int64_t>(kReduceCols) + col;
  float acc = 0;
  if (i < D)
    for (int64_t c = lane; c < chunks; c += kReduceLanes) acc += partial[c * D + i];
  lane_sum[lane][col] = acc;
  __syncthreads();
  if (lane == 0 && i < D) {
    float total = 0;
#pragma unroll
    for (int l = 0; l < kReduceLanes; ++l) total += lane_sum[l][col];
    db[i] += total;
  }
}

template <class T>
void launch_partial(const T* dy, float* partial, int64_t rows, int64_t D, int64_t chunk_rows, int64_t chunks,
                    cudaStream_t s) {
  constexpr int W = pack::pack_width<T>();
  const bool vec = D % W == 0 && pack::aligned16(dy);
  const int64_t threads_per_row = vec ? D / W : D;
  const dim3 grid(static_cast<unsigned>((threads_per_row + kThreads - 1) / kThreads), static_cast<unsigned>(chunks));
  if (vec) column_partial_kernel<T, W><<<grid, kThreads, 0, s>>>(dy, partial, rows, D, chunk_rows);
  else column_partial_kernel<T, 1><<<grid, kThreads, 0, s>>>(dy, partial, rows, D, chunk_rows);
}

}  // namespace

cudaError_t bias_add_cuda(const BiasCudaArgs& a, cudaStream_t s) {
  const int64_t n = a.rows * a.D;
  const bool small = n < (int64_t{1} << 32);
  auto run = [&](auto zero) {
    using T = decltype(zero);
    const bool vec = a.D % BiasAddOp<T>::kWidth == 0 && pack::aligned16(a.y) && pack::aligned16(a.b);
    return pack::launch_map(BiasAddOp<T>{static_cast<T*>(a.y), static_cast<const T*>(a.b), a.D, small}, n, vec, s);
  };
  return a.bf16 ? run(__nv_bfloat16{}) : run(float{});
}

cudaError_t bias_backward_cuda(const BiasCudaArgs& a, cudaStream_t s) {
  if (a.rows == 0 || a.D == 0) return cudaSuccess;
  const int64_t chunk_rows = std::max(kMinRowsPerChunk, (a.rows + kMaxChunks - 1) / kMaxChunks);
  const int64_t chunks = (a.rows + chunk_rows - 1) / chunk_rows;
  float* partial = nullptr;
  cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&partial), chunks * a.D * sizeof(float), s);
  if (err != cudaSuccess) return err;
  if (a.bf16) launch_partial(static_cast<const __nv_bfloat16*>(a.dy), partial, a.rows, a.D, chunk_rows, chunks, s);
  else launch_partial(static_cast<const float*>(a.dy), partial, a.rows, a.D, chunk_rows, chunks, s);
  const unsigned col_blocks = static_cast<unsigned>((a.D + kReduceCols - 1) / kReduceCols);
  column_reduce_kernel<<<col_blocks, kThreads, 0, s>>>(partial, chunks, a.db, a.D);
  err = cudaGetLastError();
  cudaError_t free_err = cudaFreeAsync(partial, s);
  return err != cudaSuccess ? err : free_err;
}

}  // namespace nemotron::ops
