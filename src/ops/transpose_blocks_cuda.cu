// transpose_blocks on the GPU: one thread block per moved block, a plain strided copy in the
// widest unit the alignment allows (a pure move: bandwidth bound, nothing to fuse).
#include "ops/transpose_blocks_cuda.h"

namespace nemotron::ops {

namespace {

template <class U>
__global__ void transpose_blocks_kernel(const U* in, U* out, int64_t A, int64_t B, int64_t units) {
  const int64_t dst = blockIdx.x;  // = b * A + a
  const int64_t b = dst / A, a = dst % A;
  const U* s = in + (a * B + b) * units;
  U* d = out + dst * units;
  for (int64_t i = threadIdx.x; i < units; i += blockDim.x) d[i] = s[i];
}

template <class U>
cudaError_t launch(const void* in, void* out, int64_t A, int64_t B, int64_t block_bytes, cudaStream_t s) {
  const int64_t units = block_bytes / static_cast<int64_t>(sizeof(U));
  transpose_blocks_kernel<U><<<static_cast<unsigned>(A * B), 256, 0, s>>>(static_cast<const U*>(in), static_cast<U*>(out),
                                                                          A, B, units);
  return cudaGetLastError();
}

bool fits(const void* in, const void* out, int64_t block_bytes, size_t unit) {
  return block_bytes % static_cast<int64_t>(unit) == 0 && reinterpret_cast<uintptr_t>(in) % unit == 0 &&
         reinterpret_cast<uintptr_t>(out) % unit == 0;
}

}  // namespace

cudaError_t transpose_blocks_cuda(const void* in, void* out, int64_t A, int64_t B, int64_t block_bytes,
                                  cudaStream_t s) {
  if (A * B == 0 || block_bytes == 0) return cudaSuccess;
  if (A * B > 0x7fffffff) return cudaErrorInvalidValue;
  if (fits(in, out, block_bytes, 16)) return launch<int4>(in, out, A, B, block_bytes, s);
  if (fits(in, out, block_bytes, 4)) return launch<uint32_t>(in, out, A, B, block_bytes, s);
  if (fits(in, out, block_bytes, 2)) return launch<uint16_t>(in, out, A, B, block_bytes, s);
  return launch<unsigned char>(in, out, A, B, block_bytes, s);
}

}  // namespace nemotron::ops
