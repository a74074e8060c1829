// RoPE: gradient of the rotation, a hand-worked value that pins the rotate-half pairing and the
// frequencies, the Llama-3 frequency rule (B.3) at the 49B's constants, and in-place use. Packed rows: position_ids restarting at 0 per sequence make a
// packed row rotate every sequence as it rotates alone.
#include <gtest/gtest.h>

#include <cmath>

#include "core/rng.h"
#include "harness.h"
#include "ops/rope.h"
#include "packed_rows.h"

namespace nemotron::testing {
namespace {

class RopeCase : public OpCase {
 public:
  RopeCase(int64_t B, int64_t T, int64_t nh, int64_t hd, ops::RopeFreq freq, int64_t offset, PackedLayout packed = {})
      : B_(B), T_(T), nh_(nh), hd_(hd), freq_(freq), offset_(offset), packed_(std::move(packed)) {}
  std::string op() const override { return "rope"; }
  std::string params() const override {
    std::string llama3 = freq_.llama3() ? fmt::format(",llama3(factor={},low={},high={},L={})", freq_.factor,
                                                      freq_.low_freq_factor, freq_.high_freq_factor,
                                                      freq_.original_max_position_embeddings)
                                        : "";
    return fmt::format("B={},T={},nh={},hd={},theta={}{},offset={}{}", B_, T_, nh_, hd_, freq_.theta, llama3, offset_,
                       packed_.empty() ? "" : ",packed=" + layout_str(packed_));
  }
  std::vector<InputSpec> inputs() const override { return {{"x", {B_, T_, nh_, hd_}}}; }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Tensor y = ctx.empty(in[0].shape(), in[0].dtype());
    ops::rope_forward(ctx, in[0], freq_, y, offset_, positions(ctx));
    return {y};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    Tensor dx = ctx.empty(in[0].shape(), in[0].dtype());
    ops::rope_backward(ctx, douts[0], freq_, dx, offset_, positions(ctx));
    return {dx};
  }

 private:
  Tensor positions(Context& ctx) const { return packed_.empty() ? Tensor() : position_ids_tensor(ctx, packed_, T_); }
  int64_t B_, T_, nh_, hd_;
  ops::RopeFreq freq_;
  int64_t offset_;
  PackedLayout packed_;
};

NM_OP_CASES(rope_cases) {
  CaseList c;
  c.push_back(std::make_unique<RopeCase>(2, 7, 3, 6, ops::RopeFreq{10000.0}, 0));
  c.push_back(std::make_unique<RopeCase>(3, 5, 2, 10, ops::RopeFreq{500000.0}, 11));
  c.push_back(std::make_unique<RopeCase>(2, 77, 3, 128, ops::RopeFreq{10000.0}, 0));
  c.push_back(std::make_unique<RopeCase>(1, 33, 2, 64, ops::RopeFreq{10000.0}, 4000));  // long positions
  c.push_back(std::make_unique<RopeCase>(2, 7, 3, 6, ops::RopeFreq{10000.0}, 0, PackedLayout{{1, 2, 4}, {7}}));
  c.push_back(std::make_unique<RopeCase>(2, 77, 3, 128, ops::RopeFreq{10000.0}, 5, PackedLayout{{1, 40, 36}, {13, 1, 63}}));
  // Llama-3 scaling: the 49B's constants at long positions, and a small L so that hd = 16 has
  // pairs in all three bands (unchanged, interpolated, divided by factor).
  const ops::RopeFreq super49b{500000.0, 8.0, 1.0, 4.0, 8192.0};
  c.push_back(std::make_unique<RopeCase>(2, 19, 3, 128, super49b, 6000));
  c.push_back(std::make_unique<RopeCase>(1, 40, 2, 128, super49b, 0, PackedLayout{{17, 23}}));
  c.push_back(std::make_unique<RopeCase>(2, 9, 2, 16, ops::RopeFreq{10000.0, 4.0, 1.0, 4.0, 64.0}, 3));
  return c;
}

// THE proof for RoPE on packed rows, forward and backward, with and without a position offset.
TEST(Rope, packed_row_with_position_ids_equals_each_sequence_alone) {
  const int64_t B = 2, T = 19, nh = 2, hd = 8;
  const PackedLayout layout{{1, 5, 13}, {19}};
  Context ctx = cpu_context(DType::f64);
  Tensor x = Tensor::empty({B, T, nh, hd}, DType::f64);
  fill_uniform(x, Philox(5), -1, 1);
  Tensor pos = position_ids_tensor(ctx, layout, T);
  for (int64_t offset : {int64_t{0}, int64_t{7}}) {
    Tensor y = Tensor::empty(x.shape(), DType::f64), dx = Tensor::empty(x.shape(), DType::f64);
    ops::rope_forward(ctx, x, ops::RopeFreq{10000.0}, y, offset, pos);
    ops::rope_backward(ctx, x, ops::RopeFreq{10000.0}, dx, offset, pos);
    for (size_t b = 0; b < layout.size(); ++b)
      for (auto [s, e] : spans(layout, b)) {
        Tensor xs = tokens(x, b, s, e).clone();
        Tensor ys = Tensor::empty(xs.shape(), DType::f64), dxs = Tensor::empty(xs.shape(), DType::f64);
        ops::rope_forward(ctx, xs, ops::RopeFreq{10000.0}, ys, offset);
        ops::rope_backward(ctx, xs, ops::RopeFreq{10000.0}, dxs, offset);
        EXPECT_LT(relative_error(tokens(y, b, s, e), ys), 1e-15) << "row " << b << " at " << s;
        EXPECT_LT(relative_error(tokens(dx, b, s, e), dxs), 1e-15) << "row " << b << " at " << s;
      }
  }
}

// hd = 4, theta = 100: frequencies 1 and 100^(-1/2) = 0.1. Dim 0 pairs with dim 2, dim 1 with 3.
TEST(Rope, rotates_dim_i_with_i_plus_half_by_t_times_theta_pow) {
  Context ctx = cpu_context(DType::f64);
  Tensor x = Tensor::from_vector<double>({1, 2, 1, 4}, {0, 0, 0, 0, 1, 2, 3, 4});  // positions 0 and 1
  Tensor y = Tensor::empty(x.shape(), DType::f64);
  ops::rope_forward(ctx, x, ops::RopeFreq{100.0}, y);
  std::vector<double> got = y.to_f64_vector();
  const double c1 = std::cos(1.0), s1 = std::sin(1.0), c2 = std::cos(0.1), s2 = std::sin(0.1);
  std::vector<double> want{0, 0, 0, 0, 1 * c1 - 3 * s1, 2 * c2 - 4 * s2, 3 * c1 + 1 * s1, 4 * c2 + 2 * s2};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-15) << i;
}

