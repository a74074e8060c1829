// Host code for grouped_matmul.h on CUDA (grouped_matmul_cuda.cpp, a .cpp: it uses the core).
#pragma once
#include <vector>

#include "core/context.h"

namespace nemotron::ops {

void grouped_linear_forward_cuda(Context& ctx, const Tensor& x, const std::vector<int64_t>& offsets,
                                 const std::vector<Tensor>& weights, Tensor& y);
bool grouped_linear_counted_on_device_cuda(const Tensor& x, const std::vector<Tensor>& weights, const Tensor& y);
void grouped_linear_forward_counted_cuda(Context& ctx, const Tensor& x, const Tensor& counts,
                                         const std::vector<Tensor>& weights, Tensor& y);
void grouped_linear_backward_cuda(Context& ctx, const Tensor& x, const std::vector<int64_t>& offsets,
                                  const std::vector<Tensor>& weights, const Tensor& dy, Tensor& dx,
                                  std::vector<Tensor>& dweights);

// Which implementation runs the bf16 products. automatic (the default) and ours: our wgmma
// kernel (grouped_gemm_wgmma.h) for y, dx and dW; cublas_grouped: cuBLAS grouped where it can,
// per expert for dW (no grouped kernel with a float32 output); cublas_per_expert: one cuBLAS GEMM
// per expert. Our kernel needs row widths that are multiples of 8 (else cuBLAS runs); float32
// always uses cuBLAS, and so does a GPU other than Hopper (measured on an H200 at the config (b)
// shapes, bench/cuda_moe: ours 1.7x cuBLAS grouped on y and dx, 2.2x cuBLAS per expert on dW).
// The two-argument form sets y/dx and dW separately. For benchmarks and tests;
// grouped_gemm_last_path names what the last call of each kind (y/dx, or dW) actually ran.
enum class GroupedGemmImpl { automatic, ours, cublas_grouped, cublas_per_expert };
void set_grouped_gemm_impl(GroupedGemmImpl impl);
void set_grouped_gemm_impl(GroupedGemmImpl y_dx, GroupedGemmImpl dw);
const char* grouped_gemm_last_path(bool weight_gradient);

}  // namespace nemotron::ops
