// CPU reference for the paged KV write: one row copy per new token.
#include <initializer_list>
#include <cstring>

#include "core/op_profiler.h"
#include "ops/decode_support.h"
#include "ops/kv_cache_decode.h"

namespace nemotron::ops {

void kv_cache_write_decode(Context& ctx, const Tensor& src, const Tensor& slot_mapping, Tensor& cache) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  const char* op = "kv_cache_write_decode";
  NM_CHECK(cache.rank() == 4, "{}: cache must be [num_blocks, block_size, nkv, hd], got {}", op, cache.shape().str());
  const int64_t row = cache.dim(2) * cache.dim(3), rows = cache.dim(0) * cache.dim(1);
  NM_CHECK(src.numel() % row == 0, "{}: src {} is not a whole number of [{}, {}] rows", op, src.shape().str(),
           cache.dim(2), cache.dim(3));
  expect_dtype(src, cache.dtype(), op);
  require_cpu_decode(cache, op);
  require_cpu_decode(src, op);
  const int64_t n = src.numel() / row;
  std::vector<int32_t> map = decode_index_vector(slot_mapping, n, "slot_mapping", op);
  const size_t bytes = static_cast<size_t>(row) * dtype_size(cache.dtype());
  const char* s = static_cast<const char*>(src.raw());
  char* c = static_cast<char*>(cache.raw());
  for (int64_t t = 0; t < n; ++t) {
    NM_CHECK(map[t] >= 0 && map[t] < rows, "{}: slot_mapping[{}] = {} outside the cache's {} rows", op, t, map[t], rows);
    std::memcpy(c + static_cast<size_t>(map[t]) * bytes, s + static_cast<size_t>(t) * bytes, bytes);
  }
}

}  // namespace nemotron::ops
