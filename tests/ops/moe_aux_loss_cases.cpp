// The sequence aux loss: the per-sequence counts and probability sums (from statistic-like
// float32 scores, so a bfloat16 target makes the same top-k choice as the float64 reference), and
// the gradient to the logits (psum as the output: with counts := dL/dpsum, the backward of
// sum counts * psum is exactly the harness's dL/dlogits).
#include "harness.h"
#include "ops/moe_aux_loss.h"
#include "ops/moe_router.h"

namespace nemotron::testing {
namespace {

class MoeSeqAuxCase : public OpCase {
 public:
  MoeSeqAuxCase(bool grad, int64_t B, int64_t S, int64_t E, int64_t K) : grad_(grad), B_(B), S_(S), E_(E), K_(K) {}
  std::string op() const override { return "moe_seq_aux"; }
  std::string params() const override {
    return fmt::format("{},B={},S={},E={},K={}", grad_ ? "grad" : "counts", B_, S_, E_, K_);
  }
  std::vector<InputSpec> inputs() const override {
    if (grad_) return {{"logits", {B_ * S_, E_}, DType::f64, true, -3.0, 3.0}};
    InputSpec s{"scores", {B_ * S_, E_}, DType::f64, false, 0.02, 0.98};
    s.stat = true;
    return {s};
  }
  bool has_backward() const override { return grad_; }
  // psum sums many tokens, so the loss is large against one logit's effect: a wider step keeps
  // the float64 difference above rounding.
  double fd_step() const override { return 1e-5; }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Tensor scores, counts, psum;
    run(ctx, in, scores, counts, psum);
    if (grad_) return {psum};
    return {counts, psum};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    Tensor scores, counts, psum;
    run(ctx, in, scores, counts, psum);
    Tensor dlogits = ctx.zeros({B_ * S_, E_}, in[0].dtype());
    ops::moe_seq_aux_backward(ctx, K_, scores, douts[0], 1.0, dlogits);
    return {dlogits};
  }

 private:
  void run(Context& ctx, const std::vector<Tensor>& in, Tensor& scores, Tensor& counts, Tensor& psum) const {
    DType st = stat_dtype(in[0].dtype());
    if (grad_) {
      scores = ctx.empty({B_ * S_, E_}, st);
      ops::moe_router_scores(ctx, in[0], scores);
    } else {
      scores = in[0];
    }
    counts = ctx.empty({B_, E_}, st), psum = ctx.empty({B_, E_}, st);
    ops::moe_seq_aux_forward(ctx, K_, scores, B_, counts, psum);
  }
  bool grad_;
  int64_t B_, S_, E_, K_;
};

NM_OP_CASES(moe_seq_aux_cases) {
  CaseList c;
  for (bool grad : {false, true}) {
    c.push_back(std::make_unique<MoeSeqAuxCase>(grad, 2, 9, 6, 2));
    c.push_back(std::make_unique<MoeSeqAuxCase>(grad, 3, 37, 12, 3));
    c.push_back(std::make_unique<MoeSeqAuxCase>(grad, 1, 13, 5, 1));     // K = 1: no normalisation
    c.push_back(std::make_unique<MoeSeqAuxCase>(grad, 2, 150, 70, 6));   // several chunks, > 2 experts per lane
  }
  return c;
}

}  // namespace
}  // namespace nemotron::testing
