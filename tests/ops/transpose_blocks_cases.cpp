// transpose_blocks ([A, B, C] -> [B, A, C]) with blocks of every copy width the CUDA kernel picks
// (16-byte, 4-byte, 2-byte units), and its backward (the swap back).
#include <gtest/gtest.h>

#include "harness.h"
#include "ops/transpose_blocks.h"
#include "poison.h"

namespace nemotron::testing {
namespace {

class TransposeBlocksCase : public OpCase {
 public:
  TransposeBlocksCase(int64_t A, int64_t B, int64_t C) : A_(A), B_(B), C_(C) {}
  std::string op() const override { return "transpose_blocks"; }
  std::string params() const override { return fmt::format("A={},B={},C={}", A_, B_, C_); }
  std::vector<InputSpec> inputs() const override { return {{"x", {A_, B_, C_}}}; }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Tensor y = poisoned(ctx, Shape({B_, A_, C_}), in[0].dtype());
    ops::transpose_blocks(ctx, in[0], A_, B_, y);
    return {y};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    Tensor dx = poisoned(ctx, in[0].shape(), in[0].dtype());
    ops::transpose_blocks(ctx, douts[0], B_, A_, dx);
    return {dx};
  }

 private:
  int64_t A_, B_, C_;
};

NM_OP_CASES(transpose_blocks_cases) {
  CaseList c;
  c.push_back(std::make_unique<TransposeBlocksCase>(2, 3, 5));   // 10/20-byte blocks: 2- and 4-byte units
  c.push_back(std::make_unique<TransposeBlocksCase>(4, 7, 64));  // 16-byte units
  c.push_back(std::make_unique<TransposeBlocksCase>(3, 1, 9));   // B = 1: a plain copy
  c.push_back(std::make_unique<TransposeBlocksCase>(2, 33, 1));  // one-element blocks
  return c;
}

TEST(TransposeBlocks, moves_integer_blocks_exactly) {
  Context ctx = cpu_context(DType::f32);
  std::vector<int32_t> v(2 * 3 * 2);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(i);
  Tensor x = Tensor::from_vector<int32_t>({2, 3, 2}, v), y = Tensor::empty({3, 2, 2}, DType::i32);
  ops::transpose_blocks(ctx, x, 2, 3, y);
  const int32_t* p = y.data<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(p, p + 12), (std::vector<int32_t>{0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11}));
  Tensor wrong = Tensor::empty({5}, DType::i32);
  EXPECT_THROW(ops::transpose_blocks(ctx, x, 2, 3, wrong), Error);
}

}  // namespace
}  // namespace nemotron::testing
