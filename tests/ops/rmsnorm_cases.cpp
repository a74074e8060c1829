// RMSNorm: y = w x / rms(x), gradients for x and w.
#include "harness.h"
#include "ops/rmsnorm.h"

namespace nemotron::testing {
namespace {

class RmsNormCase : public OpCase {
 public:
  RmsNormCase(int64_t rows, int64_t D) : rows_(rows), D_(D) {}
  std::string op() const override { return "rmsnorm"; }
  std::string params() const override { return fmt::format("rows={},D={}", rows_, D_); }
  std::vector<InputSpec> inputs() const override {
    return {{"x", {rows_, D_}}, {"w", {D_}, DType::f64, true, 0.5, 1.5}};
  }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Tensor y = ctx.empty({rows_, D_}, in[0].dtype()), rstd = ctx.empty({rows_}, stat_dtype(in[0].dtype()));
    ops::rmsnorm_forward(ctx, in[0], in[1], 1e-5, y, rstd);
    return {y};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    DType dt = in[0].dtype();
    Tensor y = ctx.empty({rows_, D_}, dt), rstd = ctx.empty({rows_}, stat_dtype(dt));
    ops::rmsnorm_forward(ctx, in[0], in[1], 1e-5, y, rstd);
    Tensor dx = ctx.empty({rows_, D_}, dt), dw = ctx.zeros({D_}, dt);
    ops::rmsnorm_backward(ctx, in[0], in[1], rstd, douts[0], dx, dw);
    return {dx, dw};
  }

 private:
  int64_t rows_, D_;
};

NM_OP_CASES(rmsnorm_cases) {
  CaseList c;
  c.push_back(std::make_unique<RmsNormCase>(6, 13));
  c.push_back(std::make_unique<RmsNormCase>(35, 64));
  return c;
}

}  // namespace
}  // namespace nemotron::testing
