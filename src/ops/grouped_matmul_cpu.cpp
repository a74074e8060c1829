// CPU reference for the grouped expert GEMMs: one matmul per non-empty expert on its row block.
#include "ops/grouped_matmul.h"

#include "core/op_profiler.h"
#include "ops/dispatch.h"
#include "ops/matmul.h"
#if NEMOTRON_CUDA
#include "ops/grouped_matmul_cuda.h"
#endif

namespace nemotron::ops {

namespace {

void check_groups(const Tensor& x, const std::vector<int64_t>& offsets, const std::vector<Tensor>& weights,
                  int64_t out, const char* what) {
  NM_CHECK(x.rank() == 2, "{}: x must be [S, in], got {}", what, x.shape().str());
  NM_CHECK(offsets.size() == weights.size() + 1, "{}: {} offsets for {} experts", what, offsets.size(),
           weights.size());
  NM_CHECK(offsets.front() == 0 && offsets.back() == x.dim(0), "{}: offsets span [{}, {}) of {} rows", what,
           offsets.front(), offsets.back(), x.dim(0));
  for (size_t e = 0; e < weights.size(); ++e) {
    NM_CHECK(offsets[e] <= offsets[e + 1], "{}: offsets decrease at expert {}", what, e);
    expect_shape(weights[e], {out, x.dim(1)}, "grouped_linear expert weight");
    expect_same_device(weights[e], x, "grouped_linear expert weight");
  }
}

}  // namespace

void grouped_linear_forward(Context& ctx, const Tensor& x, const std::vector<int64_t>& offsets,
                            const std::vector<Tensor>& weights, Tensor& y) {
  OpScope scope(ctx, OpPhase::gemm, __func__);
  NM_CHECK(y.rank() == 2 && y.dim(0) == x.dim(0), "grouped_linear_forward: y {} for x {}", y.shape().str(),
           x.shape().str());
  check_groups(x, offsets, weights, y.dim(1), "grouped_linear_forward");
#if NEMOTRON_CUDA
  if (x.device().is_cuda()) {
    profile_gemm_flops(ctx, 2.0 * static_cast<double>(x.dim(0)) * static_cast<double>(x.dim(1) * y.dim(1)));
    grouped_linear_forward_cuda(ctx, x, offsets, weights, y);
    return;
  }
#endif
  require_cpu(x, "grouped_linear_forward");
  for (size_t e = 0; e < weights.size(); ++e) {
    if (offsets[e] == offsets[e + 1]) continue;
    Tensor ye = y.slice(offsets[e], offsets[e + 1]);
    matmul(ctx, x.slice(offsets[e], offsets[e + 1]), false, weights[e], true, ye);
  }
}

bool grouped_linear_counted_on_device(const Tensor& x, const std::vector<Tensor>& weights, const Tensor& y) {
#if NEMOTRON_CUDA
  if (x.device().is_cuda()) return grouped_linear_counted_on_device_cuda(x, weights, y);
#endif
  (void)x, (void)weights, (void)y;
  return false;
}

void grouped_linear_forward_counted(Context& ctx, const Tensor& x, const Tensor& counts,
                                    const std::vector<Tensor>& weights, Tensor& y) {
  const int64_t E = static_cast<int64_t>(weights.size());
  NM_CHECK(counts.rank() == 1 && counts.dim(0) == E, "grouped_linear_forward_counted: counts {} for {} experts",
           counts.shape().str(), E);
  expect_dtype(counts, DType::i32, "grouped_linear_forward_counted counts");
  if (grouped_linear_counted_on_device(x, weights, y)) {
#if NEMOTRON_CUDA
    OpScope scope(ctx, OpPhase::gemm, __func__);
    NM_CHECK(x.rank() == 2 && y.rank() == 2 && y.dim(0) == x.dim(0), "grouped_linear_forward_counted: y {} for x {}",
             y.shape().str(), x.shape().str());
    for (const Tensor& w : weights) expect_shape(w, {y.dim(1), x.dim(1)}, "grouped_linear expert weight");
    profile_gemm_flops(ctx, 2.0 * static_cast<double>(x.dim(0)) * static_cast<double>(x.dim(1) * y.dim(1)));
    grouped_linear_forward_counted_cuda(ctx, x, counts, weights, y);
    return;
#endif
  }
  // The reference: the counts on the host as offsets.
  const Tensor host = counts.to_host(DType::i32);
  std::vector<int64_t> offsets(1, 0);
  for (int64_t e = 0; e < E; ++e) offsets.push_back(offsets.back() + host.data<int32_t>()[e]);
  grouped_linear_forward(ctx, x, offsets, weights, y);
}

void grouped_linear_backward(Context& ctx, const Tensor& x, const std::vector<int64_t>& offsets,
                             const std::vector<Tensor>& weights, const Tensor& dy, Tensor& dx,
                             std::vector<Tensor>& dweights) {
  OpScope scope(ctx, OpPhase::gemm, __func__);
  NM_CHECK(dy.rank() == 2 && dy.dim(0) == x.dim(0), "grouped_linear_backward: dy {} for x {}", dy.shape().str(),
           x.shape().str());
  check_groups(x, offsets, weights, dy.dim(1), "grouped_linear_backward");
  NM_CHECK(dweights.empty() || dweights.size() == weights.size(),
           "grouped_linear_backward: {} weight gradients for {} experts", dweights.size(), weights.size());
  for (size_t e = 0; e < dweights.size(); ++e) expect_shape(dweights[e], weights[e].shape(), "grouped_linear dW");
  if (dx.defined()) expect_shape(dx, x.shape(), "grouped_linear dx");
#if NEMOTRON_CUDA
  if (x.device().is_cuda()) {  // dW, and dx when asked (the CPU path counts in matmul)
    profile_gemm_flops(ctx, ((dx.defined() ? 2.0 : 0.0) + (dweights.empty() ? 0.0 : 2.0)) *
                                static_cast<double>(x.dim(0)) * static_cast<double>(x.dim(1) * dy.dim(1)));
    grouped_linear_backward_cuda(ctx, x, offsets, weights, dy, dx, dweights);
    return;
  }
#endif
  require_cpu(x, "grouped_linear_backward");
  for (size_t e = 0; e < weights.size(); ++e) {
    const int64_t a = offsets[e], b = offsets[e + 1];
    if (a == b) continue;
    Tensor dye = dy.slice(a, b);
    if (dx.defined()) {
      Tensor dxe = dx.slice(a, b);
      matmul(ctx, dye, false, weights[e], false, dxe);
    }
    if (!dweights.empty()) matmul(ctx, dye, true, x.slice(a, b), false, dweights[e], 1.0, 1.0);
  }
}

}  // namespace nemotron::ops
