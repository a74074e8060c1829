// CUDA kernel of transpose_blocks.h on raw pointers: block (a, b) of `block_bytes` bytes moves
// from in[(a B + b)] to out[(b A + a)], 16 bytes at a time where the pointers and size allow.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

cudaError_t transpose_blocks_cuda(const void* in, void* out, int64_t A, int64_t B, int64_t block_bytes,
                                  cudaStream_t stream);

}  // namespace nemotron::ops
