// CUDA kernel of kv_cache_decode.h on raw pointers (free of the C++ core). src and cache hold
// elements of `elem_size` bytes (2 or 4: bfloat16 or float32); slot_mapping is int32 on the device.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

struct KvCacheWriteCudaArgs {
  const void* src = nullptr;              // [n, row]
  const int32_t* slot_mapping = nullptr;  // [n], cache row of each new token
  void* cache = nullptr;                  // [rows, row]
  int64_t n = 0, row = 0, rows = 0;
  int elem_size = 4;
};

// A token whose slot_mapping lies outside [0, rows) is not written (the CPU entry validates the
// mapping; here it is never read back to the host, so the kernel only refuses to write out of bounds).
cudaError_t kv_cache_write_decode_cuda(const KvCacheWriteCudaArgs& a, cudaStream_t stream);

}  // namespace nemotron::ops
