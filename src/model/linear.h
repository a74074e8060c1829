// A linear layer as the mixers use it: y = x W^T (+ b) over the last dim, W [out, in] registered
// as "<prefix>weight" and the optional b [out] as "<prefix>bias" (Hub names). Memory rules of
// mixer.h: dW and db accumulate (+=); dx is overwritten unless the caller asks to accumulate
// (several projections of one input sum into one dx). A frozen weight or bias
// (Param::requires_grad false) gets no gradient work: its dW GEMM / bias reduction is skipped.
// Every projection of the model is one of these (Mamba's in_proj/out_proj included), so one
// adapter wrapper (LoRA) can stand in for any of them.
#pragma once
#include <string>

#include "core/context.h"
#include "model/model_config.h"
#include "model/param.h"

namespace nemotron::model {

class Linear {
 public:
  Linear() = default;
  Linear(ParamStore& store, const std::string& prefix, int64_t in_features, int64_t out_features, bool bias);

  // W ~ N(0, std) keyed by (seed, name); b = 0.
  void init(uint64_t seed, double std);
  // x [..., in] -> a new y [..., out] from ctx.
  Tensor forward(Context& ctx, const Tensor& x) const;
  // Into a given y [..., out]; accumulate: y += x W^T (+ b) instead of y =.
  void forward(Context& ctx, const Tensor& x, Tensor& y, bool accumulate = false) const;
  // dW += dy^T x, db += sum_rows dy; when dx is given: dx = dy W (or dx += dy W).
  void backward(Context& ctx, const Tensor& x, const Tensor& dy, Tensor* dx, bool accumulate_dx = false) const;

  // The same on output rows [begin, end) of W (and b) only: a fused projection whose outputs are
  // used as separate tensors (Mamba's in_proj: z, x, B, C, dt) runs one GEMM per row block and
  // never splits a wide output. y [..., end - begin]; dW[begin:end] += dy^T x.
  void forward_rows(Context& ctx, const Tensor& x, int64_t begin, int64_t end, Tensor& y) const;
  void backward_rows(Context& ctx, const Tensor& x, int64_t begin, int64_t end, const Tensor& dy, Tensor* dx,
                     bool accumulate_dx = false) const;

  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }
  bool defined() const { return weight_ != nullptr; }
  double flops_per_row() const { return 2.0 * static_cast<double>(in_) * static_cast<double>(out_); }
  Param& weight() const { return *weight_; }
  Param* bias() const { return bias_; }

 private:
  Param* weight_ = nullptr;
  Param* bias_ = nullptr;
  int64_t in_ = 0, out_ = 0;
};

// Megatron init (reference/architectures.md A.9): input linears N(0, initializer_range), output
// linears N(0, initializer_range / sqrt(num_layers)) (multiplier 1 for hybrid models).
double output_init_std(const ModelConfig& cfg);

}  // namespace nemotron::model
