// Squared ReLU and SwiGLU: gradients, and values at hand-picked points.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "harness.h"
#include "ops/activations.h"
#include "poison.h"

namespace nemotron::testing {
namespace {

// from_output: the backward through relu2_backward_from_output on the forward's y (what the MLP
// and MoE layers keep), checked like relu2_backward against float64 differences and the CPU.
class Relu2Case : public OpCase {
 public:
  Relu2Case(int64_t rows, int64_t D, bool from_output = false) : rows_(rows), D_(D), from_output_(from_output) {}
  std::string op() const override { return "relu2"; }
  std::string params() const override {
    return fmt::format("rows={},D={}{}", rows_, D_, from_output_ ? ",from_output" : "");
  }
  std::vector<InputSpec> inputs() const override { return {{"x", {rows_, D_}}}; }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Tensor y = poisoned(ctx, in[0].shape(), in[0].dtype());
    ops::relu2_forward(ctx, in[0], y);
    return {y};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    Tensor dx = poisoned(ctx, in[0].shape(), in[0].dtype());
    if (from_output_) {
      Tensor y = poisoned(ctx, in[0].shape(), in[0].dtype());
      ops::relu2_forward(ctx, in[0], y);
      ops::relu2_backward_from_output(ctx, y, douts[0], dx);
    } else {
      ops::relu2_backward(ctx, in[0], douts[0], dx);
    }
    return {dx};
  }

 private:
  int64_t rows_, D_;
  bool from_output_;
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
  c.push_back(std::make_unique<Relu2Case>(5, 13, true));
  c.push_back(std::make_unique<Relu2Case>(40, 136, true));
  return c;
}

// sqrt(round(r^2)) rounds back to r: the backward from the output equals the one from the input
// bit for bit (float32 here; bfloat16 on the GPU in tests/cuda/relu2_from_output_test.cpp).
TEST(Activations, relu2_backward_from_output_equals_from_input_f32) {
  Context ctx = cpu_context(DType::f32);
  std::vector<float> xv, dv;
  for (int i = 0; i < 4096; ++i) {
    xv.push_back(std::ldexp(static_cast<float>((i * 7919) % 4001) - 2000.0f, (i % 41) - 20) * 1.0009765f);
    dv.push_back((i % 3 == 0 ? -0.37f : 0.37f) + 0.001f * static_cast<float>(i % 97));  // -0 vs +0 shows too
  }
  const int64_t n = static_cast<int64_t>(xv.size());
  Tensor x = Tensor::from_vector<float>({n}, xv), dy = Tensor::from_vector<float>({n}, dv);
  Tensor y = Tensor::empty({n}, DType::f32), a = Tensor::empty({n}, DType::f32), b = Tensor::empty({n}, DType::f32);
  ops::relu2_forward(ctx, x, y);
  ops::relu2_backward(ctx, x, dy, a);
  ops::relu2_backward_from_output(ctx, y, dy, b);
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), static_cast<size_t>(n) * sizeof(float)), 0);
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
