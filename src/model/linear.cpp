#include "model/linear.h"

#include <algorithm>
#include <cmath>

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
}

void Linear::backward(Context& ctx, const Tensor& x, const Tensor& dy, Tensor* dx, bool accumulate_dx) const {
  ops::linear_backward(ctx, x, weight_->value, dy, dx, &weight_->grad, accumulate_dx);
  if (bias_) ops::bias_backward(ctx, dy, bias_->grad);
}

double output_init_std(const ModelConfig& cfg) {
  return cfg.initializer_range / std::sqrt(static_cast<double>(std::max<int64_t>(1, cfg.num_layers())));
}

}  // namespace nemotron::model
