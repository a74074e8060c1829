// The decode-size linear y = alpha x W^T (+ beta y) (+ bias) with 1..16 rows of x: on the
// cuda_bf16 target these shapes run the skinny GEMM (ops/skinny_gemm_cuda.h) rather than cuBLASLt.
// Rows 1, 3, 8 (one 8-row tile), 9 and 16 (two), N off the 16-row block (200, 37), K off the
// 128-column chunk (1000, 2056) and down to one 8-column vector, a bias, alpha / beta with a
// bfloat16 output, a float32 output, x with leading dims. Forward only: the backward is cuBLASLt's.
#include "harness.h"
#include "ops/cast.h"
#include "ops/matmul.h"
#include "poison.h"

namespace nemotron::testing {
namespace {

struct SkinnyShape {
  Shape x;  // [..., K]; its leading dims are the rows
  int64_t N;
  bool bias = false;
  double alpha = 1.0, beta = 0.0;
  bool wide_c = false;  // y in grad_dtype (float32 for bfloat16 x, W)
};

class SkinnyLinearCase : public OpCase {
 public:
  explicit SkinnyLinearCase(SkinnyShape s) : s_(std::move(s)) {}
  std::string op() const override { return "matmul"; }
  std::string params() const override {
    return fmt::format("skinny,x={},N={}{},alpha={},beta={}{}", s_.x.str(), s_.N, s_.bias ? ",bias" : "", s_.alpha,
                       s_.beta, s_.wide_c ? ",y=grad_dtype" : "");
  }
  std::vector<InputSpec> inputs() const override {
    std::vector<InputSpec> in{{"x", s_.x}, {"w", {s_.N, s_.x[-1]}}};
    if (s_.bias) in.push_back({"b", {s_.N}});
    if (s_.beta != 0.0) in.push_back({"y0", {rows(), s_.N}});
    return in;
  }
  bool has_backward() const override { return false; }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    const DType y_dt = s_.wide_c ? grad_dtype(in[0].dtype()) : in[0].dtype();
    Tensor y = poisoned(ctx, {rows(), s_.N}, y_dt);
    if (s_.beta != 0.0) {
      ops::cast(ctx, in.back(), y);
      ops::matmul(ctx, in[0].view({rows(), s_.x[-1]}), false, in[1], true, y, s_.alpha, s_.beta);
    } else {
      ops::linear_forward(ctx, in[0], in[1], y, s_.bias ? &in[2] : nullptr);
    }
    return {y};
  }

 private:
  int64_t rows() const { return s_.x.numel() / s_.x[-1]; }
  SkinnyShape s_;
};

NM_OP_CASES(skinny_gemm_cases) {
  CaseList c;
  auto add = [&](SkinnyShape s) { c.push_back(std::make_unique<SkinnyLinearCase>(std::move(s))); };
  for (int64_t m : {1, 3, 8, 9, 16}) add({{m, 1000}, 200});
  add({{5, 8}, 64});                                // K: one 8-column vector, one warp
  add({{16, 2056}, 37});                            // 8 warps, a partial last chunk, N < 3 blocks
  add({{4, 512}, 96, true});                        // bias (the fused epilogue)
  add({{2, 3, 264}, 48, true});                     // x [2, 3, K]: 6 rows
  add({{7, 264}, 48, false, 0.75, 0.5});            // alpha, beta on a bfloat16 y
  add({{12, 136}, 40, false, 1.0, 0.0, true});      // float32 y from bfloat16 x, W
  add({{11, 136}, 40, false, 1.25, 1.0, true});     // float32 y accumulated (beta 1)
  add({{1, 4096}, 64});                             // K split 4, one row
  add({{16, 4096}, 40, true});                      // K split 4, two tiles of x, bias, N < 3 blocks
  add({{9, 3072}, 24, false, 1.25, 1.0, true});     // K split 3, float32 y accumulated
  add({{5, 2056}, 200, false, 0.75, 0.5});          // K split 2, partial last chunk, alpha / beta
  return c;
}

}  // namespace
}  // namespace nemotron::testing
