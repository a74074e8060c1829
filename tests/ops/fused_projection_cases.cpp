// The ops on a fused projection's output (ops/fused_projection.h): split_columns into 2..4 blocks
// (16-byte units where widths allow: 3 x [8, 16, 8]; elements otherwise: widths 3, 5, 7), x with
// leading dims; swiglu_halves_forward against its definition, F odd and even.
#include "harness.h"
#include "ops/activations.h"
#include "ops/fused_projection.h"
#include "poison.h"

namespace nemotron::testing {
namespace {

class SplitColumnsCase : public OpCase {
 public:
  SplitColumnsCase(Shape y, std::vector<int64_t> widths) : y_(std::move(y)), widths_(std::move(widths)) {}
  std::string op() const override { return "split_columns"; }
  std::string params() const override { return fmt::format("y={},widths={}", y_.str(), fmt::join(widths_, "/")); }
  std::vector<InputSpec> inputs() const override { return {{"y", y_}}; }
  bool has_backward() const override { return false; }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    const int64_t rows = y_.numel() / y_[-1];
    std::vector<Tensor> outs;
    for (int64_t w : widths_) outs.push_back(poisoned(ctx, {rows, w}, in[0].dtype()));
    ops::split_columns(ctx, in[0], outs);
    return outs;
  }

 private:
  Shape y_;
  std::vector<int64_t> widths_;
};

// swiglu_halves_forward(gu) against swiglu_forward on gu's halves copied apart (split_columns).
class SwigluHalvesCase : public OpCase {
 public:
  SwigluHalvesCase(int64_t rows, int64_t F) : rows_(rows), F_(F) {}
  std::string op() const override { return "swiglu_halves"; }
  std::string params() const override { return fmt::format("rows={},F={}", rows_, F_); }
  std::vector<InputSpec> inputs() const override { return {{"gate_up", {rows_, 2 * F_}}}; }
  bool has_backward() const override { return false; }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Tensor y = poisoned(ctx, {rows_, F_}, in[0].dtype());
    ops::swiglu_halves_forward(ctx, in[0], y);
    Tensor halves[] = {ctx.empty({rows_, F_}, in[0].dtype()), ctx.empty({rows_, F_}, in[0].dtype())};
    ops::split_columns(ctx, in[0], halves);
    Tensor ref = poisoned(ctx, {rows_, F_}, in[0].dtype());
    ops::swiglu_forward(ctx, halves[0], halves[1], ref);
    return {y, ref};
  }

 private:
  int64_t rows_, F_;
};

NM_OP_CASES(fused_projection_cases) {
  CaseList c;
  c.push_back(std::make_unique<SplitColumnsCase>(Shape{5, 32}, std::vector<int64_t>{8, 16, 8}));
  c.push_back(std::make_unique<SplitColumnsCase>(Shape{2, 3, 15}, std::vector<int64_t>{3, 5, 7}));
  c.push_back(std::make_unique<SplitColumnsCase>(Shape{7, 40}, std::vector<int64_t>{16, 24}));
  c.push_back(std::make_unique<SplitColumnsCase>(Shape{4, 10}, std::vector<int64_t>{1, 2, 3, 4}));
  c.push_back(std::make_unique<SwigluHalvesCase>(6, 24));
  c.push_back(std::make_unique<SwigluHalvesCase>(3, 7));
  return c;
}

}  // namespace
}  // namespace nemotron::testing