// The 49B's RoPE (B.3: theta 5e5, hd 128, factor 8, low 1, high 4, L 8192): wavelengths below
// 2048 keep f_i, above 8192 get f_i / 8, between interpolate. Pairs 0..28 are fast, 29..34 in the
// band (values worked in float64 from the formula of HF _compute_llama3_parameters), 35..63 slow.
TEST(Rope, llama3_frequencies_of_the_49b) {
  const ops::RopeFreq r{500000.0, 8.0, 1.0, 4.0, 8192.0};
  for (int64_t i = 0; i < 64; ++i) {
    const double f = std::pow(500000.0, -2.0 * static_cast<double>(i) / 128.0);
    if (i <= 28) EXPECT_DOUBLE_EQ(ops::rope_inv_freq(r, i, 128), f) << i;
    if (i >= 35) EXPECT_DOUBLE_EQ(ops::rope_inv_freq(r, i, 128), f / 8.0) << i;
  }
  EXPECT_NEAR(ops::rope_inv_freq(r, 29, 128), 0.002166570763503359, 1e-17);
  EXPECT_NEAR(ops::rope_inv_freq(r, 32, 128), 0.0005248461609929547, 1e-17);
  EXPECT_NEAR(ops::rope_inv_freq(r, 34, 128), 0.0001785078127679964, 1e-17);
  // factor 0: plain RoPE, whatever the other fields say.
  EXPECT_DOUBLE_EQ(ops::rope_inv_freq(ops::RopeFreq{500000.0}, 40, 128), std::pow(500000.0, -80.0 / 128.0));
}

// The scaled rotation is still a rotation: its backward (the transpose) inverts it.
TEST(Rope, llama3_backward_inverts_forward_at_long_positions) {
  Context ctx = cpu_context(DType::f64);
  const ops::RopeFreq r{500000.0, 8.0, 1.0, 4.0, 8192.0};
  Tensor x = Tensor::empty({1, 5, 2, 128}, DType::f64);
  fill_uniform(x, Philox(9), -1, 1);
  Tensor y = Tensor::empty(x.shape(), DType::f64), plain = Tensor::empty(x.shape(), DType::f64);
  ops::rope_forward(ctx, x, r, y, 100000);
  ops::rope_forward(ctx, x, ops::RopeFreq{500000.0}, plain, 100000);
  EXPECT_GT(relative_error(y, plain), 1e-3);  // the scaling changes the slow pairs
  ops::rope_backward(ctx, y, r, y, 100000);
  EXPECT_LT(relative_error(y, x), 1e-13);
}

TEST(Rope, in_place_and_backward_inverts_forward) {
  Context ctx = cpu_context(DType::f64);
  Tensor x = Tensor::empty({2, 9, 3, 8}, DType::f64);
  fill_uniform(x, Philox(3), -1, 1);
  Tensor y = x.clone();
  ops::rope_forward(ctx, y, ops::RopeFreq{10000.0}, y, 5);
  Tensor y_oop = Tensor::empty(x.shape(), DType::f64);
  ops::rope_forward(ctx, x, ops::RopeFreq{10000.0}, y_oop, 5);
  EXPECT_EQ(y.to_f64_vector(), y_oop.to_f64_vector());
  ops::rope_backward(ctx, y, ops::RopeFreq{10000.0}, y, 5);  // a rotation's transpose is its inverse
  EXPECT_LT(relative_error(y, x), 1e-14);
}

}  // namespace
}  // namespace nemotron::testing
