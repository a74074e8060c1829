// Causal GQA attention: gradients for q, k, v through the lse-recomputing backward, and the
// forward (o and lse) against a direct triple loop, including several query blocks (T > 64).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/rng.h"
#include "harness.h"
#include "ops/attention.h"
#if NEMOTRON_CUDA
#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_backend.h"
#endif

namespace nemotron::testing {
namespace {

class AttentionCase : public OpCase {
 public:
  AttentionCase(int64_t B, int64_t T, int64_t nq, int64_t nkv, int64_t hd) : B_(B), T_(T), nq_(nq), nkv_(nkv), hd_(hd) {}
  std::string op() const override { return "attention"; }
  std::string params() const override { return fmt::format("B={},T={},nq={},nkv={},hd={}", B_, T_, nq_, nkv_, hd_); }
  std::vector<InputSpec> inputs() const override {
    return {{"q", {B_, T_, nq_, hd_}, DType::f64, true, -2.0, 2.0},
            {"k", {B_, T_, nkv_, hd_}, DType::f64, true, -2.0, 2.0},
            {"v", {B_, T_, nkv_, hd_}}};
  }
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
  int64_t B_, T_, nq_, nkv_, hd_;
};

NM_OP_CASES(attention_cases) {
  CaseList c;
  c.push_back(std::make_unique<AttentionCase>(2, 5, 2, 1, 3));
  c.push_back(std::make_unique<AttentionCase>(3, 13, 4, 2, 8));
  c.push_back(std::make_unique<AttentionCase>(2, 9, 4, 1, 5));
  c.push_back(std::make_unique<AttentionCase>(2, 67, 2, 2, 4));  // two query blocks
  // CUDA tile shapes: head dims of the flash path (64, 128, and 40 padded to 64), T not a
  // multiple of the 64/128-row tiles, group 1 and group > 1.
  c.push_back(std::make_unique<AttentionCase>(2, 77, 2, 2, 64));
  c.push_back(std::make_unique<AttentionCase>(2, 130, 4, 2, 128));
  c.push_back(std::make_unique<AttentionCase>(2, 130, 3, 1, 64));
  c.push_back(std::make_unique<AttentionCase>(1, 200, 4, 4, 128));
  c.push_back(std::make_unique<AttentionCase>(2, 77, 6, 2, 40));
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

#if NEMOTRON_CUDA
// Outputs start as NaN bytes, so an element a kernel forgets to write fails; two backward runs
// must agree bit for bit (no atomics). Shapes hit the flash path with the dK/dV head split
// (nkv = 2) and tails, and the simt path.
TEST(Attention, cuda_writes_every_output_and_backward_is_deterministic) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::CudaBackend gpu(0);
  struct Shape5 { int64_t B, T, nq, nkv, hd; DType dt; };
  for (Shape5 c : {Shape5{2, 130, 8, 2, 128, DType::bf16}, Shape5{1, 77, 4, 1, 64, DType::bf16},
                   Shape5{2, 77, 4, 2, 40, DType::f32}}) {
    Context ctx{&gpu, nullptr, c.dt};
    auto random = [&](Shape shape, uint64_t seed) {
      Tensor t = Tensor::empty(shape, DType::f64);
      fill_uniform(t, Philox(seed), -1, 1);
      return t.to_host(c.dt).to(gpu);
    };
    auto poisoned = [&](Shape shape, DType dt) {
      Tensor t = ctx.empty(shape, dt);
      EXPECT_EQ(cudaMemsetAsync(t.raw(), 0xff, t.nbytes(), gpu.stream()), cudaSuccess);
      return t;
    };
    auto finite = [](const Tensor& t) {
      for (double x : t.to_f64_vector())
        if (!std::isfinite(x)) return false;
      return true;
    };
    Tensor q = random({c.B, c.T, c.nq, c.hd}, 1), k = random({c.B, c.T, c.nkv, c.hd}, 2);
    Tensor v = random({c.B, c.T, c.nkv, c.hd}, 3), dout = random({c.B, c.T, c.nq, c.hd}, 4);
    Tensor o = poisoned(q.shape(), c.dt), lse = poisoned({c.B, c.nq, c.T}, DType::f32);
    ops::attention_forward(ctx, q, k, v, o, lse);
    EXPECT_TRUE(finite(o) && finite(lse)) << "forward left elements unwritten, T=" << c.T << " hd=" << c.hd;
    std::vector<std::vector<double>> first;
    for (int run = 0; run < 2; ++run) {
      Tensor dq = poisoned(q.shape(), c.dt), dk = poisoned(k.shape(), c.dt), dv = poisoned(v.shape(), c.dt);
      ops::attention_backward(ctx, q, k, v, o, lse, dout, dq, dk, dv);
      EXPECT_TRUE(finite(dq) && finite(dk) && finite(dv)) << "backward left elements unwritten, hd=" << c.hd;
      std::vector<std::vector<double>> got{dq.to_f64_vector(), dk.to_f64_vector(), dv.to_f64_vector()};
      if (run == 0) first = got;
      else EXPECT_TRUE(got == first) << "backward not bitwise reproducible, hd=" << c.hd;
    }
  }
}
#endif

}  // namespace
}  // namespace nemotron::testing
