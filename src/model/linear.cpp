#include "model/linear.h"

#include <algorithm>
#include <cmath>

#include "model/lora.h"
#include "ops/bias.h"
#include "ops/matmul.h"

namespace nemotron::model {

Linear::Linear(ParamStore& store, const std::string& prefix, int64_t in_features, int64_t out_features, bool bias,
               const TensorSplit& split) {
  NM_CHECK(in_features > 0 && out_features > 0, "linear {}: sizes {} -> {}", prefix, in_features, out_features);
  weight_ = &add_split(store, prefix + "weight", {out_features, in_features}, split, true);
  out_ = weight_->value.dim(0);
  in_ = weight_->value.dim(1);
  const bool row = split.kind == TensorSplit::Kind::row;
  if (bias) bias_ = &add_split(store, prefix + "bias", {out_features}, row ? TensorSplit{} : split, false);
  adds_bias_ = !(row && split.active() && split.rank != 0);
}

void Linear::init(uint64_t seed, double std) {
  init_normal(*weight_, seed, std);
  if (bias_) init_constant(*bias_, 0.0);
}

Tensor Linear::forward(Context& ctx, const Tensor& x, LinearSaved* keep) const {
  std::vector<int64_t> dims = x.shape().dims();
  NM_CHECK(!dims.empty() && dims.back() == in_, "linear {}: input {} does not end in {}", weight_->name,
           x.shape().str(), in_);
  dims.back() = out_;
  Tensor y = ctx.empty(Shape(dims), x.dtype());
  forward(ctx, x, y, false, keep);
  return y;
}

void Linear::forward(Context& ctx, const Tensor& x, Tensor& y, bool accumulate, LinearSaved* keep) const {
  NM_CHECK(x.dim(-1) == in_ && y.dim(-1) == out_ && x.numel() / in_ == y.numel() / out_,
           "linear {}: x {} -> y {}", weight_->name, x.shape().str(), y.shape().str());
  const int64_t rows = x.numel() / in_;
  Tensor x2 = x.view({rows, in_}), y2 = y.view({rows, out_});
  ops::matmul(ctx, x2, false, weight_->value, true, y2, 1.0, accumulate ? 1.0 : 0.0);
  if (bias_ && adds_bias_) ops::bias_add(ctx, y2, bias_->value);
  const RowBlock all{0, out_};
  if (weight_->lora) lora_forward(ctx, x2, {&all, 1}, {&y2, 1}, keep);
}

Tensor Linear::forward_output(Context& ctx, const Tensor& x, LinearSaved* keep) const {
  const std::function<void(Tensor&)>* hook = ctx.on_output_rows;
  const int64_t rows = x.numel() / in_;
  // Chunks of >= 1024 rows keep the GEMMs efficient; an adapter's h would have to be joined.
  constexpr int64_t kChunks = 4, kMinRows = 1024;
  if (!hook || weight_->lora || rows % kChunks != 0 || rows / kChunks < kMinRows) return forward(ctx, x, keep);
  std::vector<int64_t> dims = x.shape().dims();
  dims.back() = out_;
  Tensor y = ctx.empty(Shape(dims), x.dtype());
  Tensor x2 = x.view({rows, in_}), y2 = y.view({rows, out_});
  const int64_t n = rows / kChunks;
  for (int64_t c = 0; c < kChunks; ++c) {
    Tensor yc = y2.slice(c * n, (c + 1) * n);
    forward(ctx, x2.slice(c * n, (c + 1) * n), yc);
    (*hook)(yc);
  }
  return y;
}

void Linear::backward(Context& ctx, const Tensor& x, const Tensor& dy, Tensor* dx, bool accumulate_dx,
                      const LinearSaved* kept) const {
  const RowBlock all{0, out_};
  backward_rows(ctx, x, {&all, 1}, {&dy, 1}, dx, accumulate_dx, kept);
}

void Linear::forward_rows(Context& ctx, const Tensor& x, std::span<const RowBlock> blocks, std::span<Tensor> ys,
                          LinearSaved* keep) const {
  NM_CHECK(!blocks.empty() && blocks.size() == ys.size() && x.dim(-1) == in_, "linear {}: {} blocks, {} outputs, x {}",
           weight_->name, blocks.size(), ys.size(), x.shape().str());
  const int64_t rows = x.numel() / in_;
  std::vector<Tensor> ys2;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const auto [begin, end] = blocks[i];
    Tensor& y = ys[i];
    NM_CHECK(0 <= begin && begin < end && end <= out_ && y.dim(-1) == end - begin && y.numel() == rows * (end - begin),
             "linear {}: rows [{}, {}) of {} for x {} -> y {}", weight_->name, begin, end, out_, x.shape().str(),
             y.shape().str());
    const bool all = begin == 0 && end == out_;
    ops::linear_forward(ctx, x, all ? weight_->value : weight_->value.slice(begin, end), y);
    if (bias_ && adds_bias_) ops::bias_add(ctx, y, all ? bias_->value : bias_->value.slice(begin, end));
    ys2.push_back(y.view({rows, end - begin}));
  }
  if (weight_->lora) lora_forward(ctx, x.view({rows, in_}), blocks, ys2, keep);
}

