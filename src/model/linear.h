// A linear layer as the mixers use it: y = x W^T (+ b) over the last dim, W [out, in] registered
// as "<prefix>weight" and the optional b [out] as "<prefix>bias" (Hub names). Memory rules of
// mixer.h: dW and db accumulate (+=); dx is overwritten unless the caller asks to accumulate
// (several projections of one input sum into one dx). A frozen weight or bias
// (Param::requires_grad false) gets no gradient work: its dW GEMM / bias reduction is skipped.
// Every projection of the model is one of these (Mamba's in_proj/out_proj included), so one
// adapter wrapper (LoRA) can stand in for any of them.
#pragma once
#include <span>
#include <string>

#include "core/context.h"
#include "model/model_config.h"
#include "model/param.h"
#include "model/tensor_split.h"

namespace nemotron::model {

// What a Linear's forward keeps for its backward besides its input x (which the caller keeps):
// its LoRA adapter's h = scale * drop(x) A^T [rows, r] (model/lora.h), so the backward does not
// compute it again. Empty without an adapter. A backward given none recomputes h (the same
// dropout mask: the context keys it).
struct LinearSaved {
  Tensor lora_h;
};

// Output rows [begin, end) of W: one block of a fused projection.
struct RowBlock {
  int64_t begin = 0, end = 0;
};

class Linear {
 public:
  Linear() = default;
  // in_features / out_features are the whole layer's; under tensor parallelism (`split`, model/
  // tensor_split.h) the Linear holds and computes its part: a column split has out / size output
  // rows (its bias split alike), a row split in / size inputs and a partial product, to which only
  // tensor rank 0 adds the (replicated) bias, so the sum over the group adds it once.
  Linear(ParamStore& store, const std::string& prefix, int64_t in_features, int64_t out_features, bool bias,
         const TensorSplit& split = {});

  // W ~ N(0, std) keyed by (seed, name); b = 0.
  void init(uint64_t seed, double std);
  // x [..., in] -> a new y [..., out] from ctx. `keep` (training forwards) receives what the
  // backward reuses.
  Tensor forward(Context& ctx, const Tensor& x, LinearSaved* keep = nullptr) const;
  // Into a given y [..., out]; accumulate: y += x W^T (+ b) instead of y =.
  void forward(Context& ctx, const Tensor& x, Tensor& y, bool accumulate = false, LinearSaved* keep = nullptr) const;
  // The mixer's row-parallel output projection: forward(ctx, x, keep), except that with
  // ctx.on_output_rows set (tensor overlap; and no adapter) it computes y in row chunks and hands
  // each to the hook once computed.
  Tensor forward_output(Context& ctx, const Tensor& x, LinearSaved* keep = nullptr) const;
  // dW += dy^T x, db += sum_rows dy; when dx is given: dx = dy W (or dx += dy W). `kept`: the
  // forward's LinearSaved of this x. With ctx.deferred_weight_grads set, dx comes now and the dW
  // GEMM is queued there (x and dy must stay allocated until it runs).
  void backward(Context& ctx, const Tensor& x, const Tensor& dy, Tensor* dx, bool accumulate_dx = false,
                const LinearSaved* kept = nullptr) const;

  // The same on row blocks of W (and b): a fused projection whose outputs are used as separate
  // tensors (Mamba's in_proj: z, x, B, C, dt) runs one GEMM per block and never splits a wide
  // output. ys[i] [..., end - begin] of blocks[i]; dW[begin:end] += dys[i]^T x; dx = the sum over
  // blocks (+= when accumulate_dx). An adapter's h and its dA, dx work run once for all blocks.
  void forward_rows(Context& ctx, const Tensor& x, std::span<const RowBlock> blocks, std::span<Tensor> ys,
                    LinearSaved* keep = nullptr) const;
  void backward_rows(Context& ctx, const Tensor& x, std::span<const RowBlock> blocks, std::span<const Tensor> dys,
                     Tensor* dx, bool accumulate_dx = false, const LinearSaved* kept = nullptr) const;

  // This rank's widths (the whole layer's without tensor parallelism).
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }
  bool defined() const { return weight_ != nullptr; }
  double flops_per_row() const { return 2.0 * static_cast<double>(in_) * static_cast<double>(out_); }
  Param& weight() const { return *weight_; }
  Param* bias() const { return bias_; }

 private:
  // The adapter's term over all blocks (x2 [rows, in], ys2[i] [rows, end - begin]).
  void lora_forward(Context& ctx, const Tensor& x2, std::span<const RowBlock> blocks, std::span<Tensor> ys2,
                    LinearSaved* keep) const;
  void lora_backward(Context& ctx, const Tensor& x2, std::span<const RowBlock> blocks, std::span<const Tensor> dys2,
                     Tensor* dx2, const LinearSaved* kept) const;

  Param* weight_ = nullptr;
  Param* bias_ = nullptr;
  bool adds_bias_ = true;  // false on the tensor ranks > 0 of a row split
  int64_t in_ = 0, out_ = 0;
};

// Megatron init (reference/architectures.md A.9): input linears N(0, initializer_range), output
// linears N(0, initializer_range / sqrt(num_layers)) (multiplier 1 for hybrid models).
double output_init_std(const ModelConfig& cfg);

}  // namespace nemotron::model
