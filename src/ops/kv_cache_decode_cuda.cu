// Paged KV write: one thread per element of the new rows, copied as raw elements (no conversion:
// src and cache share the dtype).
#include "ops/kv_cache_decode_cuda.h"

namespace nemotron::ops {

namespace {

constexpr int kThreads = 256;

template <class E>
__global__ void kv_write_kernel(const E* __restrict__ src, const int32_t* __restrict__ map, E* __restrict__ cache,
                                int64_t n, int64_t row, int64_t rows) {
  const int64_t idx = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  if (idx >= n * row) return;
  const int64_t t = idx / row, e = idx % row;
  const int64_t dst = map[t];
  if (dst < 0 || dst >= rows) return;
  cache[dst * row + e] = src[idx];
}

}  // namespace

cudaError_t kv_cache_write_decode_cuda(const KvCacheWriteCudaArgs& a, cudaStream_t s) {
  const int64_t total = a.n * a.row;
  if (total == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>((total + kThreads - 1) / kThreads);
  if (a.elem_size == 2)
    kv_write_kernel<uint16_t><<<blocks, kThreads, 0, s>>>(static_cast<const uint16_t*>(a.src), a.slot_mapping,
                                                          static_cast<uint16_t*>(a.cache), a.n, a.row, a.rows);
  else if (a.elem_size == 4)
    kv_write_kernel<uint32_t><<<blocks, kThreads, 0, s>>>(static_cast<const uint32_t*>(a.src), a.slot_mapping,
                                                          static_cast<uint32_t*>(a.cache), a.n, a.row, a.rows);
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

}  // namespace nemotron::ops
