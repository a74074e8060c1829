// causal_conv1d_decode: the harness (CPU float32 against float64) on random windows and ragged
// batches, and THE proof: a sequence fed in pieces (down to single tokens, shorter than the
// window) through a zeroed slot gives causal_conv1d_forward over the whole sequence.
#include <gtest/gtest.h>

#include "decode_test_util.h"
#include "harness.h"
#include "ops/causal_conv1d.h"
#include "ops/causal_conv1d_decode.h"

namespace nemotron::testing {
namespace {

class ConvDecodeCase : public OpCase {
 public:
  ConvDecodeCase(std::vector<int32_t> counts, std::vector<int32_t> slots, int64_t num_slots, int64_t C, int64_t K,
                 bool bias)
      : counts_(std::move(counts)), slots_(std::move(slots)), num_slots_(num_slots), C_(C), K_(K), bias_(bias) {
    for (int32_t n : counts_) Ntot_ += n;
  }
  std::string op() const override { return "causal_conv1d_decode"; }
  std::string params() const override {
    return fmt::format("n={},slots={},C={},K={},bias={}", counts_str(counts_), num_slots_, C_, K_, bias_);
  }
  bool has_backward() const override { return false; }
  std::vector<InputSpec> inputs() const override {
    std::vector<InputSpec> in{{"x", {Ntot_, C_}, DType::f64, false},
                              {"w", {C_, 1, K_}, DType::f64, false},
                              {"state", {num_slots_, K_ - 1, C_}, DType::f64, false}};
    if (bias_) in.push_back({"bias", {C_}, DType::f64, false});
    return in;
  }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Tensor state = in[2].clone(), y = ctx.empty(in[0].shape(), in[0].dtype());
    ops::causal_conv1d_decode(ctx, in[0], in[1], bias_ ? in[3] : Tensor(), state, i32_on(ctx, slots_),
                              i32_on(ctx, offsets_of(counts_)), y);
    return {y, state};
  }

 private:
  std::vector<int32_t> counts_, slots_;
  int64_t num_slots_, C_, K_;
  bool bias_;
  int64_t Ntot_ = 0;
};

NM_OP_CASES(causal_conv1d_decode_cases) {
  CaseList c;
  c.push_back(std::make_unique<ConvDecodeCase>(std::vector<int32_t>{1}, std::vector<int32_t>{0}, 1, 5, 4, true));
  c.push_back(std::make_unique<ConvDecodeCase>(std::vector<int32_t>{1, 1, 1}, std::vector<int32_t>{2, 0, 3}, 4, 7, 4, false));
  c.push_back(std::make_unique<ConvDecodeCase>(std::vector<int32_t>{2, 9, 0, 1}, std::vector<int32_t>{1, 0, 3, 2}, 4, 12, 4, true));
  c.push_back(std::make_unique<ConvDecodeCase>(std::vector<int32_t>{3, 1}, std::vector<int32_t>{1, 0}, 2, 6, 2, true));
  c.push_back(
      std::make_unique<ConvDecodeCase>(std::vector<int32_t>{1, 21, 1}, std::vector<int32_t>{4, 1, 2}, 5, 160, 4, true));
  return c;
}

TEST(CausalConv1dDecode, pieces_through_the_window_equal_the_whole_sequence) {
  const int64_t C = 6, K = 4, slots = 3;
  const std::vector<int64_t> len{10, 5}, slot{1, 2};
  const std::vector<std::vector<int32_t>> pieces{{1, 4}, {2, 0}, {1, 1}, {6, 0}};
  Context ctx = cpu_context(DType::f64);
  Tensor w = random_tensor({C, 1, K}, DType::f64, 1), bias = random_tensor({C}, DType::f64, 2);
  Tensor state = Tensor::zeros({slots, K - 1, C}, DType::f64);
  Tensor other = random_tensor({K - 1, C}, DType::f64, 3);
  state.slice(0, 1).copy_from(other.view({1, K - 1, C}));  // slot 0 is busy with something else
  std::vector<Tensor> x, y_dec;
  for (size_t s = 0; s < len.size(); ++s) {
    x.push_back(random_tensor({1, len[s], C}, DType::f64, 10 + s));
    y_dec.push_back(Tensor::empty({len[s], C}, DType::f64));
  }
  std::vector<int64_t> done(len.size(), 0);
  for (const auto& piece : pieces) {
    const int64_t tot = piece[0] + piece[1];
    Tensor px = Tensor::empty({tot, C}, DType::f64), y = Tensor::empty({tot, C}, DType::f64);
    int64_t r = 0;
    for (size_t s = 0; s < len.size(); ++s)
      px.slice(r, r + piece[s]).copy_from(x[s].view({len[s], C}).slice(done[s], done[s] + piece[s])), r += piece[s];
    std::vector<int32_t> slot32(slot.begin(), slot.end());
    ops::causal_conv1d_decode(ctx, px, w, bias, state, i32_tensor(slot32), i32_tensor(offsets_of(piece)), y);
    r = 0;
    for (size_t s = 0; s < len.size(); ++s)
      y_dec[s].slice(done[s], done[s] + piece[s]).copy_from(y.slice(r, r + piece[s])), r += piece[s], done[s] += piece[s];
  }
  for (size_t s = 0; s < len.size(); ++s) {
    ASSERT_EQ(done[s], len[s]);
    Tensor want = Tensor::empty({1, len[s], C}, DType::f64);
    ops::causal_conv1d_forward(ctx, x[s], w, bias, want);
    EXPECT_LT(relative_error(y_dec[s].view(want.shape()), want), 1e-14) << "sequence " << s;
    // The window holds the last K-1 inputs.
    EXPECT_EQ(relative_error(state.slice(slot[s], slot[s] + 1).view({K - 1, C}),
                             x[s].view({len[s], C}).slice(len[s] - (K - 1), len[s])),
              0.0);
  }
  EXPECT_EQ(relative_error(state.slice(0, 1).view({K - 1, C}), other), 0.0);
}

}  // namespace
}  // namespace nemotron::testing
