// CUDA kernels of elementwise.h and cast.h on raw pointers (float32 or bfloat16 storage, float32
// arithmetic). The dispatch in elementwise_cpu.cpp / cast_cpu.cpp fills the arguments.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

struct ElementwiseCudaArgs {
  const void* a = nullptr;
  const void* b = nullptr;
  void* out = nullptr;  // may be a (in place)
  int64_t n = 0;
  bool bf16 = false;
};

cudaError_t add_cuda(const ElementwiseCudaArgs& args, cudaStream_t stream);  // out = a + b
cudaError_t scale_cuda(const ElementwiseCudaArgs& args, float s, cudaStream_t stream);  // out = s a

struct CastCudaArgs {
  const void* src = nullptr;
  void* dst = nullptr;
  int64_t n = 0;
  bool src_bf16 = false, dst_bf16 = false;  // else float32
};

cudaError_t cast_cuda(const CastCudaArgs& args, cudaStream_t stream);

}  // namespace nemotron::ops
