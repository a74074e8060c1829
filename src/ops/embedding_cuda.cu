// Embedding kernels, for a whole vocabulary or the rows [vocab_begin, vocab_begin + V) of one
// (tensor parallelism). Forward: one block per token copies its row (16-byte vectors when the row
// allows), or zeroes it when the id is another rank's. Backward, deterministic without atomics on
// dw: keys (local row << 32 | position) are sorted with a bitonic sort (shared-memory stages up
// to 2048 keys, global stages above), then each run of equal rows is one segment whose rows of dy
// are summed in position order in float32 and added to dw[row]. Out-of-range ids are recorded
// (atomicMin of the position) and read back once.
#include <cuda_bf16.h>

#include "ops/embedding_cuda.h"
#include "ops/cuda_vec_io.cuh"

namespace nemotron::ops {

namespace {

using u64 = unsigned long long;
constexpr u64 kNone = ~0ull;
constexpr int kSortBlock = 2048;  // keys per shared-memory sort block (1024 threads, one pair each)

using vec_io::to_f;

__device__ inline int64_t id_at(const void* ids, bool ids64, int64_t n) {
  return ids64 ? static_cast<const int64_t*>(ids)[n] : static_cast<const int32_t*>(ids)[n];
}

// Copies row ids[n] - begin of w to row n of y in units of U (a type whose size divides the row
// bytes); a row outside w (another rank's part of the vocabulary) is zero.
template <class U>
__global__ void forward_kernel(const void* ids, bool ids64, const U* w, U* y, int64_t units, int64_t V, int64_t begin,
                               int64_t vocab_size, u64* bad) {
  const int64_t n = blockIdx.x;
  const int64_t id = id_at(ids, ids64, n);
  if (bad && (id < 0 || id >= vocab_size)) {
    if (threadIdx.x == 0) atomicMin(bad, static_cast<u64>(n));
    return;
  }
  const int64_t local = id - begin;
  U* dst = y + n * units;
  if (local < 0 || local >= V) {  // another rank's row, or (no flag) an id the caller let through
    for (int64_t i = threadIdx.x; i < units; i += blockDim.x) dst[i] = U{};
    return;
  }
  const U* src = w + local * units;
  for (int64_t i = threadIdx.x; i < units; i += blockDim.x) dst[i] = src[i];
}

// Keys (local row << 32 | position) of the ids inside w's rows [begin, begin + V).
__global__ void make_keys_kernel(const void* ids, bool ids64, int64_t N, int64_t P, int64_t V, int64_t begin,
                                 int64_t vocab_size, u64* keys, u64* bad) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= P) return;
  u64 key = kNone;  // padding, bad ids and other ranks' rows sort last and are skipped
  if (i < N) {
    const int64_t id = id_at(ids, ids64, i);
    const int64_t local = id - begin;
    if (id < 0 || id >= vocab_size) atomicMin(bad, static_cast<u64>(i));
    else if (local >= 0 && local < V) key = (static_cast<u64>(local) << 32) | static_cast<u64>(i);
  }
  keys[i] = key;
}

__device__ inline void compare_swap(u64& a, u64& b, bool ascending) {
  if ((a > b) == ascending) {
    u64 t = a;
    a = b;
    b = t;
  }
}

// All bitonic stages k = 2..kmax on blocks of `len` = min(kSortBlock, P) keys in shared memory.
__global__ void sort_local_kernel(u64* keys, int len) {
  __shared__ u64 s[kSortBlock];
  const int64_t base = blockIdx.x * static_cast<int64_t>(len);
  for (int i = threadIdx.x; i < len; i += blockDim.x) s[i] = keys[base + i];
  __syncthreads();
  for (int k = 2; k <= len; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int t = threadIdx.x; t < len / 2; t += blockDim.x) {
        const int i = 2 * j * (t / j) + (t % j);
        compare_swap(s[i], s[i + j], ((base + i) & k) == 0);
      }
      __syncthreads();
    }
  }
  for (int i = threadIdx.x; i < len; i += blockDim.x) keys[base + i] = s[i];
}

