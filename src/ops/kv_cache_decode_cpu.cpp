// CPU reference for the paged KV write: one row copy per new token.
#include <initializer_list>
#include <cstring>

#include "core/op_profiler.h"
#include "ops/decode_support.h"
#include "ops/kv_cache_decode.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/kv_cache_decode_cuda.h"
#endif

namespace nemotron::ops {

void kv_cache_write_decode(Context& ctx, const Tensor& src, const Tensor& slot_mapping, Tensor& cache) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  const char* op = "kv_cache_write_decode";
  NM_CHECK(cache.rank() == 4, "{}: cache must be [num_blocks, block_size, nkv, hd], got {}", op, cache.shape().str());
  const int64_t row = cache.dim(2) * cache.dim(3), rows = cache.dim(0) * cache.dim(1);
  NM_CHECK(src.numel() % row == 0, "{}: src {} is not a whole number of [{}, {}] rows", op, src.shape().str(),
           cache.dim(2), cache.dim(3));
  expect_dtype(src, cache.dtype(), op);
  const int64_t n = src.numel() / row;
#if NEMOTRON_CUDA
  if (cache.device().is_cuda()) {
    NM_CHECK(cache.dtype() == DType::f32 || cache.dtype() == DType::bf16, "{} on CUDA: float32 or bfloat16, got {}", op,
             dtype_name(cache.dtype()));
    require_cuda_decode(src, cache.dtype(), "src", op);
    require_cuda_decode(slot_mapping, DType::i32, "slot_mapping", op);
    NM_CHECK(slot_mapping.numel() == n, "{}: slot_mapping must be int32 [{}], got {}", op, n, slot_mapping.describe());
    KvCacheWriteCudaArgs a;
    a.src = src.raw(), a.slot_mapping = static_cast<const int32_t*>(slot_mapping.raw()), a.cache = cache.raw();
    a.n = n, a.row = row, a.rows = rows, a.elem_size = static_cast<int>(dtype_size(cache.dtype()));
    NM_CUDA_CHECK(kv_cache_write_decode_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu_decode(cache, op);
  require_cpu_decode(src, op);
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
