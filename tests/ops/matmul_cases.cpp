// GEMM: c = alpha op(a) op(b) + beta c in every transpose form, batched (own or shared b), odd
// sizes, a float32 output from bfloat16 inputs (the dW / router-logit form); and the linear layer
// (bias fused on CUDA) with its backward, dW in grad_dtype.
#include "harness.h"
#include "ops/bias.h"
#include "ops/cast.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "poison.h"

namespace nemotron::testing {
namespace {

struct MatmulShape {
  int64_t M, N, K;
  bool trans_a = false, trans_b = false;
  int64_t batch = 0;      // 0: 2-D operands
  bool shared_b = false;  // batched a and c with one 2-D b
  double alpha = 1.0, beta = 0.0;
  bool wide_c = false;    // c in grad_dtype (float32 for bfloat16 a/b)
};

class MatmulCase : public OpCase {
 public:
  explicit MatmulCase(MatmulShape s) : s_(s) {}
  std::string op() const override { return "matmul"; }
  std::string params() const override {
    return fmt::format("M={},N={},K={},ta={},tb={},batch={}{},alpha={},beta={}{}", s_.M, s_.N, s_.K, s_.trans_a,
                       s_.trans_b, s_.batch, s_.shared_b ? ",shared_b" : "", s_.alpha, s_.beta,
                       s_.wide_c ? ",c=grad_dtype" : "");
  }
  std::vector<InputSpec> inputs() const override {
    std::vector<InputSpec> in{{"a", batched(s_.trans_a ? Shape{s_.K, s_.M} : Shape{s_.M, s_.K}, s_.batch)},
                              {"b", batched(s_.trans_b ? Shape{s_.N, s_.K} : Shape{s_.K, s_.N},
                                            s_.shared_b ? 0 : s_.batch)}};
    if (s_.beta != 0.0) in.push_back({"c0", c_shape()});
    return in;
  }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    DType c_dt = s_.wide_c ? grad_dtype(in[0].dtype()) : in[0].dtype();
    Tensor c = poisoned(ctx, c_shape(), c_dt);
    if (s_.beta != 0.0) ops::cast(ctx, in[2], c);
    ops::matmul(ctx, in[0], s_.trans_a, in[1], s_.trans_b, c, s_.alpha, s_.beta);
    return {c};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    DType dt = in[0].dtype();
    Tensor dc = ctx.empty(c_shape(), dt);
    ops::cast(ctx, douts[0], dc);  // a float32 dc of a wide output back to the inputs' dtype
    const Tensor &a = in[0], &b = in[1];
    Tensor da = poisoned(ctx, a.shape(), dt);
    Tensor db = s_.shared_b ? ctx.zeros(b.shape(), dt) : poisoned(ctx, b.shape(), dt);
    if (!s_.shared_b) {
      grads(ctx, a, b, dc, da, db, 0.0);
    } else {  // b's gradient sums over the batch
      for (int64_t i = 0; i < s_.batch; ++i) {
        Tensor ai = a.select(i), dci = dc.select(i), dai = da.select(i);
        grads(ctx, ai, b, dci, dai, db, 1.0);
      }
    }
    std::vector<Tensor> g{da, db};
    if (s_.beta != 0.0) {
      Tensor dc0 = dc.clone();
      ops::scale_inplace(ctx, dc0, s_.beta);
      g.push_back(dc0);
    }
    return g;
  }

