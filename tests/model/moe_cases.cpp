// The MoE mixer as harness cases: float64 gradient checks of the whole block (du, router, every
// expert, shared expert, latent projections) with group-limited routing, a correction bias that
// changes the choice, norm_topk_prob on and off, latent projections on and off, with and without a
// shared expert, every expert receiving tokens; and at realistic sizes (Nano- and Super-like) on
// the backends only. On a backend the router also runs unpinned once (see check_routing).
#include <gtest/gtest.h>

#include "block_configs.h"
#include "mixer_case.h"
#include "model/moe_mixer.h"
#include "moe_choice.h"

namespace nemotron::testing {
namespace {

using model::MoeMixer;

bool is_bias(const std::string& name) { return name.ends_with("e_score_correction_bias"); }

std::unique_ptr<model::Mixer> make_moe(const model::ModelConfig& c, model::ParamStore& s) {
  return std::make_unique<MoeMixer>(c, s, kMoePrefix, 1);
}

// Wide router weights make the scores differ clearly; the bias is of a size that moves some
// choices without dominating them.
std::pair<double, double> moe_range(const std::string& name, const Shape&) {
  if (is_bias(name)) return {-0.3, 0.3};
  if (name == kMoePrefix + "gate.weight") return {-2.0, 2.0};
  return {-0.5, 0.5};
}

// At realistic sizes the scores of 32-64 experts lie about 0.01 apart near the top-k boundary:
// a bias of +-0.02 still moves choices but starves no expert.
std::pair<double, double> moe_scale_range(const std::string& name, const Shape& shape) {
  if (is_bias(name)) return {-0.02, 0.02};
  return unit_gain_range(shape);
}
// The bias as initialised (zero): on a bf16 backend the scores then tie exactly (sigmoid of
// bf16 logits takes few values), and the lowest index must win as on the CPU.
std::pair<double, double> moe_scale_range_zero_bias(const std::string& name, const Shape& shape) {
  if (is_bias(name)) return {0.0, 0.0};
  return unit_gain_range(shape);
}

enum class Size { kToy, kRealistic, kRealisticZeroBias };

ParamRange moe_ranges(Size size) {
  if (size == Size::kToy) return moe_range;
  return size == Size::kRealistic ? moe_scale_range : moe_scale_range_zero_bias;
}

// The expert choice is piecewise constant in the inputs, so differencing across a switch would
// measure a jump, not a derivative. The selection is therefore held fixed while differencing:
// it is computed once per test from the unperturbed inputs (the harness's first call, always the
// float64 reference) and pinned with force_selection for every later forward. That first call
// also asserts that every expert gets tokens (all expert paths are checked) and that the
// correction bias (unless zero) changes the choice. The backend checks compare at the same pinned
// choice.
class MoeMixerCase : public MixerCase {
 public:
  MoeMixerCase(const MoeShape& s, int64_t B, int64_t T, Size size = Size::kToy)
      : MixerCase("moe_mixer", moe_config(s), B, T, make_moe, moe_ranges(size)), s_(s), size_(size) {}
  std::string extra_params() const override {
    return fmt::format("H={},E={},K={},n_group={},topk_group={},F={},shared_F={},latent={},norm={},scale={}", s_.H,
                       s_.E, s_.K, s_.n_group, s_.topk_group, s_.F, s_.shared_F * s_.n_shared, s_.latent,
                       s_.norm ? 1 : 0, s_.scale) +
           (size_ == Size::kRealisticZeroBias ? ",bias=0" : "");
  }
  bool grad_check() const override { return size_ == Size::kToy; }
  // The correction bias is a buffer: it only moves the (pinned) choice and gets no gradient.
  std::vector<InputSpec> inputs() const override {
    std::vector<InputSpec> in = MixerCase::inputs();
    for (InputSpec& spec : in)
      if (is_bias(spec.name)) spec.differentiable = false;
    return in;
  }

 protected:
  void prepare(model::Mixer& mixer, Context& ctx, const std::vector<Tensor>& in) const override {
    auto& moe = dynamic_cast<MoeMixer&>(mixer);
    if (!pinned_) pin(moe, ctx, in);
    else if (ctx.compute_dtype != DType::f64) check_routing(moe, ctx, in);
    moe.force_selection(*pinned_);
  }

 private:
  void pin(MoeMixer& moe, Context& ctx, const std::vector<Tensor>& in) const {
    moe.force_selection(std::nullopt);
    std::unique_ptr<model::MixerSaved> saved;
    moe.forward(ctx, in[0], &saved);
    const auto& s = dynamic_cast<const model::MoeSaved&>(*saved);
    pinned_ = s.topk_idx.clone();
    const std::vector<int64_t>& counts = s.dispatch.tokens_per_expert;
    for (int64_t e = 0; e < s_.E; ++e) EXPECT_GT(counts[e], 0) << name() << ": expert " << e << " got no token";
    Tensor zero_bias = ctx.zeros({s_.E}, s.scores.dtype());
    Tensor unbiased = ctx.empty(s.topk_idx.shape(), DType::i32);
    ops::moe_select_experts(ctx, moe.router_params(), s.scores, zero_bias, unbiased);
    if (size_ != Size::kRealisticZeroBias) {
      EXPECT_NE(unbiased.to_f64_vector(), s.topk_idx.to_f64_vector()) << name() << ": the bias changes no choice";
    }
  }

  // The backend's own routing, unpinned: its dispatch rejects any choice outside [0, E), and the
  // choice must be the one the CPU makes in float64 from the backend's own scores and bias, ties
  // included (lowest index first). Only score + bias rounded to float32 there may make or break a
  // tie: up to 1% of the rows (none with the zero bias, where bf16 scores tie exactly at the
  // top-k boundary in 3.5% of the rows of kMoeNanoScale: a wrong tie rule fails there).
  void check_routing(MoeMixer& moe, Context& ctx, const std::vector<Tensor>& in) const {
    moe.force_selection(std::nullopt);
    std::unique_ptr<model::MixerSaved> saved;
    moe.forward(ctx, in[0], &saved);
    const auto& s = dynamic_cast<const model::MoeSaved&>(*saved);
    Context host = cpu_context(DType::f64);
    Tensor scores = s.scores.to_host(DType::f64), bias = moe.correction_bias().value.to_host(DType::f64);
    Tensor want = Tensor::empty(s.topk_idx.shape(), DType::i32);
    ops::moe_select_experts(host, moe.router_params(), scores, bias, want);
    const int64_t N = s.topk_idx.dim(0);
    EXPECT_LE(rows_choosing_differently(s.topk_idx, want), N / 100)
        << name() << " on " << dtype_name(ctx.compute_dtype) << ": the router's choice differs from the CPU's on the same scores";
  }

  MoeShape s_;
  Size size_;
  mutable std::optional<Tensor> pinned_;
};

NM_OP_CASES(moe_mixer_cases) {
  CaseList c;
  c.push_back(std::make_unique<MoeMixerCase>(kMoeGrouped, 2, 9));
  c.push_back(std::make_unique<MoeMixerCase>(kMoeLatent, 3, 5));
  c.push_back(std::make_unique<MoeMixerCase>(kMoePlain, 2, 5));
  c.push_back(std::make_unique<MoeMixerCase>(kMoeNanoScale, 2, 128, Size::kRealisticZeroBias));
  c.push_back(std::make_unique<MoeMixerCase>(kMoeSuperScale, 2, 128, Size::kRealistic));
  return c;
}

}  // namespace
}  // namespace nemotron::testing
