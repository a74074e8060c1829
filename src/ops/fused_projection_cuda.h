// CUDA kernels of fused_projection.h on raw pointers; fused_projection_cpu.cpp fills the arguments.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

constexpr int kMaxColumnBlocks = 4;

struct SplitColumnsCudaArgs {
  const void* y = nullptr;  // [rows, total]
  void* outs[kMaxColumnBlocks] = {};
  int64_t widths[kMaxColumnBlocks] = {};  // elements
  int blocks = 0;
  int64_t rows = 0, total = 0;
  int elem_bytes = 2;  // 2 (bfloat16) or 4 (float32)
};
cudaError_t split_columns_cuda(const SplitColumnsCudaArgs& args, cudaStream_t stream);

struct SwigluHalvesCudaArgs {
  const void* gate_up = nullptr;  // [rows, 2F]
  void* out = nullptr;            // [rows, F]
  int64_t rows = 0, F = 0;
  bool bf16 = false;
};
cudaError_t swiglu_halves_forward_cuda(const SwigluHalvesCudaArgs& args, cudaStream_t stream);

}  // namespace nemotron::ops
