// ops::upload_by_params: a host array reaches the device byte for byte in stream order, across
// several launches when it is longer than one kernel's parameters (the grouped GEMM's descriptors
// and pointer arrays travel this way; the grouped_linear op cases check their products).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "ops/param_upload_cuda.h"

namespace nemotron {
namespace {

TEST(ParamUpload, copies_every_byte_across_chunks) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  for (size_t bytes : {size_t{1}, size_t{57}, ops::kParamUploadChunk, 2 * ops::kParamUploadChunk + 13}) {
    std::vector<unsigned char> host(bytes), back(bytes + 8, 0);
    for (size_t i = 0; i < bytes; ++i) host[i] = static_cast<unsigned char>((i * 131 + 7) % 251 + 1);
    unsigned char* dev = nullptr;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev), bytes + 8), cudaSuccess);
    ASSERT_EQ(cudaMemset(dev, 0, bytes + 8), cudaSuccess);
    ASSERT_EQ(ops::upload_by_params(dev, host.data(), bytes, nullptr), cudaSuccess);
    host.assign(bytes, 0);  // the call copied what it needed before returning
    ASSERT_EQ(cudaMemcpy(back.data(), dev, bytes + 8, cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < bytes; ++i)
      ASSERT_EQ(back[i], static_cast<unsigned char>((i * 131 + 7) % 251 + 1)) << "byte " << i << " of " << bytes;
    for (size_t i = bytes; i < bytes + 8; ++i) EXPECT_EQ(back[i], 0) << "written past the end at " << i;
    cudaFree(dev);
  }
}

}  // namespace
}  // namespace nemotron
