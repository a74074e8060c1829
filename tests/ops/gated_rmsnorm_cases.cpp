// gated_rmsnorm: out = w * RMSNorm_group(y * SiLU(z)); gradients for y, z and w (rstd in
// stat_dtype, dw a float32 parameter gradient on a bf16 target).
#include "case_buffers.h"
#include "harness.h"
#include "ops/gated_rmsnorm.h"

namespace nemotron::testing {
namespace {

// with_out: the backward also writes the forward's output (Mamba's out_proj dW input), which must
// equal the forward's bit for bit on every backend; a difference fails the case.
class GatedRmsNormCase : public OpCase {
 public:
  GatedRmsNormCase(int64_t B, int64_t T, int64_t d, int64_t G, bool with_out = false)
      : B_(B), T_(T), d_(d), G_(G), with_out_(with_out) {}
  std::string op() const override { return "gated_rmsnorm"; }
  std::string params() const override {
    return fmt::format("B={},T={},d={},G={}{}", B_, T_, d_, G_, with_out_ ? ",with_out" : "");
  }
  std::vector<InputSpec> inputs() const override {
    return {{"y", {B_, T_, d_}}, {"z", {B_, T_, d_}, DType::f64, true, -2.0, 2.0},
            {"w", {d_}, DType::f64, true, 0.5, 1.5}};
  }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    DType dt = in[0].dtype();
    Tensor out = poisoned(ctx, in[0].shape(), dt), rstd = poisoned(ctx, {B_ * T_, G_}, stat_dtype(dt));
    ops::gated_rmsnorm_forward(ctx, in[0], in[1], in[2], G_, 1e-5, out, rstd);
    return {out};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    DType dt = in[0].dtype();
    Tensor out = ctx.empty(in[0].shape(), dt), rstd = ctx.empty({B_ * T_, G_}, stat_dtype(dt));
    ops::gated_rmsnorm_forward(ctx, in[0], in[1], in[2], G_, 1e-5, out, rstd);
    Tensor dy = poisoned(ctx, in[0].shape(), dt), dz = poisoned(ctx, in[0].shape(), dt);
    Tensor dw = grad_buffer(ctx, {d_}, dt);
    Tensor again = poisoned(ctx, in[0].shape(), dt);
    ops::gated_rmsnorm_backward(ctx, in[0], in[1], in[2], rstd, G_, douts[0], dy, dz, dw, with_out_ ? &again : nullptr);
    if (with_out_ && again.to_f64_vector() != out.to_f64_vector())
      throw Error(fmt::format("gated_rmsnorm({}): the backward's output differs from the forward's", params()));
    return {dy, dz, accumulated(dw)};
  }

 private:
  int64_t B_, T_, d_, G_;
  bool with_out_;
};

NM_OP_CASES(gated_rmsnorm_cases) {
  CaseList c;
  c.push_back(std::make_unique<GatedRmsNormCase>(2, 5, 12, 2));
  c.push_back(std::make_unique<GatedRmsNormCase>(3, 3, 9, 3));
  c.push_back(std::make_unique<GatedRmsNormCase>(2, 3, 7, 1));
  // Odd row counts over several backward chunks; groups wider than a warp, scalar and 16-byte paths.
  c.push_back(std::make_unique<GatedRmsNormCase>(2, 37, 201, 3));  // 67 channels per group
  c.push_back(std::make_unique<GatedRmsNormCase>(3, 29, 96, 2));   // 48 per group: vector path
  c.push_back(std::make_unique<GatedRmsNormCase>(1, 67, 264, 1));  // one wide group, several rows per warp
  c.push_back(std::make_unique<GatedRmsNormCase>(1, 5, 2080, 2));  // groups too wide for the register path
  c.push_back(std::make_unique<GatedRmsNormCase>(2, 37, 201, 3, true));  // scalar path
  c.push_back(std::make_unique<GatedRmsNormCase>(3, 29, 96, 2, true));   // vector path, registers
  c.push_back(std::make_unique<GatedRmsNormCase>(1, 5, 2080, 2, true));  // vector path, re-read
  // The register backward at 2 and 3 (bf16) or 3 (f32) iterations per lane over several 32-row
  // chunks, and 4 with a partly idle last iteration (bf16; f32 takes the re-read path there).
  c.push_back(std::make_unique<GatedRmsNormCase>(2, 40, 768, 2, true));   // 384 per group
  c.push_back(std::make_unique<GatedRmsNormCase>(1, 70, 1536, 2, true));  // 768 per group (the bench model's)
  c.push_back(std::make_unique<GatedRmsNormCase>(2, 33, 1000, 1));        // 1000 per group
  return c;
}

}  // namespace
}  // namespace nemotron::testing