void Linear::backward_rows(Context& ctx, const Tensor& x, std::span<const RowBlock> blocks,
                           std::span<const Tensor> dys, Tensor* dx, bool accumulate_dx, const LinearSaved* kept) const {
  NM_CHECK(!blocks.empty() && blocks.size() == dys.size(), "linear {}: {} blocks, {} gradients", weight_->name,
           blocks.size(), dys.size());
  const int64_t rows = x.numel() / in_;
  std::vector<Tensor> dys2;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const auto [begin, end] = blocks[i];
    const bool all = begin == 0 && end == out_;
    Tensor dw;
    if (weight_->requires_grad) dw = all ? weight_->grad : weight_->grad.slice(begin, end);
    // dx: the first block writes it (unless the caller accumulates), the others add. Deferred, dW
    // runs later as the same GEMM (the same sums, in the same order per parameter).
    const Tensor w = all ? weight_->value : weight_->value.slice(begin, end);
    std::vector<std::function<void(Context&)>>* later = ctx.deferred_weight_grads;
    if (dx || (dw.defined() && !later))
      ops::linear_backward(ctx, x, w, dys[i], dx, dw.defined() && !later ? &dw : nullptr, accumulate_dx || i > 0);
    if (dw.defined() && later)
      later->push_back([x, w, dy = dys[i], dw](Context& c) mutable { ops::linear_backward(c, x, w, dy, nullptr, &dw); });
    if (bias_ && bias_->requires_grad) {
      Tensor db = all ? bias_->grad : bias_->grad.slice(begin, end);
      ops::bias_backward(ctx, dys[i], db);
    }
    dys2.push_back(dys[i].view({rows, end - begin}));
  }
  if (!weight_->lora) return;
  Tensor dx2;
  if (dx) dx2 = dx->view({rows, in_});
  lora_backward(ctx, x.view({rows, in_}), blocks, dys2, dx ? &dx2 : nullptr, kept);
}

void Linear::lora_forward(Context& ctx, const Tensor& x2, std::span<const RowBlock> blocks, std::span<Tensor> ys2,
                          LinearSaved* keep) const {
  const LoraAdapter& lora = *weight_->lora;
  Tensor h = lora_down(ctx, lora, x2);  // once for all blocks
  for (size_t i = 0; i < blocks.size(); ++i) lora_up(ctx, lora, h, blocks[i].begin, blocks[i].end, ys2[i]);
  if (keep) keep->lora_h = h;
}

void Linear::lora_backward(Context& ctx, const Tensor& x2, std::span<const RowBlock> blocks,
                           std::span<const Tensor> dys2, Tensor* dx2, const LinearSaved* kept) const {
  const LoraAdapter& lora = *weight_->lora;
  const Tensor h = kept && kept->lora_h.defined() ? kept->lora_h : lora_down(ctx, lora, x2);
  // dh = sum over blocks of dy_i B_i, then dA and dx once (not once per block).
  Tensor dh = ctx.empty(Shape({x2.dim(0), lora.rank}), x2.dtype());
  for (size_t i = 0; i < blocks.size(); ++i)
    lora_up_backward(ctx, lora, h, blocks[i].begin, blocks[i].end, dys2[i], dh, i > 0);
  lora_down_backward(ctx, lora, x2, dh, dx2);
}

double output_init_std(const ModelConfig& cfg) {
  return cfg.initializer_range / std::sqrt(static_cast<double>(std::max<int64_t>(1, cfg.num_layers())));
}

}  // namespace nemotron::model
