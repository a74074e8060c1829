// Fused softmax cross-entropy with a loss mask (in the logits dtype or float32) and ignored
// (negative) targets; float32 losses for bf16 logits; the gradient in place or not; odd and
// large vocabularies (the CUDA kernel's scalar and 16-byte paths).
#include <gtest/gtest.h>

#include <cmath>

#include "harness.h"
#include "ops/cross_entropy.h"

namespace nemotron::testing {
namespace {

class CrossEntropyCase : public OpCase {
 public:
  enum class Mask { none, same, f32 };
  CrossEntropyCase(int64_t N, int64_t V, Mask mask, bool in_place = false)
      : N_(N), V_(V), mask_(mask), masked_(mask != Mask::none), in_place_(in_place) {}
  std::string op() const override { return "softmax_cross_entropy"; }
  std::string params() const override {
    static const char* names[] = {"none", "same", "f32"};
    return fmt::format("N={},V={},mask={},in_place={}", N_, V_, names[static_cast<int>(mask_)], in_place_);
  }
  // Large vocabularies make each softmax gradient entry ~1/V: a larger finite-difference step keeps
  // the rounding noise of the summed loss below it (the truncation error stays ~h^2 p).
  double fd_step() const override { return V_ >= 1000 ? 1e-3 : 1e-6; }
  double grad_tolerance() const override { return V_ >= 50000 ? 1e-5 : 1e-6; }
  std::vector<InputSpec> inputs() const override {
    // Targets drawn from [-1, V): about 1 in V rows carries the ignored label -1.
    std::vector<InputSpec> in{{"logits", {N_, V_}, DType::f64, true, -3.0, 3.0},
                              {"targets", {N_}, DType::i32, false, -1.0, static_cast<double>(V_)}};
    if (masked_) in.push_back({"mask", {N_}, DType::f64, false, 0.0, 1.0, mask_ == Mask::f32});
    return in;
  }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Tensor losses = ctx.empty({N_}, stat_dtype(in[0].dtype()));
    ops::softmax_cross_entropy(ctx, in[0], in[1], masked_ ? in[2] : Tensor(), 1.0, losses, nullptr);
    return {losses};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    // L = sum_n dout[n] * loss[n]; the op computes d(sum_n loss[n]) * scale per row, so apply
    // dout row by row through the mask argument's linearity.
    const DType dt = in[0].dtype(), mt = mask_ == Mask::f32 ? stat_dtype(dt) : dt;
    Tensor losses = ctx.empty({N_}, stat_dtype(dt));
    std::vector<double> a = douts[0].to_f64_vector();
    if (masked_) {
      std::vector<double> b = in[2].to_f64_vector();
      for (int64_t n = 0; n < N_; ++n) a[n] *= b[n];
    }
    Tensor m = Tensor::from_vector<double>({N_}, a).to_host(mt).to(*ctx.backend);
    Tensor d = ctx.empty({N_, V_}, dt);
    if (in_place_) {
      d.copy_from(in[0]);
      ops::softmax_cross_entropy(ctx, d, in[1], m, 1.0, losses, &d);
    } else {
      ops::softmax_cross_entropy(ctx, in[0], in[1], m, 1.0, losses, &d);
    }
    std::vector<Tensor> g{d, Tensor()};
    if (masked_) g.push_back(Tensor());
    return g;
  }

 private:
  int64_t N_, V_;
  Mask mask_;
  bool masked_, in_place_;
};

NM_OP_CASES(cross_entropy_cases) {
  CaseList c;
  using M = CrossEntropyCase::Mask;
  c.push_back(std::make_unique<CrossEntropyCase>(7, 11, M::none));
  c.push_back(std::make_unique<CrossEntropyCase>(13, 37, M::same));
  c.push_back(std::make_unique<CrossEntropyCase>(37, 1007, M::f32));
  c.push_back(std::make_unique<CrossEntropyCase>(37, 1007, M::same, true));
  c.push_back(std::make_unique<CrossEntropyCase>(5, 4096, M::none, true));  // 16-byte loads
  c.push_back(std::make_unique<CrossEntropyCase>(4, 131072, M::f32));     // a large vocabulary
  c.push_back(std::make_unique<CrossEntropyCase>(6, 50001, M::same, true)); // odd V, in place
  c.push_back(std::make_unique<CrossEntropyCase>(2, 300007, M::none, true)); // V over 2^18
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
