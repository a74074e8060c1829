// causal_conv1d: depthwise causal conv + bias + SiLU; gradients for x, weight and bias (float32
// parameter gradients on a bf16 target, accumulated into a non-zero buffer). Packed rows
// (seq_idx): the same checks with several sequences per row, and the proof that a packed row
// gives every sequence exactly what it gets alone (y, dx; dw and dbias sum over the sequences).
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "case_buffers.h"
#include "core/rng.h"
#include "harness.h"
#include "ops/causal_conv1d.h"
#include "packed_rows.h"

namespace nemotron::testing {
namespace {

class CausalConv1dCase : public OpCase {
 public:
  // hf_layout: weight given as [C, 1, K] (the Hub tensor) instead of [C, K].
  CausalConv1dCase(int64_t B, int64_t T, int64_t C, int64_t K, bool bias, bool hf_layout, PackedLayout packed = {})
      : B_(B), T_(T), C_(C), K_(K), bias_(bias), hf_(hf_layout), packed_(std::move(packed)) {}
  std::string op() const override { return "causal_conv1d"; }
  std::string params() const override {
    return fmt::format("B={},T={},C={},K={},bias={}{}{}", B_, T_, C_, K_, bias_ ? 1 : 0, hf_ ? ",w=[C,1,K]" : "",
                       packed_.empty() ? "" : ",packed=" + layout_str(packed_));
  }
  std::vector<InputSpec> inputs() const override {
    std::vector<InputSpec> in{{"x", {B_, T_, C_}}, {"w", hf_ ? Shape{C_, 1, K_} : Shape{C_, K_}}};
    if (bias_) in.push_back({"bias", {C_}});
    return in;
  }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Tensor y = poisoned(ctx, in[0].shape(), in[0].dtype());
    ops::causal_conv1d_forward(ctx, in[0], in[1], bias_ ? in[2] : Tensor(), y, seq_idx(ctx));
    return {y};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    DType dt = in[0].dtype();
    Tensor dx = poisoned(ctx, in[0].shape(), dt), dw = grad_buffer(ctx, in[1].shape(), dt);
    Tensor db = bias_ ? grad_buffer(ctx, {C_}, dt) : Tensor();
    ops::causal_conv1d_backward(ctx, in[0], in[1], bias_ ? in[2] : Tensor(), douts[0], dx, dw, db, seq_idx(ctx));
    std::vector<Tensor> g{dx, accumulated(dw)};
    if (bias_) g.push_back(accumulated(db));
    return g;
  }

 private:
  Tensor seq_idx(Context& ctx) const { return packed_.empty() ? Tensor() : seq_idx_tensor(ctx, packed_, T_); }
  int64_t B_, T_, C_, K_;
  bool bias_, hf_;
  PackedLayout packed_;
};

// causal_conv1d_*_parts: the channels in up to three tensors (Mamba's x, B, C), one launch on CUDA;
// checked like the plain op (its gradients against float64 differences, the GPU against the CPU),
// so the parts' channel offsets into w, bias, dw and dbias are proven too.
class CausalConv1dPartsCase : public OpCase {
 public:
  CausalConv1dPartsCase(int64_t B, int64_t T, std::vector<int64_t> C, int64_t K, bool bias, PackedLayout packed = {})
      : B_(B), T_(T), C_(std::move(C)), K_(K), bias_(bias), packed_(std::move(packed)) {}
  std::string op() const override { return "causal_conv1d"; }
  std::string params() const override {
    return fmt::format("B={},T={},parts={},K={},bias={}{}", B_, T_, fmt::join(C_, "/"), K_, bias_ ? 1 : 0,
                       packed_.empty() ? "" : ",packed=" + layout_str(packed_));
  }
  std::vector<InputSpec> inputs() const override {
    std::vector<InputSpec> in;
    int64_t total = 0;
    for (size_t p = 0; p < C_.size(); ++p) in.push_back({fmt::format("x{}", p), {B_, T_, C_[p]}}), total += C_[p];
    in.push_back({"w", {total, 1, K_}});
    if (bias_) in.push_back({"bias", {total}});
    return in;
  }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    const size_t n = C_.size();
    std::vector<Tensor> ys;
    for (size_t p = 0; p < n; ++p) ys.push_back(poisoned(ctx, in[p].shape(), in[p].dtype()));
    ops::causal_conv1d_forward_parts(ctx, {in.data(), n}, in[n], bias_ ? in[n + 1] : Tensor(), ys, seq_idx(ctx));
    return ys;
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    const size_t n = C_.size();
    const DType dt = in[0].dtype();
    std::vector<Tensor> dxs;
    for (size_t p = 0; p < n; ++p) dxs.push_back(poisoned(ctx, in[p].shape(), dt));
    Tensor dw = grad_buffer(ctx, in[n].shape(), dt), db = bias_ ? grad_buffer(ctx, in[n + 1].shape(), dt) : Tensor();
    ops::causal_conv1d_backward_parts(ctx, {in.data(), n}, in[n], bias_ ? in[n + 1] : Tensor(), douts, dxs, dw, db,
                                      seq_idx(ctx));
    std::vector<Tensor> g = dxs;
    g.push_back(accumulated(dw));
    if (bias_) g.push_back(accumulated(db));
    return g;
  }

