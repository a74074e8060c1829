// causal_conv1d: depthwise causal conv + bias + SiLU; gradients for x, weight and bias.
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
    Tensor y = ctx.empty(in[0].shape(), in[0].dtype());
    ops::causal_conv1d_forward(ctx, in[0], in[1], bias_ ? in[2] : Tensor(), y);
    return {y};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    DType dt = in[0].dtype();
    Tensor dx = ctx.empty(in[0].shape(), dt), dw = ctx.zeros(in[1].shape(), dt);
    Tensor db = bias_ ? ctx.zeros({C_}, dt) : Tensor();
    ops::causal_conv1d_backward(ctx, in[0], in[1], bias_ ? in[2] : Tensor(), douts[0], dx, dw, db);
    std::vector<Tensor> g{dx, dw};
    if (bias_) g.push_back(db);
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
  return c;
}

}  // namespace
}  // namespace nemotron::testing
