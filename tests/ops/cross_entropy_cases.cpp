// Fused softmax cross-entropy with a loss mask and ignored (-100) targets.
#include <gtest/gtest.h>

#include <cmath>

#include "harness.h"
#include "ops/cross_entropy.h"

namespace nemotron::testing {
namespace {

class CrossEntropyCase : public OpCase {
 public:
  CrossEntropyCase(int64_t N, int64_t V, bool masked) : N_(N), V_(V), masked_(masked) {}
  std::string op() const override { return "softmax_cross_entropy"; }
  std::string params() const override { return fmt::format("N={},V={},mask={}", N_, V_, masked_); }
  std::vector<InputSpec> inputs() const override {
    // Targets drawn from [-1, V): about 1 in V rows carries the ignored label -1.
    std::vector<InputSpec> in{{"logits", {N_, V_}, DType::f64, true, -3.0, 3.0},
                              {"targets", {N_}, DType::i32, false, -1.0, static_cast<double>(V_)}};
    if (masked_) in.push_back({"mask", {N_}, DType::f64, false, 0.0, 1.0});
    return in;
  }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Tensor losses = ctx.empty({N_}, in[0].dtype());
    ops::softmax_cross_entropy(ctx, in[0], in[1], masked_ ? in[2] : Tensor(), 1.0, losses, nullptr);
    return {losses};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    // L = sum_n dout[n] * loss[n]; the op computes d(sum_n loss[n]) * scale per row, so apply
    // dout row by row through the mask argument's linearity.
    Tensor losses = ctx.empty({N_}, in[0].dtype());
    Tensor m = ctx.empty({N_}, in[0].dtype());
    m.copy_from(douts[0].to_host(in[0].dtype()));
    if (masked_) {
      std::vector<double> a = m.to_f64_vector(), b = in[2].to_f64_vector();
      for (int64_t n = 0; n < N_; ++n) a[n] *= b[n];
      m.copy_from(Tensor::from_vector<double>({N_}, a).to_host(in[0].dtype()));
    }
    Tensor d = ctx.empty({N_, V_}, in[0].dtype());
    ops::softmax_cross_entropy(ctx, in[0], in[1], m, 1.0, losses, &d);
    std::vector<Tensor> g{d, Tensor()};
    if (masked_) g.push_back(Tensor());
    return g;
  }

 private:
  int64_t N_, V_;
  bool masked_;
};

NM_OP_CASES(cross_entropy_cases) {
  CaseList c;
  c.push_back(std::make_unique<CrossEntropyCase>(7, 11, false));
  c.push_back(std::make_unique<CrossEntropyCase>(13, 37, true));
  return c;
}

TEST(SoftmaxCrossEntropy, uniform_logits_give_log_v_and_gradient_in_place) {
  Context ctx = cpu_context(DType::f64);
  const int64_t N = 3, V = 8;
  Tensor logits = Tensor::zeros({N, V}, DType::f64);
  Tensor targets = Tensor::from_vector<int32_t>({N}, {0, 5, -100});
  Tensor losses = Tensor::empty({N}, DType::f64);
  ops::softmax_cross_entropy(ctx, logits, targets, Tensor(), 0.5, losses, &logits);  // in place
  EXPECT_NEAR(losses.data<double>()[0], std::log(8.0), 1e-15);
  EXPECT_EQ(losses.data<double>()[2], 0.0);
  EXPECT_NEAR(logits.data<double>()[0], 0.5 * (1.0 / 8 - 1), 1e-15);
  EXPECT_NEAR(logits.data<double>()[1], 0.5 / 8, 1e-15);
  EXPECT_EQ(logits.data<double>()[2 * V + 3], 0.0);  // ignored row has no gradient
  Tensor bad = Tensor::from_vector<int32_t>({N}, {0, 8, 1});
  EXPECT_THROW(ops::softmax_cross_entropy(ctx, logits, bad, Tensor(), 1.0, losses, nullptr), InputError);
}

}  // namespace
}  // namespace nemotron::testing
