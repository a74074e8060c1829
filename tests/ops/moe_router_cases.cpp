// MoE routing: gradient of the combine weights to the router logits (sigmoid, top-k, optional
// renormalisation, scaling), and hand-worked choices: group-limited top-k, the correction bias
// changing the choice but not the weights, lowest-index tie-breaking, and config validation.
#include <gtest/gtest.h>

#include "harness.h"
#include "ops/moe_router.h"

namespace nemotron::testing {
namespace {

// The choice is made from its own float32 input `sel` (statistic-like scores in (0, 1)) rather
// than from sigmoid(logits): a bfloat16 target sees rounded logits, and near-ties would then pick
// other experts than the float64 reference. The weights and their gradient use sigmoid(logits) at
// that choice, as in the model (whose choice is piecewise constant in the logits anyway).
class MoeRouterCase : public OpCase {
 public:
  MoeRouterCase(int64_t N, ops::MoeRouterParams p) : N_(N), p_(p) {}
  std::string op() const override { return "moe_router"; }
  std::string params() const override {
    return fmt::format("N={},E={},K={},n_group={},topk_group={},norm={},scale={}", N_, p_.num_experts, p_.top_k,
                       p_.n_group, p_.topk_group, p_.norm_topk_prob ? 1 : 0, p_.routed_scaling_factor);
  }
  std::vector<InputSpec> inputs() const override {
    InputSpec sel{"sel", {N_, p_.num_experts}, DType::f64, false, 0.02, 0.98};
    InputSpec bias{"bias", {p_.num_experts}, DType::f64, false, -0.3, 0.3};
    sel.stat = bias.stat = true;
    return {{"logits", {N_, p_.num_experts}, DType::f64, true, -3.0, 3.0}, sel, bias};
  }
  // Outputs: the weights and the choice (the backend check requires the same choice).
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Tensor scores, idx, w;
    run(ctx, in, scores, idx, w);
    return {w, idx};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    Tensor scores, idx, w;
    run(ctx, in, scores, idx, w);
    Tensor dlogits = ctx.empty(scores.shape(), in[0].dtype());
    ops::moe_router_backward(ctx, p_, scores, idx, douts[0], dlogits);
    return {dlogits, Tensor(), Tensor()};
  }

