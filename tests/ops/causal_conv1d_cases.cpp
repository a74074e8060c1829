// causal_conv1d: depthwise causal conv + bias + SiLU; gradients for x, weight and bias (float32
// parameter gradients on a bf16 target, accumulated into a non-zero buffer).
#include "case_buffers.h"
#include "harness.h"
#include "ops/causal_conv1d.h"

namespace nemotron::testing {
namespace {

class CausalConv1dCase : public OpCase {
 public:
  // hf_layout: weight given as [C, 1, K] (the Hub tensor) instead of [C, K].
  CausalConv1dCase(int64_t B, int64_t T, int64_t C, int64_t K, bool bias, bool hf_layout)
      : B_(B), T_(T), C_(C), K_(K), bias_(bias), hf_(hf_layout) {}
  std::string op() const override { return "causal_conv1d"; }
  std::string params() const override {
    return fmt::format("B={},T={},C={},K={},bias={}{}", B_, T_, C_, K_, bias_ ? 1 : 0, hf_ ? ",w=[C,1,K]" : "");
  }
  std::vector<InputSpec> inputs() const override {
    std::vector<InputSpec> in{{"x", {B_, T_, C_}}, {"w", hf_ ? Shape{C_, 1, K_} : Shape{C_, K_}}};
    if (bias_) in.push_back({"bias", {C_}});
    return in;
  }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Tensor y = poisoned(ctx, in[0].shape(), in[0].dtype());
    ops::causal_conv1d_forward(ctx, in[0], in[1], bias_ ? in[2] : Tensor(), y);
    return {y};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    DType dt = in[0].dtype();
    Tensor dx = poisoned(ctx, in[0].shape(), dt), dw = grad_buffer(ctx, in[1].shape(), dt);
    Tensor db = bias_ ? grad_buffer(ctx, {C_}, dt) : Tensor();
    ops::causal_conv1d_backward(ctx, in[0], in[1], bias_ ? in[2] : Tensor(), douts[0], dx, dw, db);
    std::vector<Tensor> g{dx, accumulated(dw)};
    if (bias_) g.push_back(accumulated(db));
    return g;
  }

 private:
  int64_t B_, T_, C_, K_;
  bool bias_, hf_;
};

NM_OP_CASES(causal_conv1d_cases) {
  CaseList c;
  c.push_back(std::make_unique<CausalConv1dCase>(2, 9, 7, 4, true, true));
  c.push_back(std::make_unique<CausalConv1dCase>(3, 3, 5, 4, false, false));  // T < K: all windows padded
  c.push_back(std::make_unique<CausalConv1dCase>(2, 6, 3, 1, true, false));   // K = 1
  c.push_back(std::make_unique<CausalConv1dCase>(2, 37, 67, 4, true, true));   // odd C: one channel per thread
  c.push_back(std::make_unique<CausalConv1dCase>(1, 37, 68, 3, false, false)); // C % 4 == 0: vector path
  // Several time blocks per sequence (more than 128 steps) and partial channel blocks.
  c.push_back(std::make_unique<CausalConv1dCase>(2, 301, 36, 4, true, false));
  c.push_back(std::make_unique<CausalConv1dCase>(3, 150, 5, 2, true, false));
  return c;
}

}  // namespace
}  // namespace nemotron::testing
