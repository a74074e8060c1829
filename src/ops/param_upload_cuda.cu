#include "ops/param_upload_cuda.h"

#include <cstring>

namespace nemotron::ops {

namespace {

struct Chunk {
  unsigned char bytes[kParamUploadChunk];
};

__global__ void upload_kernel(unsigned char* dst, const __grid_constant__ Chunk chunk, unsigned n) {
  for (unsigned i = threadIdx.x; i < n; i += blockDim.x) dst[i] = chunk.bytes[i];
}

}  // namespace

cudaError_t upload_by_params(void* dst, const void* host, size_t bytes, cudaStream_t stream) {
  Chunk chunk;
  for (size_t at = 0; at < bytes; at += kParamUploadChunk) {
    const size_t n = bytes - at < kParamUploadChunk ? bytes - at : kParamUploadChunk;
    std::memcpy(chunk.bytes, static_cast<const unsigned char*>(host) + at, n);
    upload_kernel<<<1, 256, 0, stream>>>(static_cast<unsigned char*>(dst) + at, chunk, static_cast<unsigned>(n));
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace nemotron::ops