// Stages j = kSortBlock/2 .. 1 of merge size k, in shared memory.
__global__ void merge_local_kernel(u64* keys, int64_t k) {
  __shared__ u64 s[kSortBlock];
  const int64_t base = blockIdx.x * static_cast<int64_t>(kSortBlock);
  for (int i = threadIdx.x; i < kSortBlock; i += blockDim.x) s[i] = keys[base + i];
  __syncthreads();
  for (int j = kSortBlock >> 1; j > 0; j >>= 1) {
    for (int t = threadIdx.x; t < kSortBlock / 2; t += blockDim.x) {
      const int i = 2 * j * (t / j) + (t % j);
      compare_swap(s[i], s[i + j], ((base + i) & k) == 0);
    }
    __syncthreads();
  }
  for (int i = threadIdx.x; i < kSortBlock; i += blockDim.x) keys[base + i] = s[i];
}

__global__ void merge_global_kernel(u64* keys, int64_t P, int64_t k, int64_t j) {
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (t >= P / 2) return;
  const int64_t i = 2 * j * (t / j) + (t % j);
  u64 a = keys[i], b = keys[i + j];
  compare_swap(a, b, (i & k) == 0);
  keys[i] = a, keys[i + j] = b;
}

__device__ inline int64_t key_id(u64 key) { return static_cast<int64_t>(key >> 32); }

// Segment starts (first sorted key of each distinct id), in any order: each segment is summed
// on its own, so the order of the list does not change any result.
__global__ void segment_starts_kernel(const u64* keys, int64_t N, int* starts, int* count) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= N || keys[i] == kNone) return;
  if (i == 0 || key_id(keys[i - 1]) != key_id(keys[i])) starts[atomicAdd(count, 1)] = static_cast<int>(i);
}

template <class T>
__global__ void accumulate_kernel(const u64* keys, const int* starts, const int* count, int64_t N, const T* dy,
                                  float* dw, int64_t D) {
  const int64_t col = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (col >= D) return;
  const int segments = *count;
  for (int s = blockIdx.y; s < segments; s += gridDim.y) {
    int64_t i = starts[s];
    const u64 first = keys[i];
    const int64_t id = key_id(first);
    float acc = 0;
    for (; i < N && keys[i] != kNone && key_id(keys[i]) == id; ++i) {
      const int64_t pos = static_cast<int64_t>(keys[i] & 0xffffffffull);
      acc += to_f(dy[pos * D + col]);
    }
    dw[id * D + col] += acc;
  }
}

cudaError_t read_bad(u64* bad, cudaStream_t s, int64_t* bad_position) {
  u64 host = kNone;
  cudaError_t err = cudaMemcpyAsync(&host, bad, sizeof(u64), cudaMemcpyDeviceToHost, s);
  if (err == cudaSuccess) err = cudaStreamSynchronize(s);
  *bad_position = host == kNone ? -1 : static_cast<int64_t>(host);
  return err;
}

cudaError_t new_flag(u64** bad, cudaStream_t s) {
  cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(bad), sizeof(u64), s);
  if (err != cudaSuccess) return err;
  return cudaMemsetAsync(*bad, 0xff, sizeof(u64), s);  // kNone
}

}  // namespace

cudaError_t embedding_forward_cuda(const EmbeddingCudaArgs& a, cudaStream_t s, int64_t* bad_position) {
  if (bad_position) *bad_position = -1;
  if (a.N == 0 || a.D == 0) return cudaSuccess;
  u64* bad = nullptr;
  cudaError_t err = bad_position ? new_flag(&bad, s) : cudaSuccess;
  if (err != cudaSuccess) return err;
  const int64_t row_bytes = a.D * (a.bf16 ? 2 : 4);
  const bool aligned16 = row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(a.w) % 16 == 0 &&
                         reinterpret_cast<uintptr_t>(a.y) % 16 == 0;
  const unsigned grid = static_cast<unsigned>(a.N);
  if (aligned16) {
    forward_kernel<int4><<<grid, 128, 0, s>>>(a.ids, a.ids64, static_cast<const int4*>(a.w), static_cast<int4*>(a.y),
                                             row_bytes / 16, a.V, a.vocab_begin, a.vocab_size, bad);
  } else if (row_bytes % 4 == 0) {
    forward_kernel<uint32_t><<<grid, 128, 0, s>>>(a.ids, a.ids64, static_cast<const uint32_t*>(a.w),
                                                 static_cast<uint32_t*>(a.y), row_bytes / 4, a.V, a.vocab_begin,
                                                 a.vocab_size, bad);
  } else {
    forward_kernel<uint16_t><<<grid, 128, 0, s>>>(a.ids, a.ids64, static_cast<const uint16_t*>(a.w),
                                                 static_cast<uint16_t*>(a.y), row_bytes / 2, a.V, a.vocab_begin,
                                                 a.vocab_size, bad);
  }
  err = cudaGetLastError();
  if (!bad_position) return err;
  if (err == cudaSuccess) err = read_bad(bad, s, bad_position);
  cudaError_t free_err = cudaFreeAsync(bad, s);
  return err != cudaSuccess ? err : free_err;
}