 private:
  void run(Context& ctx, const std::vector<Tensor>& in, Tensor& scores, Tensor& idx, Tensor& w) const {
    DType st = stat_dtype(in[0].dtype());
    scores = ctx.empty({N_, p_.num_experts}, st);
    idx = ctx.empty({N_, p_.top_k}, DType::i32);
    w = ctx.empty({N_, p_.top_k}, st);
    ops::moe_router_scores(ctx, in[0], scores);
    ops::moe_select_experts(ctx, p_, in[1], in[2], idx);
    ops::moe_topk_weights(ctx, p_, scores, idx, w);
  }
  int64_t N_;
  ops::MoeRouterParams p_;
};

ops::MoeRouterParams params(int64_t E, int64_t K, int64_t G, int64_t tg, bool norm, double scale) {
  ops::MoeRouterParams p;
  p.num_experts = E, p.top_k = K, p.n_group = G, p.topk_group = tg, p.norm_topk_prob = norm;
  p.routed_scaling_factor = scale;
  return p;
}

NM_OP_CASES(moe_router_cases) {
  CaseList c;
  c.push_back(std::make_unique<MoeRouterCase>(7, params(8, 2, 4, 2, true, 2.5)));
  c.push_back(std::make_unique<MoeRouterCase>(9, params(6, 3, 3, 2, false, 1.0)));
  c.push_back(std::make_unique<MoeRouterCase>(11, params(5, 3, 1, 1, true, 1.0)));
  c.push_back(std::make_unique<MoeRouterCase>(37, params(12, 3, 3, 2, true, 2.5)));
  c.push_back(std::make_unique<MoeRouterCase>(37, params(70, 6, 1, 1, true, 1.0)));   // > 2 experts per lane
  c.push_back(std::make_unique<MoeRouterCase>(21, params(99, 5, 33, 3, false, 1.5)));  // > 32 groups
  return c;
}

struct Routed {
  std::vector<int32_t> idx;
  std::vector<double> w;
};

// Routes one token with the given (already sigmoid) scores.
Routed route(const ops::MoeRouterParams& p, const std::vector<double>& s, const std::vector<double>& bias) {
  Context ctx = cpu_context(DType::f64);
  Tensor scores = Tensor::from_vector<double>({1, p.num_experts}, s);
  Tensor b = Tensor::from_vector<double>({p.num_experts}, bias);
  Tensor idx = Tensor::empty({1, p.top_k}, DType::i32), w = Tensor::empty({1, p.top_k}, DType::f64);
  ops::moe_select_experts(ctx, p, scores, b, idx);
  ops::moe_topk_weights(ctx, p, scores, idx, w);
  const int32_t* pi = idx.data<int32_t>();
  return {std::vector<int32_t>(pi, pi + p.top_k), w.to_f64_vector()};
}

// 8 experts in 4 groups {0,1} {2,3} {4,5} {6,7}; keep 2 groups, choose 3 experts.
const std::vector<double> kScores{0.9, 0.1, 0.6, 0.5, 0.8, 0.45, 0.3, 0.2};

TEST(MoeRouter, group_limited_topk_matches_hand_worked_example) {
  // Group scores (sum of the top 2): 1.0, 1.1, 1.25, 0.5 -> keep groups 2 and 1, i.e. experts
  // 2..5; the best three of those are 4 (0.8), 2 (0.6), 3 (0.5). Expert 0 has the best score of
  // all but sits in a weak group, so plain top-3 (0, 4, 2) would differ.
  ops::MoeRouterParams p = params(8, 3, 4, 2, true, 2.0);
  Routed r = route(p, kScores, std::vector<double>(8, 0.0));
  EXPECT_EQ(r.idx, (std::vector<int32_t>{4, 2, 3}));
  const double S = 0.8 + 0.6 + 0.5 + 1e-20;
  ASSERT_EQ(r.w.size(), 3u);
  EXPECT_DOUBLE_EQ(r.w[0], 2.0 * 0.8 / S);
  EXPECT_DOUBLE_EQ(r.w[1], 2.0 * 0.6 / S);
  EXPECT_DOUBLE_EQ(r.w[2], 2.0 * 0.5 / S);

  ops::MoeRouterParams plain = params(8, 3, 1, 1, false, 2.5);
  Routed q = route(plain, kScores, std::vector<double>(8, 0.0));
  EXPECT_EQ(q.idx, (std::vector<int32_t>{0, 4, 2}));
  EXPECT_EQ(q.w, (std::vector<double>{0.9 * 2.5, 0.8 * 2.5, 0.6 * 2.5}));  // no renormalisation
}

TEST(MoeRouter, bias_changes_choice_not_weights_and_ties_go_to_lowest_index) {
  // +0.5 on group 3 gives biased scores 0.8, 0.7 there: group scores 1.0, 1.1, 1.25, 1.5 -> keep
  // groups 3 and 2 (experts 4..7). Biased: 0.8, 0.45, 0.8, 0.7 -> expert 4 and 6 tie at 0.8,
  // the lower index comes first; then 7. The weights use the unbiased scores 0.8, 0.3, 0.2.
  ops::MoeRouterParams p = params(8, 3, 4, 2, true, 2.0);
  Routed r = route(p, kScores, {0, 0, 0, 0, 0, 0, 0.5, 0.5});
  EXPECT_EQ(r.idx, (std::vector<int32_t>{4, 6, 7}));
  const double S = 0.8 + 0.3 + 0.2 + 1e-20;
  ASSERT_EQ(r.w.size(), 3u);
  EXPECT_DOUBLE_EQ(r.w[0], 2.0 * 0.8 / S);
  EXPECT_DOUBLE_EQ(r.w[1], 2.0 * 0.3 / S);
  EXPECT_DOUBLE_EQ(r.w[2], 2.0 * 0.2 / S);

  // Equal group scores: the lower group wins; equal experts: the lower index wins.
  ops::MoeRouterParams flat = params(4, 2, 2, 1, false, 1.0);
  Routed t = route(flat, {0.5, 0.5, 0.5, 0.5}, {0, 0, 0, 0});
  EXPECT_EQ(t.idx, (std::vector<int32_t>{0, 1}));
}

TEST(MoeRouter, rejects_impossible_configs_naming_the_field) {
  auto message = [](ops::MoeRouterParams p) {
    try {
      p.validate();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(params(8, 2, 3, 1, true, 1.0)).find("n_group"), std::string::npos);
  EXPECT_NE(message(params(8, 2, 4, 5, true, 1.0)).find("topk_group"), std::string::npos);
  EXPECT_NE(message(params(8, 5, 4, 2, true, 1.0)).find("num_experts_per_tok"), std::string::npos);
  EXPECT_NE(message(params(8, 9, 1, 1, true, 1.0)).find("num_experts_per_tok"), std::string::npos);
  EXPECT_EQ(message(params(8, 4, 4, 2, true, 1.0)), "no error");
}

}  // namespace
}  // namespace nemotron::testing
