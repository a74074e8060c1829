// Squared ReLU and SwiGLU: gradients, and values at hand-picked points.
#include <gtest/gtest.h>

#include <cmath>

#include "harness.h"
#include "ops/activations.h"
#include "poison.h"

namespace nemotron::testing {
namespace {

class Relu2Case : public OpCase {
 public:
  Relu2Case(int64_t rows, int64_t D) : rows_(rows), D_(D) {}
  std::string op() const override { return "relu2"; }
  std::string params() const override { return fmt::format("rows={},D={}", rows_, D_); }
  std::vector<InputSpec> inputs() const override { return {{"x", {rows_, D_}}}; }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Tensor y = poisoned(ctx, in[0].shape(), in[0].dtype());
    ops::relu2_forward(ctx, in[0], y);
    return {y};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    Tensor dx = poisoned(ctx, in[0].shape(), in[0].dtype());
    ops::relu2_backward(ctx, in[0], douts[0], dx);
    return {dx};
  }

 private:
  int64_t rows_, D_;
};

class SwigluCase : public OpCase {
 public:
  SwigluCase(int64_t rows, int64_t D) : rows_(rows), D_(D) {}
  std::string op() const override { return "swiglu"; }
  std::string params() const override { return fmt::format("rows={},D={}", rows_, D_); }
  std::vector<InputSpec> inputs() const override {
    return {{"gate", {rows_, D_}, DType::f64, true, -4.0, 4.0}, {"up", {rows_, D_}}};
  }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Tensor y = poisoned(ctx, in[0].shape(), in[0].dtype());
    ops::swiglu_forward(ctx, in[0], in[1], y);
    return {y};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    Tensor dg = poisoned(ctx, in[0].shape(), in[0].dtype()), du = poisoned(ctx, in[1].shape(), in[1].dtype());
    ops::swiglu_backward(ctx, in[0], in[1], douts[0], dg, du);
    return {dg, du};
  }

 private:
  int64_t rows_, D_;
};

NM_OP_CASES(activation_cases) {
  CaseList c;
  c.push_back(std::make_unique<Relu2Case>(5, 13));
  c.push_back(std::make_unique<Relu2Case>(33, 70));
  c.push_back(std::make_unique<SwigluCase>(5, 13));
  c.push_back(std::make_unique<SwigluCase>(33, 70));
  c.push_back(std::make_unique<Relu2Case>(40, 136));   // whole 16-byte packs
  c.push_back(std::make_unique<SwigluCase>(40, 136));
  return c;
}

TEST(Activations, relu2_and_swiglu_values) {
  Context ctx = cpu_context(DType::f64);
  Tensor x = Tensor::from_vector<double>({4}, {-2.0, -0.0, 0.5, 3.0});
  Tensor y = Tensor::empty({4}, DType::f64);
  ops::relu2_forward(ctx, x, y);
  EXPECT_EQ(y.to_f64_vector(), (std::vector<double>{0.0, 0.0, 0.25, 9.0}));
  Tensor up = Tensor::from_vector<double>({4}, {1.0, 2.0, -1.0, 0.5});
  ops::swiglu_forward(ctx, x, up, y);
  std::vector<double> got = y.to_f64_vector();
  for (int i = 0; i < 4; ++i) {
    double g = x.data<double>()[i];
    EXPECT_NEAR(got[i], g / (1.0 + std::exp(-g)) * up.data<double>()[i], 1e-15);
  }
}

}  // namespace
}  // namespace nemotron::testing
