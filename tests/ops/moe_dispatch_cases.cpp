// MoE dispatch/combine: gradients of the permutation and of the weighted combine (including the
// weights), and the slot layout of a hand-worked routing.
#include <gtest/gtest.h>

#include <numeric>

#include "core/rng.h"
#include "harness.h"
#include "ops/moe_dispatch.h"

namespace nemotron::testing {
namespace {

// A fixed routing with K distinct experts per token (a Philox shuffle per token).
Tensor fixed_routing(int64_t N, int64_t K, int64_t E, uint64_t seed) {
  Tensor idx = Tensor::empty({N, K}, DType::i32);
  Philox rng(seed);
  for (int64_t n = 0; n < N; ++n) {
    std::vector<int32_t> perm(static_cast<size_t>(E));
    std::iota(perm.begin(), perm.end(), 0);
    for (int64_t i = E - 1; i > 0; --i)
      std::swap(perm[i], perm[static_cast<int64_t>(rng.uniform(static_cast<uint64_t>(n * E + i)) * double(i + 1))]);
    for (int64_t j = 0; j < K; ++j) idx.data<int32_t>()[n * K + j] = perm[j];
  }
  return idx;
}

class MoeDispatchCase : public OpCase {
 public:
  MoeDispatchCase(bool combine, int64_t N, int64_t K, int64_t E, int64_t d)
      : combine_(combine), N_(N), K_(K), E_(E), d_(d), idx_(fixed_routing(N, K, E, 17)) {}
  std::string op() const override { return combine_ ? "moe_combine" : "moe_dispatch"; }
  std::string params() const override { return fmt::format("N={},K={},E={},d={}", N_, K_, E_, d_); }
  // The combine weights are statistics (float32 on a bfloat16 target).
  std::vector<InputSpec> inputs() const override {
    InputSpec w{"w", {N_, K_}};
    w.stat = true;
    if (combine_) return {{"ys", {N_ * K_, d_}}, w};
    return {{"x", {N_, d_}}};
  }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    ops::MoeDispatch m = ops::moe_make_dispatch(ctx, idx_.to(*ctx.backend), E_);
    if (combine_) {
      Tensor y = ctx.empty({N_, d_}, in[0].dtype());
      ops::moe_combine_forward(ctx, m, in[0], in[1], y);
      return {y};
    }
    Tensor xs = ctx.empty({N_ * K_, d_}, in[0].dtype());
    ops::moe_dispatch_forward(ctx, m, in[0], xs);
    return {xs};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    ops::MoeDispatch m = ops::moe_make_dispatch(ctx, idx_.to(*ctx.backend), E_);
    DType dt = in[0].dtype();
    if (combine_) {
      Tensor dys = ctx.empty({N_ * K_, d_}, dt), dw = ctx.empty({N_, K_}, stat_dtype(dt));
      ops::moe_combine_backward(ctx, m, in[0], in[1], douts[0], dys, dw);
      return {dys, dw};
    }
    Tensor dx = ctx.empty({N_, d_}, dt);
    ops::moe_dispatch_backward(ctx, m, douts[0], dx);
    return {dx};
  }

 private:
  bool combine_;
  int64_t N_, K_, E_, d_;
  Tensor idx_;
};

NM_OP_CASES(moe_dispatch_cases) {
  CaseList c;
  for (bool combine : {false, true}) {
    c.push_back(std::make_unique<MoeDispatchCase>(combine, 7, 2, 5, 3));
    c.push_back(std::make_unique<MoeDispatchCase>(combine, 13, 3, 8, 6));
    c.push_back(std::make_unique<MoeDispatchCase>(combine, 37, 3, 12, 13));   // odd width: scalar path
    c.push_back(std::make_unique<MoeDispatchCase>(combine, 37, 3, 12, 72));   // 16-byte vectors
    c.push_back(std::make_unique<MoeDispatchCase>(combine, 3, 2, 9, 24));     // empty experts
    c.push_back(std::make_unique<MoeDispatchCase>(combine, 1500, 3, 7, 5));   // several slot tiles
  }
  return c;
}

TEST(MoeDispatch, slots_are_expert_major_with_tokens_ascending) {
  Context ctx = cpu_context(DType::f64);
  Tensor idx = Tensor::from_vector<int32_t>({3, 2}, {2, 0, 0, 1, 2, 1});
  ops::MoeDispatch m = ops::moe_make_dispatch(ctx, idx, 4);
  EXPECT_EQ(m.tokens_per_expert, (std::vector<int64_t>{2, 2, 2, 0}));
  EXPECT_EQ(m.expert_offset, (std::vector<int64_t>{0, 2, 4, 6, 6}));
  const int32_t* st = m.slot_token.data<int32_t>();
  const int32_t* so = m.slot_of.data<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(st, st + 6), (std::vector<int32_t>{0, 1, 1, 2, 0, 2}));
  EXPECT_EQ(std::vector<int32_t>(so, so + 6), (std::vector<int32_t>{4, 0, 1, 2, 5, 3}));
  Tensor x = Tensor::from_vector<double>({3, 1}, {10, 20, 30}), xs = Tensor::empty({6, 1}, DType::f64);
  ops::moe_dispatch_forward(ctx, m, x, xs);
  EXPECT_EQ(xs.to_f64_vector(), (std::vector<double>{10, 20, 20, 30, 10, 30}));
  Tensor w = Tensor::from_vector<double>({3, 2}, {1, 2, 3, 4, 5, 6}), y = Tensor::empty({3, 1}, DType::f64);
  ops::moe_combine_forward(ctx, m, xs, w, y);
  EXPECT_EQ(y.to_f64_vector(), (std::vector<double>{30, 140, 330}));
}

}  // namespace
}  // namespace nemotron::testing
