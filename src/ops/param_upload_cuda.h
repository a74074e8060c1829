// Small host arrays (a grouped GEMM's problem descriptors, expert weight pointers) to the device
// through kernel parameters instead of a cudaMemcpyAsync from pageable memory. A pageable upload
// is staged by the driver on the host and queued as a copy that the next kernel waits behind; a
// kernel launch carries its parameters with it, so the upload is one more small kernel in the
// stream and the host array may be freed as soon as the call returns. Raw pointers, no C++ core.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

namespace nemotron::ops {

// Copies `bytes` bytes from host memory to device memory `dst`, in stream order (one launch per
// kParamUploadChunk bytes).
constexpr size_t kParamUploadChunk = 4000;  // with the other parameters, under the 4 KiB every CUDA 12 accepts
cudaError_t upload_by_params(void* dst, const void* host, size_t bytes, cudaStream_t stream);

}  // namespace nemotron::ops
