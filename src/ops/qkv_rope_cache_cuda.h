// CUDA kernel of qkv_rope_cache.h on raw pointers (free of the C++ core). qkv, q and the caches
// are float32 or bfloat16 (`bf16`); position_ids and slot_mapping are int32 on the device.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/rope_freq.h"

namespace nemotron::ops {

struct QkvRopeCacheCudaArgs {
  const void* qkv = nullptr;               // [n, (nq + 2 nkv) hd]
  const int32_t* position_ids = nullptr;   // [n]
  const int32_t* slot_mapping = nullptr;   // [n], cache row of each token
  void* q = nullptr;                       // [n, nq, hd]
  void* k_cache = nullptr;                 // [rows, nkv, hd]
  void* v_cache = nullptr;
  int64_t n = 0, nq = 0, nkv = 0, hd = 0, rows = 0;
  bool rope = true;  // false: k and q are copied unrotated
  RopeFreq freq;
  bool bf16 = false;
};

// A token whose slot_mapping lies outside [0, rows) writes nothing to the caches (as
// kv_cache_write_decode_cuda); its q row is still written.
cudaError_t qkv_rope_cache_write_cuda(const QkvRopeCacheCudaArgs& a, cudaStream_t stream);

}  // namespace nemotron::ops
