// Grouped expert GEMMs: y = x W_e^T per expert row block, dx, and dW_e accumulated onto a non-zero
// starting gradient; odd widths, uneven groups and experts without rows.
#include "harness.h"
#include "ops/grouped_matmul.h"
#if NEMOTRON_CUDA
#include "ops/grouped_matmul_cuda.h"
#endif

namespace nemotron::testing {
namespace {

// Which CUDA implementation a case runs (grouped_matmul_cuda.h): by default our wgmma kernel for
// bf16 widths that are multiples of 8, `cublas` cuBLAS, so both paths are checked; `device_counts`
// runs the forward from the row counts as a device tensor (grouped_linear_forward_counted: our
// kernel with the problems built on the device; the host-offset form where it does not apply, as
// on the CPU). The CPU ignores the other two.
enum class Impl { automatic, cublas, device_counts };
class ImplScope {
 public:
  explicit ImplScope(Impl impl) {
#if NEMOTRON_CUDA
    if (impl == Impl::cublas) ops::set_grouped_gemm_impl(ops::GroupedGemmImpl::cublas_grouped);
#endif
    (void)impl;
  }
  ~ImplScope() {
#if NEMOTRON_CUDA
    ops::set_grouped_gemm_impl(ops::GroupedGemmImpl::automatic);
#endif
  }
};

class GroupedMatmulCase : public OpCase {
 public:
  GroupedMatmulCase(std::vector<int64_t> rows, int64_t in, int64_t out, Impl impl = Impl::automatic)
      : rows_(std::move(rows)), in_(in), out_(out), impl_(impl) {
    offsets_.push_back(0);
    for (int64_t r : rows_) offsets_.push_back(offsets_.back() + r);
  }
  std::string op() const override { return "grouped_matmul"; }
  std::string params() const override {
    std::string r;
    for (int64_t v : rows_) {
      if (!r.empty()) r += '/';
      r += std::to_string(v);
    }
    const char* impl = impl_ == Impl::cublas ? ",impl=cublas" : impl_ == Impl::device_counts ? ",counts=device" : "";
    return fmt::format("rows={},in={},out={}{}", r, in_, out_, impl);
  }
  int64_t E() const { return static_cast<int64_t>(rows_.size()); }
  // x, then the E weights, then E starting gradients (not differentiated: they show that dW is +=).
  std::vector<InputSpec> inputs() const override {
    std::vector<InputSpec> in{{"x", {offsets_.back(), in_}}};
    for (int64_t e = 0; e < E(); ++e) in.push_back({fmt::format("w{}", e), {out_, in_}});
    for (int64_t e = 0; e < E(); ++e) in.push_back({fmt::format("g{}", e), {out_, in_}, DType::f64, false});
    return in;
  }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    ImplScope scope(impl_);
    Tensor y = ctx.empty({offsets_.back(), out_}, in[0].dtype());
    if (impl_ == Impl::device_counts) {
      Tensor counts = Tensor::empty({E()}, DType::i32, host_backend());
      for (int64_t e = 0; e < E(); ++e) counts.data<int32_t>()[e] = static_cast<int32_t>(rows_[e]);
      ops::grouped_linear_forward_counted(ctx, in[0], counts.to(*ctx.backend), weights(in), y);
    } else {
      ops::grouped_linear_forward(ctx, in[0], offsets_, weights(in), y);
    }
    return {y};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    ImplScope scope(impl_);
    DType dt = in[0].dtype();
    Tensor dx = ctx.empty(in[0].shape(), dt);
    std::vector<Tensor> dw;
    for (int64_t e = 0; e < E(); ++e) {  // the starting gradient, in grad_dtype as the store keeps it
      Tensor g = ctx.empty({out_, in_}, grad_dtype(dt));
      g.copy_from(in[1 + E() + e].to_host(grad_dtype(dt)).to(*ctx.backend));
      dw.push_back(g);
    }
    ops::grouped_linear_backward(ctx, in[0], offsets_, weights(in), douts[0], dx, dw);
    // dW_e - g_e is the gradient; the subtraction happens on the host (float64) so the comparison
    // sees the accumulation itself.
    std::vector<Tensor> grads{dx};
    for (int64_t e = 0; e < E(); ++e) {
      Tensor d = dw[e].to_host(DType::f64), g = in[1 + E() + e].to_host(DType::f64);
      double* pd = d.data<double>();
      const double* pg = g.data<double>();
      for (int64_t i = 0; i < d.numel(); ++i) pd[i] -= pg[i];
      grads.push_back(d);
    }
    for (int64_t e = 0; e < E(); ++e) grads.push_back(Tensor());
    return grads;
  }

 private:
  std::vector<Tensor> weights(const std::vector<Tensor>& in) const {
    return std::vector<Tensor>(in.begin() + 1, in.begin() + 1 + E());
  }
  std::vector<int64_t> rows_, offsets_;
  int64_t in_, out_;
  Impl impl_;
};

NM_OP_CASES(grouped_matmul_cases) {
  CaseList c;
  c.push_back(std::make_unique<GroupedMatmulCase>(std::vector<int64_t>{3, 0, 5, 1}, 7, 5));
  c.push_back(std::make_unique<GroupedMatmulCase>(std::vector<int64_t>{0, 13, 29, 0, 2}, 37, 19));
  // Widths that are multiples of 8 run our bf16 kernels (the others cuBLAS): tails in every tile
  // dimension (rows and dW's K not multiples of 128 or 64, K = in or out not a multiple of 64),
  // experts without rows, and an expert of a single row.
  for (Impl impl : {Impl::automatic, Impl::cublas, Impl::device_counts}) {
    c.push_back(std::make_unique<GroupedMatmulCase>(std::vector<int64_t>{70, 33, 1, 51}, 72, 40, impl));
    c.push_back(std::make_unique<GroupedMatmulCase>(std::vector<int64_t>{0, 130, 7, 257, 0}, 136, 264, impl));
  }
  // Several 128 x 128 tiles and pipeline stages per expert, K tails on every product.
  for (Impl impl : {Impl::automatic, Impl::device_counts})
    c.push_back(std::make_unique<GroupedMatmulCase>(std::vector<int64_t>{300, 0, 129, 1, 200}, 200, 392, impl));
  // Decode-like: many experts, most without rows, the first and the last ones among them.
  c.push_back(std::make_unique<GroupedMatmulCase>(
      std::vector<int64_t>{0, 2, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 0, 1, 0, 0, 2, 0, 0, 0, 0, 0, 1, 0}, 64, 136,
      Impl::device_counts));
  // dW with 1, 2, 3 and 4 k-steps of 64 rows (the pipeline's prologue and slot reuse differ with
  // the step count), an M (= out) tile of 8 rows and an N tile of 8.
  c.push_back(std::make_unique<GroupedMatmulCase>(std::vector<int64_t>{64, 100, 1, 129, 250}, 264, 136));
  return c;
}

}  // namespace
}  // namespace nemotron::testing