 private:
  Tensor seq_idx(Context& ctx) const { return packed_.empty() ? Tensor() : seq_idx_tensor(ctx, packed_, T_); }
  int64_t B_, T_;
  std::vector<int64_t> C_;
  int64_t K_;
  bool bias_;
  PackedLayout packed_;
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
  // Packed rows: sequences shorter than K, length 1, odd lengths; both channel paths.
  c.push_back(std::make_unique<CausalConv1dCase>(2, 12, 7, 4, true, true, PackedLayout{{1, 2, 4, 5}, {3, 1, 1, 7}}));
  c.push_back(std::make_unique<CausalConv1dCase>(2, 9, 8, 3, false, false, PackedLayout{{2, 7}, {9}}));
  // Boundaries next to the CUDA time blocks (128 steps) and partial channel blocks.
  c.push_back(std::make_unique<CausalConv1dCase>(2, 301, 36, 4, true, false,
                                                 PackedLayout{{127, 1, 2, 128, 43}, {1, 129, 3, 168}}));
  c.push_back(std::make_unique<CausalConv1dCase>(1, 150, 67, 4, true, false, PackedLayout{{61, 1, 1, 87}}));
  // The CUDA backward streams 64 steps a thread and 512 a block: several blocks per sequence, a
  // last span shorter than K-1, and packed boundaries on both sides of those edges.
  c.push_back(std::make_unique<CausalConv1dCase>(2, 1090, 8, 4, true, false));
  c.push_back(std::make_unique<CausalConv1dCase>(1, 1100, 8, 4, true, false, PackedLayout{{63, 1, 448, 2, 511, 75}}));
  c.push_back(std::make_unique<CausalConv1dCase>(1, 577, 5, 3, false, false, PackedLayout{{64, 449, 64}}));
  // Parts: Mamba-like widths (vector path), an odd part (one channel per thread for all), one part,
  // several time blocks, packed rows.
  c.push_back(std::make_unique<CausalConv1dPartsCase>(2, 9, std::vector<int64_t>{8, 4, 4}, 4, true));
  c.push_back(std::make_unique<CausalConv1dPartsCase>(2, 37, std::vector<int64_t>{136, 8, 8}, 4, false));
  c.push_back(std::make_unique<CausalConv1dPartsCase>(1, 301, std::vector<int64_t>{68, 12, 12}, 4, true));
  c.push_back(std::make_unique<CausalConv1dPartsCase>(2, 12, std::vector<int64_t>{7, 4, 4}, 3, true));
  c.push_back(std::make_unique<CausalConv1dPartsCase>(2, 10, std::vector<int64_t>{12}, 4, true));
  c.push_back(std::make_unique<CausalConv1dPartsCase>(2, 12, std::vector<int64_t>{8, 4, 4}, 4, true,
                                                      PackedLayout{{1, 2, 4, 5}, {3, 1, 1, 7}}));
  return c;
}

// THE proof for causal conv1d on packed rows.
TEST(CausalConv1d, packed_row_equals_each_sequence_alone_f64) {
  const int64_t B = 2, T = 40, C = 9, K = 4;
  const PackedLayout layout{{1, 2, 3, 4, 13, 17}, {40}};
  Context ctx = cpu_context(DType::f64);
  auto random = [](Shape shape, uint64_t seed) {
    Tensor t = Tensor::empty(shape, DType::f64);
    fill_uniform(t, Philox(seed), -1, 1);
    return t;
  };
  Tensor x = random({B, T, C}, 1), w = random({C, K}, 2), bias = random({C}, 3), dy = random({B, T, C}, 4);
  auto run = [&](const Tensor& x_, const Tensor& dy_, const Tensor& seq, Tensor& dw, Tensor& db) {
    Tensor y = Tensor::empty(x_.shape(), DType::f64), dx = Tensor::empty(x_.shape(), DType::f64);
    ops::causal_conv1d_forward(ctx, x_, w, bias, y, seq);
    ops::causal_conv1d_backward(ctx, x_, w, bias, dy_, dx, dw, db, seq);
    return std::vector<Tensor>{y, dx};
  };
  Tensor dw_packed = Tensor::zeros({C, K}, DType::f64), db_packed = Tensor::zeros({C}, DType::f64);
  Tensor dw_alone = Tensor::zeros({C, K}, DType::f64), db_alone = Tensor::zeros({C}, DType::f64);
  std::vector<Tensor> packed = run(x, dy, seq_idx_tensor(ctx, layout, T), dw_packed, db_packed);
  for (size_t b = 0; b < layout.size(); ++b)
    for (auto [s, e] : spans(layout, b)) {
      std::vector<Tensor> alone = run(tokens(x, b, s, e).clone(), tokens(dy, b, s, e).clone(), Tensor(), dw_alone,
                                      db_alone);
      EXPECT_LT(relative_error(tokens(packed[0], b, s, e), alone[0]), 1e-13) << "y of row " << b << " at " << s;
      EXPECT_LT(relative_error(tokens(packed[1], b, s, e), alone[1]), 1e-13) << "dx of row " << b << " at " << s;
    }
  EXPECT_LT(relative_error(dw_packed, dw_alone), 1e-13);
  EXPECT_LT(relative_error(db_packed, db_alone), 1e-13);
}

}  // namespace
}  // namespace nemotron::testing
