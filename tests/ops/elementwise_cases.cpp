// Elementwise add / add_inplace / scale_inplace on whole and unaligned (offset view) tensors, and
// dtype casts (forward and the cast back as its gradient); CPU cast pairs at known values.
#include <gtest/gtest.h>

#include "harness.h"
#include "ops/cast.h"
#include "ops/elementwise.h"
#include "poison.h"

namespace nemotron::testing {
namespace {

// offset = 1 runs the op on rows [1, rows) of the inputs: views whose data is not 16-byte
// aligned when D is odd (the scalar path of the CUDA kernels).
class ElementwiseCase : public OpCase {
 public:
  ElementwiseCase(std::string fn, int64_t rows, int64_t D, int64_t offset)
      : fn_(std::move(fn)), rows_(rows), D_(D), offset_(offset) {}
  std::string op() const override { return "elementwise"; }
  std::string params() const override { return fmt::format("{},rows={},D={},offset={}", fn_, rows_, D_, offset_); }
  std::vector<InputSpec> inputs() const override { return {{"a", {rows_, D_}}, {"b", {rows_, D_}}}; }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Tensor a = in[0].slice(offset_, rows_), b = in[1].slice(offset_, rows_);
    Tensor out;
    if (fn_ == "add") {
      out = poisoned(ctx, a.shape(), a.dtype());
      ops::add(ctx, a, b, out);
    } else if (fn_ == "add_inplace") {
      Tensor big = in[0].clone();  // keeps the offset (and so the alignment) of the view
      out = big.slice(offset_, rows_);
      ops::add_inplace(ctx, out, b);
    } else {
      Tensor big = in[0].clone();
      out = big.slice(offset_, rows_);
      ops::add_inplace(ctx, out, b);
      ops::scale_inplace(ctx, out, kScale);  // (a + b) * s
    }
    return {out};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    Tensor g = ctx.zeros({rows_, D_}, in[0].dtype());
    Tensor gv = g.slice(offset_, rows_);
    ops::add_inplace(ctx, gv, douts[0]);
    if (fn_ == "scale_inplace") ops::scale_inplace(ctx, gv, kScale);
    return {g, g.clone()};
  }

 private:
  static constexpr double kScale = -1.75;
  std::string fn_;
  int64_t rows_, D_, offset_;
};

// to = "wide": T -> grad_dtype(T) (bf16 -> f32 on CUDA, a copy elsewhere), backward casts back;
// to = "bf16": T -> bfloat16 (f64/f32 -> bf16 rounding), forward only.
class CastCase : public OpCase {
 public:
  CastCase(std::string to, int64_t rows, int64_t D, int64_t offset)
      : to_(std::move(to)), rows_(rows), D_(D), offset_(offset) {}
  std::string op() const override { return "cast"; }
  std::string params() const override { return fmt::format("to={},rows={},D={},offset={}", to_, rows_, D_, offset_); }
  std::vector<InputSpec> inputs() const override { return {{"x", {rows_, D_}, DType::f64, true, -3.0, 3.0}}; }
  bool has_backward() const override { return to_ == "wide"; }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Tensor x = in[0].slice(offset_, rows_);
    Tensor y = poisoned(ctx, x.shape(), to_ == "wide" ? grad_dtype(x.dtype()) : DType::bf16);
    ops::cast(ctx, x, y);
    return {y};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    Tensor g = ctx.zeros({rows_, D_}, in[0].dtype());
    Tensor gv = g.slice(offset_, rows_);
    ops::cast(ctx, douts[0], gv);
    return {g};
  }

 private:
  std::string to_;
  int64_t rows_, D_, offset_;
};

NM_OP_CASES(elementwise_cases) {
  CaseList c;
  for (const char* fn : {"add", "add_inplace", "scale_inplace"}) {
    c.push_back(std::make_unique<ElementwiseCase>(fn, 7, 149, 0));   // odd size: tail pack
    c.push_back(std::make_unique<ElementwiseCase>(fn, 9, 13, 1));    // unaligned view
    c.push_back(std::make_unique<ElementwiseCase>(fn, 65, 136, 0));  // whole packs
  }
  for (const char* to : {"wide", "bf16"}) {
    c.push_back(std::make_unique<CastCase>(to, 7, 149, 0));
    c.push_back(std::make_unique<CastCase>(to, 9, 13, 1));
    c.push_back(std::make_unique<CastCase>(to, 65, 136, 0));
  }
  return c;
}

TEST(Cast, cpu_pairs_at_known_values) {
  Context ctx = cpu_context(DType::f64);
  // 1 + 2^-8 is a bf16 tie (round to even gives 1); 1 + 3 * 2^-8 is a tie that rounds up to 1 + 2^-6.
  Tensor x = Tensor::from_vector<double>({4}, {1.0 + 1.0 / 256, 1.0 + 3.0 / 256, -2.5, 0.1});
  Tensor f = Tensor::empty({4}, DType::f32), b = Tensor::empty({4}, DType::bf16), back = Tensor::empty({4}, DType::f64);
  ops::cast(ctx, x, f);
  EXPECT_EQ(f.data<float>()[3], 0.1f);
  ops::cast(ctx, x, b);
  ops::cast(ctx, b, back);
  EXPECT_EQ(back.to_f64_vector(), (std::vector<double>{1.0, 1.015625, -2.5, 0.10009765625}));
  ops::cast(ctx, f, b);
  ops::cast(ctx, b, f);
  EXPECT_EQ(f.data<float>()[1], 1.015625f);
  ops::cast(ctx, f, back);
  EXPECT_EQ(back.data<double>()[2], -2.5);
  Tensor wrong = Tensor::empty({3}, DType::f32);
  EXPECT_THROW(ops::cast(ctx, x, wrong), Error);
}

}  // namespace
}  // namespace nemotron::testing