 private:
  static Shape batched(const Shape& s, int64_t batch) { return batch ? Shape{batch, s[0], s[1]} : s; }
  Shape c_shape() const { return batched({s_.M, s_.N}, s_.batch); }
  // da = alpha dc op(b)^T (as stored), db (+)= alpha op(a)^T dc (as stored).
  void grads(Context& ctx, const Tensor& a, const Tensor& b, const Tensor& dc, Tensor& da, Tensor& db,
             double db_beta) const {
    if (!s_.trans_a) ops::matmul(ctx, dc, false, b, !s_.trans_b, da, s_.alpha);
    else ops::matmul(ctx, b, s_.trans_b, dc, true, da, s_.alpha);
    if (!s_.trans_b) ops::matmul(ctx, a, !s_.trans_a, dc, false, db, s_.alpha, db_beta);
    else ops::matmul(ctx, dc, true, a, s_.trans_a, db, s_.alpha, db_beta);
  }
  MatmulShape s_;
};

// y = x W^T (+ b); dx = dy W, dW += dy^T x, db += sum dy (the parameter gradients in grad_dtype).
class LinearCase : public OpCase {
 public:
  LinearCase(Shape x, int64_t out, bool bias) : x_(std::move(x)), out_(out), bias_(bias) {}
  std::string op() const override { return "matmul"; }
  std::string params() const override {
    return fmt::format("linear,x={},out={},bias={}", x_.str(), out_, bias_);
  }
  std::vector<InputSpec> inputs() const override {
    std::vector<InputSpec> in{{"x", x_}, {"w", {out_, x_[-1]}}};
    if (bias_) in.push_back({"b", {out_}});
    return in;
  }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Tensor y = poisoned(ctx, y_shape(), in[0].dtype());
    ops::linear_forward(ctx, in[0], in[1], y, bias_ ? &in[2] : nullptr);
    return {y};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    DType dt = in[0].dtype();
    Tensor dx = poisoned(ctx, x_, dt), dw = ctx.zeros(in[1].shape(), grad_dtype(dt));
    ops::linear_backward(ctx, in[0], in[1], douts[0], &dx, &dw);
    std::vector<Tensor> g{dx, dw};
    if (bias_) {
      Tensor db = ctx.zeros({out_}, grad_dtype(dt));
      ops::bias_backward(ctx, douts[0], db);
      g.push_back(db);
    }
    return g;
  }

 private:
  Shape y_shape() const {
    std::vector<int64_t> d = x_.dims();
    d.back() = out_;
    return Shape(d);
  }
  Shape x_;
  int64_t out_;
  bool bias_;
};

// MoE-style row groups: y_g = x_g W^T for row slices of varying length, dx_g = dy_g W, and
// dW += dy_g^T x_g over the groups. Groups 2 and 3 fall in one size bucket (same alignment), so
// they run the algorithm cached for the other shape.
class MatmulRowGroupsCase : public OpCase {
 public:
  std::string op() const override { return "matmul"; }
  std::string params() const override { return "row_groups=16+24+21,N=48,K=32"; }
  std::vector<InputSpec> inputs() const override { return {{"x", {kRows, 32}}, {"w", {48, 32}}}; }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Tensor y = poisoned(ctx, {kRows, 48}, in[0].dtype());
    for (auto [r0, r1] : kGroups) {
      Tensor yg = y.slice(r0, r1);
      ops::matmul(ctx, in[0].slice(r0, r1), false, in[1], true, yg);
    }
    return {y};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    DType dt = in[0].dtype();
    Tensor dx = poisoned(ctx, in[0].shape(), dt), dw = ctx.zeros(in[1].shape(), grad_dtype(dt));
    for (auto [r0, r1] : kGroups) {
      Tensor dxg = dx.slice(r0, r1), dyg = douts[0].slice(r0, r1);
      ops::matmul(ctx, dyg, false, in[1], false, dxg);
      ops::matmul(ctx, dyg, true, in[0].slice(r0, r1), false, dw, 1.0, 1.0);
    }
    return {dx, dw};
  }

 private:
  static constexpr int64_t kRows = 61;
  static constexpr std::pair<int64_t, int64_t> kGroups[] = {{0, 16}, {16, 40}, {40, 61}};
};

NM_OP_CASES(matmul_cases) {
  CaseList c;
  auto add = [&](MatmulShape s) { c.push_back(std::make_unique<MatmulCase>(s)); };
  add({37, 53, 29});
  add({37, 53, 29, true, false});
  add({37, 53, 29, false, true});
  add({37, 53, 29, true, true});
  add({21, 19, 45, false, true, 0, false, 0.75, 0.5});                // beta accumulate
  add({13, 11, 17, false, true, 3});                                   // batched, own b
  add({13, 11, 17, true, false, 3, false, 1.25, 1.0});                 // batched, beta
  add({13, 11, 17, false, true, 3, true});                             // shared b (one folded GEMM)
  add({13, 11, 17, true, false, 3, true});                             // shared b, transposed a
  add({131, 67, 200, false, false});                                   // several tensor-core tiles
  add({45, 29, 37, true, false, 0, false, 1.0, 1.0, true});            // dW += dy^T x, float32 c
  add({33, 9, 29, false, true, 0, false, 1.0, 0.0, true});             // router logits, float32 c
  c.push_back(std::make_unique<MatmulRowGroupsCase>());
  c.push_back(std::make_unique<LinearCase>(Shape{3, 11, 29}, 45, false));
  c.push_back(std::make_unique<LinearCase>(Shape{3, 11, 29}, 45, true));
  c.push_back(std::make_unique<LinearCase>(Shape{70, 64}, 96, true));  // aligned shapes
  return c;
}

}  // namespace
}  // namespace nemotron::testing
