// Linear bias: y = x + b over rows; gradients for x (identity) and b (column sums, in grad_dtype).
#include "harness.h"
#include "ops/bias.h"

namespace nemotron::testing {
namespace {

class BiasCase : public OpCase {
 public:
  BiasCase(int64_t rows, int64_t D) : rows_(rows), D_(D) {}
  std::string op() const override { return "bias_add"; }
  std::string params() const override { return fmt::format("rows={},D={}", rows_, D_); }
  std::vector<InputSpec> inputs() const override { return {{"x", {rows_, D_}}, {"b", {D_}}}; }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Tensor y = in[0].clone();
    ops::bias_add(ctx, y, in[1]);
    return {y};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    Tensor db = ctx.zeros({D_}, grad_dtype(in[1].dtype()));
    ops::bias_backward(ctx, douts[0], db);
    return {douts[0].clone(), db};
  }

 private:
  int64_t rows_, D_;
};

NM_OP_CASES(bias_cases) {
  CaseList c;
  c.push_back(std::make_unique<BiasCase>(5, 7));
  c.push_back(std::make_unique<BiasCase>(31, 66));
  c.push_back(std::make_unique<BiasCase>(150, 64));  // whole 16-byte packs; several row chunks
  c.push_back(std::make_unique<BiasCase>(3, 1));
  return c;
}

}  // namespace
}  // namespace nemotron::testing
