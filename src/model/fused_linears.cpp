#include "model/fused_linears.h"

#include "ops/bias.h"
#include "ops/matmul.h"

namespace nemotron::model {

namespace {

// One zeroed tensor holding `params` as consecutive blocks of dim 0; each value becomes its view.
Tensor rehome(const std::vector<Param*>& params) {
  const Tensor& first = params.front()->value;
  std::vector<int64_t> dims = first.shape().dims();
  dims[0] = 0;
  for (const Param* p : params) dims[0] += p->value.dim(0);
  Tensor fused = Tensor::zeros(Shape(dims), first.dtype(), first.backend());
  int64_t row = 0;
  for (Param* p : params) {
    const int64_t rows = p->value.dim(0);
    p->value = fused.slice(row, row + rows);
    row += rows;
  }
  return fused;
}

}  // namespace

FusedLinears::FusedLinears(std::initializer_list<const Linear*> parts) {
  if (parts.size() < 2) return;
  const Linear& first = **parts.begin();
  std::vector<Param*> weights, biases;
  for (const Linear* l : parts) {
    const Param& w = l->weight();
    if (!l->defined() || w.requires_grad || w.value.rank() != 2 || w.value.dim(1) != first.weight().value.dim(1) ||
        w.value.dtype() != first.weight().value.dtype() || &w.value.backend() != &first.weight().value.backend() ||
        (l->bias() != nullptr) != (first.bias() != nullptr))
      return;
    weights.push_back(&l->weight());
    if (l->bias()) biases.push_back(l->bias());
  }
  parts_.assign(parts.begin(), parts.end());
  weight_ = rehome(weights);
  if (!biases.empty()) bias_ = rehome(biases);
  for (const Param* p : weights) views_.push_back(p->value.raw());
  for (const Param* p : biases) views_.push_back(p->value.raw());
}

bool FusedLinears::active() const {
  if (!weight_.defined()) return false;
  size_t v = 0;
  for (const Linear* l : parts_)
    if (l->weight().lora || l->weight().value.raw() != views_[v++]) return false;
  for (const Linear* l : parts_)
    if (l->bias() && l->bias()->value.raw() != views_[v++]) return false;
  return true;
}

Tensor FusedLinears::forward(Context& ctx, const Tensor& x) const {
  const int64_t in = weight_.dim(1), out = weight_.dim(0);
  NM_CHECK(x.dim(-1) == in, "fused linears: input {} does not end in {}", x.shape().str(), in);
  std::vector<int64_t> dims = x.shape().dims();
  dims.back() = out;
  Tensor y = ctx.empty(Shape(dims), x.dtype());
  const int64_t rows = x.numel() / in;
  Tensor y2 = y.view({rows, out});
  ops::matmul(ctx, x.view({rows, in}), false, weight_, true, y2, 1.0, 0.0);
  if (bias_.defined()) ops::bias_add(ctx, y2, bias_);
  return y;
}

}  // namespace nemotron::model
