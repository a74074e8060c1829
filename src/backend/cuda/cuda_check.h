// Error checks for CUDA runtime and cuBLAS calls: a failure throws nemotron::Error naming the
// call, the error string and where it was made.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "core/error.h"

namespace nemotron::cuda {

[[noreturn]] void throw_cuda_error(const char* call, cudaError_t err, const char* file, int line);
[[noreturn]] void throw_cublas_error(const char* call, cublasStatus_t st, const char* file, int line);

}  // namespace nemotron::cuda

#define NM_CUDA_CHECK(call)                                                                    \
  do {                                                                                         \
    cudaError_t nm_err_ = (call);                                                              \
    if (nm_err_ != cudaSuccess) ::nemotron::cuda::throw_cuda_error(#call, nm_err_, __FILE__, __LINE__); \
  } while (0)

#define NM_CUBLAS_CHECK(call)                                                                  \
  do {                                                                                         \
    cublasStatus_t nm_st_ = (call);                                                            \
    if (nm_st_ != CUBLAS_STATUS_SUCCESS)                                                       \
      ::nemotron::cuda::throw_cublas_error(#call, nm_st_, __FILE__, __LINE__);                 \
  } while (0)
