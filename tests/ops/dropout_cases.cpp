// Dropout (ops/dropout.h): y = x * m / (1 - p), optionally accumulated into y. The gradient check
// runs the backward (the same call on dy) against finite differences of the forward: both draw
// their mask from the key, so it fails if the backward's mask is not the forward's. The backend
// check (CUDA float32/bfloat16) fails if the GPU's Philox drops other elements than the CPU's.
#include "harness.h"
#include "ops/dropout.h"

namespace nemotron::testing {
namespace {

class DropoutCase : public OpCase {
 public:
  DropoutCase(int64_t rows, int64_t D, double p, bool accumulate)
      : rows_(rows), D_(D), mask_{p, 1234, 0xC0FFEEull + static_cast<uint64_t>(rows)}, accumulate_(accumulate) {}
  std::string op() const override { return "dropout"; }
  std::string params() const override {
    return fmt::format("rows={},D={},p={},accumulate={}", rows_, D_, mask_.p, accumulate_);
  }
  std::vector<InputSpec> inputs() const override {
    std::vector<InputSpec> in{{"x", {rows_, D_}}};
    if (accumulate_) in.push_back({"y0", {rows_, D_}});
    return in;
  }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Tensor y = accumulate_ ? in[1].clone() : ctx.empty(in[0].shape(), in[0].dtype());
    ops::dropout_apply(ctx, in[0], mask_, y, accumulate_);
    return {y};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    Tensor dx = ctx.empty(in[0].shape(), in[0].dtype());
    ops::dropout_apply(ctx, douts[0], mask_, dx);  // linear in x: its own backward
    std::vector<Tensor> g{dx};
    if (accumulate_) g.push_back(douts[0].clone());
    return g;
  }

 private:
  int64_t rows_, D_;
  ops::DropoutMask mask_;
  bool accumulate_;
};

NM_OP_CASES(dropout_cases) {
  CaseList c;
  c.push_back(std::make_unique<DropoutCase>(5, 7, 0.3, false));
  c.push_back(std::make_unique<DropoutCase>(3, 11, 0.5, true));  // a tail shorter than a pack
  c.push_back(std::make_unique<DropoutCase>(64, 40, 0.1, true));  // whole 16-byte packs
  c.push_back(std::make_unique<DropoutCase>(4, 6, 0.0, false));   // p = 0: the identity
  return c;
}

}  // namespace
}  // namespace nemotron::testing
