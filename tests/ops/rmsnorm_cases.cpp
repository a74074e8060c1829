// RMSNorm: y = w x / rms(x), gradients for x and w; the fused residual forms (x + r normed, and
// a residual gradient added into dx).
#include "harness.h"
#include "ops/rmsnorm.h"

namespace nemotron::testing {
namespace {

class RmsNormCase : public OpCase {
 public:
  RmsNormCase(int64_t rows, int64_t D, bool fused) : rows_(rows), D_(D), fused_(fused) {}
  std::string op() const override { return "rmsnorm"; }
  std::string params() const override { return fmt::format("rows={},D={},fused={}", rows_, D_, fused_); }
  std::vector<InputSpec> inputs() const override {
    std::vector<InputSpec> in{{"x", {rows_, D_}}, {"w", {D_}, DType::f64, true, 0.5, 1.5}};
    if (fused_) in.push_back({"r", {rows_, D_}});
    return in;
  }
  // Outputs: y (and the sum x + r when fused).
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Tensor y, rstd, sum;
    run(ctx, in, y, rstd, sum);
    if (fused_) return {y, sum};
    return {y};
  }
  // Fused: L = <y, dy> + <sum, dsum>, so dx = dr = rmsnorm'(dy) + dsum (the residual join).
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    DType dt = in[0].dtype();
    Tensor y, rstd, sum;
    run(ctx, in, y, rstd, sum);
    Tensor dx = ctx.empty({rows_, D_}, dt), dw = ctx.zeros({D_}, grad_dtype(dt));
    if (!fused_) {
      ops::rmsnorm_backward(ctx, in[0], in[1], rstd, douts[0], dx, dw);
      return {dx, dw};
    }
    dx.copy_from(douts[1]);
    ops::rmsnorm_backward(ctx, sum, in[1], rstd, douts[0], dx, dw, &dx);  // in place
    return {dx, dw, dx.clone()};
  }

 private:
  void run(Context& ctx, const std::vector<Tensor>& in, Tensor& y, Tensor& rstd, Tensor& sum) const {
    DType dt = in[0].dtype();
    y = ctx.empty({rows_, D_}, dt), rstd = ctx.empty({rows_}, stat_dtype(dt));
    if (fused_) {
      sum = ctx.empty({rows_, D_}, dt);
      ops::add_rmsnorm_forward(ctx, in[0], in[2], in[1], 1e-5, sum, y, rstd);
    } else {
      ops::rmsnorm_forward(ctx, in[0], in[1], 1e-5, y, rstd);
    }
  }
  int64_t rows_, D_;
  bool fused_;
};

NM_OP_CASES(rmsnorm_cases) {
  CaseList c;
  c.push_back(std::make_unique<RmsNormCase>(6, 13, false));
  c.push_back(std::make_unique<RmsNormCase>(35, 64, false));
  c.push_back(std::make_unique<RmsNormCase>(150, 300, false));  // several dw row chunks
  c.push_back(std::make_unique<RmsNormCase>(7, 19, true));
  c.push_back(std::make_unique<RmsNormCase>(130, 96, true));
  // Rows of whole 16-byte vectors take the CUDA vector path: 1, 2, 4 and 8 vectors per thread
  // (bf16 / f32), the last backward row block partial (kBwdRows = 32).
  c.push_back(std::make_unique<RmsNormCase>(70, 776, false));
  c.push_back(std::make_unique<RmsNormCase>(37, 2056, true));
  c.push_back(std::make_unique<RmsNormCase>(19, 1536, true));  // 2 vectors a thread: rows in pairs, one left
  c.push_back(std::make_unique<RmsNormCase>(33, 8, true));
  return c;
}

}  // namespace
}  // namespace nemotron::testing
