// cuBLAS host code for grouped_matmul.h (grouped_matmul_cuda.cpp, a .cpp: it uses the core).
#pragma once
#include <vector>

#include "core/context.h"

namespace nemotron::ops {

void grouped_linear_forward_cuda(Context& ctx, const Tensor& x, const std::vector<int64_t>& offsets,
                                 const std::vector<Tensor>& weights, Tensor& y);
void grouped_linear_backward_cuda(Context& ctx, const Tensor& x, const std::vector<int64_t>& offsets,
                                  const std::vector<Tensor>& weights, const Tensor& dy, Tensor& dx,
                                  std::vector<Tensor>& dweights);

// For benchmarks: force one cuBLAS GEMM per expert instead of the grouped call, and report which
// path the last call of each kind took ("grouped" or "per-expert").
void grouped_gemm_force_per_expert(bool on);
const char* grouped_gemm_last_path(bool weight_gradient);

}  // namespace nemotron::ops
