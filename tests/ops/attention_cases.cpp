// Causal GQA attention: gradients for q, k, v through the lse-recomputing backward, and the
// forward (o and lse) against a direct triple loop, including several query blocks (T > 64).
#include <gtest/gtest.h>

#include <cmath>

#include "core/rng.h"
#include "harness.h"
#include "ops/attention.h"

namespace nemotron::testing {
namespace {

class AttentionCase : public OpCase {
 public:
  AttentionCase(int64_t B, int64_t T, int64_t nq, int64_t nkv, int64_t hd, int64_t grad_samples = 96)
      : B_(B), T_(T), nq_(nq), nkv_(nkv), hd_(hd), grad_samples_(grad_samples) {}
  std::string op() const override { return "attention"; }
  std::string params() const override { return fmt::format("B={},T={},nq={},nkv={},hd={}", B_, T_, nq_, nkv_, hd_); }
  std::vector<InputSpec> inputs() const override {
    return {{"q", {B_, T_, nq_, hd_}, DType::f64, true, -2.0, 2.0},
            {"k", {B_, T_, nkv_, hd_}, DType::f64, true, -2.0, 2.0},
            {"v", {B_, T_, nkv_, hd_}}};
  }
  // The tile-sized cases cost ~1e8 flops per CPU forward: sample fewer elements for the FD check.
  int64_t grad_max_elements() const override { return grad_samples_; }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Tensor o, lse;
    run(ctx, in, o, lse);
    return {o};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    Tensor o, lse;
    run(ctx, in, o, lse);
    DType dt = in[0].dtype();
    Tensor dq = ctx.empty(in[0].shape(), dt), dk = ctx.empty(in[1].shape(), dt), dv = ctx.empty(in[2].shape(), dt);
    ops::attention_backward(ctx, in[0], in[1], in[2], o, lse, douts[0], dq, dk, dv);
    return {dq, dk, dv};
  }

 private:
  void run(Context& ctx, const std::vector<Tensor>& in, Tensor& o, Tensor& lse) const {
    o = ctx.empty(in[0].shape(), in[0].dtype());
    lse = ctx.empty({B_, nq_, T_}, stat_dtype(in[0].dtype()));
    ops::attention_forward(ctx, in[0], in[1], in[2], o, lse);
  }
  int64_t B_, T_, nq_, nkv_, hd_, grad_samples_;
};

NM_OP_CASES(attention_cases) {
  CaseList c;
  c.push_back(std::make_unique<AttentionCase>(2, 5, 2, 1, 3));
  c.push_back(std::make_unique<AttentionCase>(3, 13, 4, 2, 8));
  c.push_back(std::make_unique<AttentionCase>(2, 9, 4, 1, 5));
  c.push_back(std::make_unique<AttentionCase>(2, 67, 2, 2, 4));  // two query blocks
  // CUDA tile shapes: head dims of the flash path (64, 128, and 40 padded to 64), T not a
  // multiple of the 64/128-row tiles, group 1 and group > 1.
  c.push_back(std::make_unique<AttentionCase>(2, 77, 2, 2, 64, 12));
  c.push_back(std::make_unique<AttentionCase>(2, 130, 4, 2, 128, 8));
  c.push_back(std::make_unique<AttentionCase>(2, 130, 3, 1, 64, 8));
  c.push_back(std::make_unique<AttentionCase>(1, 200, 4, 4, 128, 8));
  c.push_back(std::make_unique<AttentionCase>(2, 77, 6, 2, 40, 8));
  return c;
}

TEST(Attention, forward_matches_direct_loop_f64) {
  const int64_t B = 2, T = 70, nq = 6, nkv = 2, hd = 5;
  Tensor q = Tensor::empty({B, T, nq, hd}, DType::f64), k = Tensor::empty({B, T, nkv, hd}, DType::f64);
  Tensor v = Tensor::empty({B, T, nkv, hd}, DType::f64);
  fill_uniform(q, Philox(1, 0), -2, 2);
  fill_uniform(k, Philox(1, 1), -2, 2);
  fill_uniform(v, Philox(1, 2), -1, 1);
  Tensor o = Tensor::empty(q.shape(), DType::f64), lse = Tensor::empty({B, nq, T}, DType::f64);
  Context ctx = cpu_context(DType::f64);
  ops::attention_forward(ctx, q, k, v, o, lse);
  const double *Q = q.data<double>(), *Kp = k.data<double>(), *V = v.data<double>();
  double max_err = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < nq; ++h) {
      const int64_t j = h / (nq / nkv);  // KV head j serves query heads j*3 .. j*3+2
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> s(static_cast<size_t>(t + 1));
        double z = 0;
        for (int64_t r = 0; r <= t; ++r) {
          double dot = 0;
          for (int64_t c = 0; c < hd; ++c) dot += Q[((b * T + t) * nq + h) * hd + c] * Kp[((b * T + r) * nkv + j) * hd + c];
          s[r] = std::exp(dot / std::sqrt(double(hd)));
          z += s[r];
        }
        max_err = std::max(max_err, std::fabs(lse.data<double>()[(b * nq + h) * T + t] - std::log(z)));
        for (int64_t c = 0; c < hd; ++c) {
          double want = 0;
          for (int64_t r = 0; r <= t; ++r) want += s[r] / z * V[((b * T + r) * nkv + j) * hd + c];
          max_err = std::max(max_err, std::fabs(o.data<double>()[((b * T + t) * nq + h) * hd + c] - want));
        }
      }
    }
  EXPECT_LT(max_err, 1e-12);
}

}  // namespace
}  // namespace nemotron::testing
