// dt_softplus: dt = clamp(softplus(dt_raw + dt_bias), lo, hi); gradients for dt_raw and dt_bias,
// with and without an active clamp (zero gradient where it clamps). dt and its gradient are
// stat_dtype (float32 on a bf16 target); d_dt_bias is a float32 parameter gradient.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "case_buffers.h"
#include "harness.h"
#include "ops/dt_softplus.h"

namespace nemotron::testing {
namespace {

class DtSoftplusCase : public OpCase {
 public:
  DtSoftplusCase(int64_t B, int64_t T, int64_t nH, double lo, double hi) : B_(B), T_(T), nH_(nH), lo_(lo), hi_(hi) {}
  std::string op() const override { return "dt_softplus"; }
  std::string params() const override { return fmt::format("B={},T={},H={},limit=({},{})", B_, T_, nH_, lo_, hi_); }
  std::vector<InputSpec> inputs() const override {
    return {{"dt_raw", {B_, T_, nH_}, DType::f64, true, -2.0, 2.0}, {"dt_bias", {nH_}, DType::f64, true, -3.0, -1.0}};
  }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Tensor dt = poisoned(ctx, in[0].shape(), stat_dtype(in[0].dtype()));
    ops::dt_softplus_forward(ctx, in[0], in[1], lo_, hi_, dt);
    return {dt};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    DType dt = in[0].dtype();
    Tensor draw = poisoned(ctx, in[0].shape(), dt), dbias = grad_buffer(ctx, {nH_}, dt);
    ops::dt_softplus_backward(ctx, in[0], in[1], lo_, hi_, douts[0], draw, dbias);
    return {draw, accumulated(dbias)};
  }

 private:
  int64_t B_, T_, nH_;
  double lo_, hi_;
};

NM_OP_CASES(dt_softplus_cases) {
  CaseList c;
  c.push_back(std::make_unique<DtSoftplusCase>(2, 7, 5, 0.0, std::numeric_limits<double>::infinity()));
  c.push_back(std::make_unique<DtSoftplusCase>(3, 5, 3, 0.08, 0.3));  // both sides of the clamp active
  // Odd head counts over several column blocks, rows over several reduction chunks.
  c.push_back(std::make_unique<DtSoftplusCase>(2, 37, 67, 0.0, std::numeric_limits<double>::infinity()));
  c.push_back(std::make_unique<DtSoftplusCase>(3, 50, 5, 0.001, 100.0));
  return c;
}

}  // namespace
}  // namespace nemotron::testing

namespace nemotron::testing {

// The clamp case above only proves something if the clamp is active on both sides: pin that down.
TEST(DtSoftplus, clamp_is_active_and_blocks_the_gradient) {
  Context ctx = cpu_context(DType::f64);
  Tensor raw = Tensor::from_vector<double>({1, 3}, {-4.0, -1.8, 1.0});  // softplus: 0.018, 0.153, 1.313
  Tensor bias = Tensor::from_vector<double>({3}, {0.0, 0.0, 0.0});
  Tensor dt = Tensor::empty({1, 3}, DType::f64), draw = Tensor::empty({1, 3}, DType::f64);
  Tensor dbias = Tensor::zeros({3}, DType::f64), ddt = Tensor::from_vector<double>({1, 3}, {1.0, 1.0, 1.0});
  ops::dt_softplus_forward(ctx, raw, bias, 0.08, 0.3, dt);
  ops::dt_softplus_backward(ctx, raw, bias, 0.08, 0.3, ddt, draw, dbias);
  EXPECT_EQ(dt.data<double>()[0], 0.08);
  EXPECT_NEAR(dt.data<double>()[1], std::log1p(std::exp(-1.8)), 1e-15);
  EXPECT_EQ(dt.data<double>()[2], 0.3);
  EXPECT_EQ(draw.data<double>()[0], 0.0);
  EXPECT_NEAR(draw.data<double>()[1], 1.0 / (1.0 + std::exp(1.8)), 1e-15);
  EXPECT_EQ(draw.data<double>()[2], 0.0);
}

}  // namespace nemotron::testing