cudaError_t embedding_backward_cuda(const EmbeddingCudaArgs& a, cudaStream_t s, int64_t* bad_position) {
  if (bad_position) *bad_position = -1;
  if (a.N == 0 || a.D == 0) return cudaSuccess;
  if (a.N >= (int64_t{1} << 31) || a.V >= (int64_t{1} << 31)) return cudaErrorInvalidValue;  // 32-bit key halves
  int64_t P = 1;
  while (P < a.N) P <<= 1;
  // One scratch block: flag, segment count, keys [P], starts [N].
  const size_t bytes = sizeof(u64) * (2 + P) + sizeof(int) * a.N;
  char* scratch = nullptr;
  cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&scratch), bytes, s);
  if (err != cudaSuccess) return err;
  u64* bad = reinterpret_cast<u64*>(scratch);
  int* count = reinterpret_cast<int*>(scratch + sizeof(u64));
  u64* keys = reinterpret_cast<u64*>(scratch + 2 * sizeof(u64));
  int* starts = reinterpret_cast<int*>(keys + P);
  err = cudaMemsetAsync(bad, 0xff, sizeof(u64), s);
  if (err == cudaSuccess) err = cudaMemsetAsync(count, 0, sizeof(int), s);
  if (err == cudaSuccess) {
    make_keys_kernel<<<static_cast<unsigned>((P + 255) / 256), 256, 0, s>>>(a.ids, a.ids64, a.N, P, a.V, a.vocab_begin,
                                                                              a.vocab_size, keys, bad);
    const int len = static_cast<int>(P < kSortBlock ? P : kSortBlock);
    sort_local_kernel<<<static_cast<unsigned>(P / len), 1024, 0, s>>>(keys, len);
    for (int64_t k = 2 * kSortBlock; k <= P; k <<= 1) {
      for (int64_t j = k >> 1; j >= kSortBlock; j >>= 1)
        merge_global_kernel<<<static_cast<unsigned>((P / 2 + 255) / 256), 256, 0, s>>>(keys, P, k, j);
      merge_local_kernel<<<static_cast<unsigned>(P / kSortBlock), 1024, 0, s>>>(keys, k);
    }
    segment_starts_kernel<<<static_cast<unsigned>((a.N + 255) / 256), 256, 0, s>>>(keys, a.N, starts, count);
    const unsigned seg_blocks = static_cast<unsigned>(a.N < 2048 ? a.N : 2048);
    const dim3 grid(static_cast<unsigned>((a.D + 127) / 128), seg_blocks);
    if (a.bf16)
      accumulate_kernel<__nv_bfloat16><<<grid, 128, 0, s>>>(keys, starts, count, a.N,
                                                            static_cast<const __nv_bfloat16*>(a.dy), a.dw, a.D);
    else
      accumulate_kernel<float><<<grid, 128, 0, s>>>(keys, starts, count, a.N, static_cast<const float*>(a.dy), a.dw,
                                                    a.D);
    err = cudaGetLastError();
  }
  if (err == cudaSuccess && bad_position) err = read_bad(bad, s, bad_position);
  cudaError_t free_err = cudaFreeAsync(scratch, s);
  return err != cudaSuccess ? err : free_err;
}

}  // namespace nemotron::ops
