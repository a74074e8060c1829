// CUDA kernels of dt_softplus.h on raw pointers (no C++ core here: nvcc compiles only kernels).
// dt_raw, dt_bias and d_dt_raw are float32 or bfloat16 (`bf16`); dt and ddt are float32
// (stat_dtype: the scan's decay exp(dt A) needs the precision); d_dt_bias is float32, accumulated.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

struct DtSoftplusCudaArgs {
  const void* dt_raw = nullptr;  // [rows, nH]
  const void* dt_bias = nullptr; // [nH]
  float* dt = nullptr;           // [rows, nH]
  const float* ddt = nullptr;
  void* d_dt_raw = nullptr;      // overwritten
  float* d_dt_bias = nullptr;    // +=
  int64_t rows = 0, nH = 0;
  float lo = 0.0f, hi = 0.0f;    // hi may be +inf
  bool bf16 = false;
};

cudaError_t dt_softplus_forward_cuda(const DtSoftplusCudaArgs& a, cudaStream_t stream);
cudaError_t dt_softplus_backward_cuda(const DtSoftplusCudaArgs& a, cudaStream_t stream);

}  // namespace nemotron::ops
