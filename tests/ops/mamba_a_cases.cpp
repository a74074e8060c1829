// mamba_a: A = -exp(A_log) (A in stat_dtype), gradient dA_log += dA * A (float32 parameter
// gradient on a bf16 target).
#include "case_buffers.h"
#include "harness.h"
#include "ops/mamba_a.h"

namespace nemotron::testing {
namespace {

class MambaACase : public OpCase {
 public:
  explicit MambaACase(int64_t nH) : nH_(nH) {}
  std::string op() const override { return "mamba_a"; }
  std::string params() const override { return fmt::format("nH={}", nH_); }
  std::vector<InputSpec> inputs() const override { return {{"A_log", {nH_}, DType::f64, true, -1.0, 2.0}}; }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Tensor A = poisoned(ctx, {nH_}, stat_dtype(in[0].dtype()));
    ops::mamba_a_forward(ctx, in[0], A);
    return {A};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    std::vector<Tensor> A = forward(ctx, in);
    Tensor g = grad_buffer(ctx, {nH_}, in[0].dtype());
    ops::mamba_a_backward(ctx, A[0], douts[0], g);
    return {accumulated(g)};
  }

 private:
  int64_t nH_;
};

NM_OP_CASES(mamba_a_cases) {
  CaseList c;
  c.push_back(std::make_unique<MambaACase>(5));
  c.push_back(std::make_unique<MambaACase>(67));
  c.push_back(std::make_unique<MambaACase>(300));  // more than one block
  return c;
}

}  // namespace
}  // namespace nemotron::testing
