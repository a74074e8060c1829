#include "model/linear.h"

#include <algorithm>
#include <cmath>

#include "model/lora.h"
#include "ops/bias.h"
#include "ops/matmul.h"

namespace nemotron::model {

Linear::Linear(ParamStore& store, const std::string& prefix, int64_t in_features, int64_t out_features, bool bias)
    : in_(in_features), out_(out_features) {
  NM_CHECK(in_features > 0 && out_features > 0, "linear {}: sizes {} -> {}", prefix, in_features, out_features);
  weight_ = &store.add(prefix + "weight", {out_features, in_features});
  if (bias) bias_ = &store.add(prefix + "bias", {out_features}, false);
}

void Linear::init(uint64_t seed, double std) {
  init_normal(*weight_, seed, std);
  if (bias_) init_constant(*bias_, 0.0);
}

Tensor Linear::forward(Context& ctx, const Tensor& x) const {
  std::vector<int64_t> dims = x.shape().dims();
  NM_CHECK(!dims.empty() && dims.back() == in_, "linear {}: input {} does not end in {}", weight_->name,
           x.shape().str(), in_);
  dims.back() = out_;
  Tensor y = ctx.empty(Shape(dims), x.dtype());
  forward(ctx, x, y);
  return y;
}

void Linear::forward(Context& ctx, const Tensor& x, Tensor& y, bool accumulate) const {
  NM_CHECK(x.dim(-1) == in_ && y.dim(-1) == out_ && x.numel() / in_ == y.numel() / out_,
           "linear {}: x {} -> y {}", weight_->name, x.shape().str(), y.shape().str());
  const int64_t rows = x.numel() / in_;
  Tensor x2 = x.view({rows, in_}), y2 = y.view({rows, out_});
  ops::matmul(ctx, x2, false, weight_->value, true, y2, 1.0, accumulate ? 1.0 : 0.0);
  if (bias_) ops::bias_add(ctx, y2, bias_->value);
  if (weight_->lora) lora_forward(ctx, *weight_->lora, x2, 0, out_, y2);
}

void Linear::backward(Context& ctx, const Tensor& x, const Tensor& dy, Tensor* dx, bool accumulate_dx) const {
  backward_rows(ctx, x, 0, out_, dy, dx, accumulate_dx);
}

void Linear::forward_rows(Context& ctx, const Tensor& x, int64_t begin, int64_t end, Tensor& y) const {
  NM_CHECK(0 <= begin && begin < end && end <= out_ && x.dim(-1) == in_ && y.dim(-1) == end - begin,
           "linear {}: rows [{}, {}) of {} for x {} -> y {}", weight_->name, begin, end, out_, x.shape().str(),
           y.shape().str());
  const bool all = begin == 0 && end == out_;
  ops::linear_forward(ctx, x, all ? weight_->value : weight_->value.slice(begin, end), y);
  if (bias_) ops::bias_add(ctx, y, all ? bias_->value : bias_->value.slice(begin, end));
  if (weight_->lora) lora_forward(ctx, *weight_->lora, x, begin, end, y);
}

void Linear::backward_rows(Context& ctx, const Tensor& x, int64_t begin, int64_t end, const Tensor& dy, Tensor* dx,
                           bool accumulate_dx) const {
  const bool all = begin == 0 && end == out_;
  Tensor dw;
  if (weight_->requires_grad) dw = all ? weight_->grad : weight_->grad.slice(begin, end);
  if (dx || dw.defined())
    ops::linear_backward(ctx, x, all ? weight_->value : weight_->value.slice(begin, end), dy, dx,
                         dw.defined() ? &dw : nullptr, accumulate_dx);
  if (bias_ && bias_->requires_grad) {
    Tensor db = all ? bias_->grad : bias_->grad.slice(begin, end);
    ops::bias_backward(ctx, dy, db);
  }
  if (weight_->lora) lora_backward(ctx, *weight_->lora, x, begin, end, dy, dx);
}

double output_init_std(const ModelConfig& cfg) {
  return cfg.initializer_range / std::sqrt(static_cast<double>(std::max<int64_t>(1, cfg.num_layers())));
}

}  // namespace nemotron::model
