// Multi-tensor AdamW (one step over several tensors of odd sizes, one spanning several work
// chunks, one misaligned view that takes the scalar path, one without weight decay; bf16 values
// with float32 masters on the bf16 target, a clipping factor applied as gradients are read) and
// the global gradient norm with its clipping scale.
#include "harness.h"
#include "ops/adamw.h"

namespace nemotron::testing {
namespace {

const std::vector<int64_t> kSizes{1007, 481, 5, 70001, 133};
constexpr size_t kMisaligned = 4;  // this tensor is a view one element into its buffer

// `t` copied into elements [1, n+1) of a new buffer when misaligned, else a plain copy.
Tensor place(Context& ctx, const Tensor& t, bool misaligned) {
  if (!misaligned) return t.clone();
  Tensor full = ctx.zeros({t.numel() + 1}, t.dtype());
  Tensor view = full.slice(1, t.numel() + 1);
  view.copy_from(t);
  return view;
}

class AdamWCase : public OpCase {
 public:
  std::string op() const override { return "adamw"; }
  std::string params() const override { return "sizes=1007,481,5,70001,133"; }
  std::vector<InputSpec> inputs() const override {
    std::vector<InputSpec> in;
    for (size_t k = 0; k < kSizes.size(); ++k) {
      Shape s{kSizes[k]};
      in.push_back({fmt::format("value{}", k), s, DType::f64, false, -1.0, 1.0});
      in.push_back({fmt::format("grad{}", k), s, DType::f64, false, -1.0, 1.0, true});
      in.push_back({fmt::format("m{}", k), s, DType::f64, false, -0.1, 0.1, true});
      in.push_back({fmt::format("v{}", k), s, DType::f64, false, 0.0, 0.05, true});
    }
    return in;
  }
  bool has_backward() const override { return false; }
  // Outputs per tensor: the new value (bf16(master) on bf16), m, v, and the truth's change.
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    std::vector<ops::AdamWParam> ps;
    std::vector<Tensor> before;
    for (size_t k = 0; k < kSizes.size(); ++k) {
      const bool mis = k == kMisaligned;
      ops::AdamWParam p;
      p.value = place(ctx, in[4 * k], mis);
      if (p.value.dtype() == DType::bf16) p.master = place(ctx, in[4 * k].to_host(DType::f32).to(*ctx.backend), mis);
      p.grad = place(ctx, in[4 * k + 1], mis);
      p.m = place(ctx, in[4 * k + 2], mis);
      p.v = place(ctx, in[4 * k + 3], mis);
      p.weight_decay = k != 1;
      before.push_back((p.master.defined() ? p.master : p.value).to_host(DType::f64));
      ps.push_back(p);
    }
    ops::AdamWTensors list(ps);
    ops::adamw_update(ctx, list, {0.05, 0.9, 0.95, 1e-8, 0.1, 3, 0.37});
    std::vector<Tensor> out;
    for (size_t k = 0; k < ps.size(); ++k) {
      const ops::AdamWParam& p = ps[k];
      std::vector<double> now = (p.master.defined() ? p.master : p.value).to_f64_vector(),
                          was = before[k].to_f64_vector();
      for (size_t i = 0; i < now.size(); ++i) now[i] -= was[i];
      out.insert(out.end(), {p.value, p.m, p.v, Tensor::from_vector<double>({kSizes[k]}, now)});
    }
    return out;
  }
};

class GradNormCase : public OpCase {
 public:
  std::string op() const override { return "grad_norm"; }
  std::string params() const override { return "sizes=1007,481,5,70001,133"; }
  std::vector<InputSpec> inputs() const override {
    std::vector<InputSpec> in;
    for (size_t k = 0; k < kSizes.size(); ++k)
      in.push_back({fmt::format("grad{}", k), {kSizes[k]}, DType::f64, false, -1.0, 1.0, true});
    return in;
  }
  bool has_backward() const override { return false; }
  // Outputs: the norm, then every gradient scaled by 0.5 / norm (the clipping path).
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    std::vector<ops::AdamWParam> ps;
    for (size_t k = 0; k < kSizes.size(); ++k) {
      ops::AdamWParam p;
      p.grad = place(ctx, in[k], k == kMisaligned);
      p.value = p.grad;  // the norm reads gradients only
      ps.push_back(p);
    }
    ops::AdamWTensors list(ps);
    const double norm = ops::grad_norm(ctx, list);
    ops::scale_grads(ctx, list, 0.5 / norm);
    std::vector<Tensor> out{Tensor::from_vector<double>({1}, {norm})};
    for (const auto& p : ps) out.push_back(p.grad);
    return out;
  }
};

NM_OP_CASES(adamw_cases) {
  CaseList c;
  c.push_back(std::make_unique<AdamWCase>());
  c.push_back(std::make_unique<GradNormCase>());
  return c;
}

}  // namespace
}  // namespace nemotron::testing
