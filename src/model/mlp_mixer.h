// The dense MLP mixer (reference/architectures.md A.6, B.3), two kinds:
//   squared ReLU (Nemotron-H `-` layers, MoE experts): y = down(relu2(up(x)))
//   SwiGLU (Llama/DeciLM, mlp_hidden_act "silu"):      y = down(silu(gate(x)) * up(x))
// Hub names under the prefix: up_proj, down_proj (+ gate_proj when gated), biases iff mlp_bias.
// Works on any [..., in_dim] input, so MoE experts (latent width), the shared expert and DeciLM
// layers (per-layer width) reuse it through an explicit MlpSpec.
#pragma once
#include <string>

#include "model/fused_linears.h"
#include "model/linear.h"
#include "model/mixer.h"
#include "model/model_shard.h"

namespace nemotron::model {

struct MlpSpec {
  int64_t in_dim = 0;        // input and output width (H, or the MoE latent size)
  int64_t intermediate = 0;  // F
  bool gated = false;        // SwiGLU instead of squared ReLU
  bool bias = false;
  // A `-` layer of `cfg`: hidden_size, intermediate_size, mlp_hidden_act, mlp_bias.
  static MlpSpec from_config(const ModelConfig& cfg);
};

// What the backward needs. SwiGLU keeps its inputs and recomputes its output for dW_down; squared
// ReLU keeps its output instead, which dW_down reads and relu2's backward needs alone
// (ops::relu2_backward_from_output): nothing recomputed, the same bytes kept.
struct MlpSaved : MixerSaved {
  Tensor x;     // input [rows, in_dim]
  Tensor up;    // up_proj output [rows, F], gated only
  Tensor gate;  // gate_proj output [rows, F], gated only
  Tensor act;   // relu2(up) [rows, F], the down_proj input, not gated only
  LinearSaved up_proj, gate_proj, down_proj;  // their adapters' h (LoRA), for the backward
};

class MlpMixer : public Mixer {
 public:
  // A `-` layer: MlpSpec::from_config(cfg).
  MlpMixer(const ModelConfig& cfg, ParamStore& store, const std::string& prefix, int64_t layer_index);
  // Tensor parallelism (shard.tensor_size T > 1): F / T of the intermediate width (up/gate split
  // by rows, down by columns); forward returns this rank's partial down_proj product, backward its
  // partial input gradient (the caller sums both over the tensor group).
  MlpMixer(const ModelConfig& cfg, ParamStore& store, const std::string& prefix, int64_t layer_index,
           const MlpSpec& spec, const ModelShard& shard = {});

  LayerKind kind() const override { return LayerKind::mlp; }
  bool split_over_tensor() const override { return split_; }
  // up/gate ~ N(0, initializer_range), down ~ N(0, initializer_range / sqrt(num_layers)), biases 0.
  void init(uint64_t seed) override;
  Tensor forward(Context& ctx, const Tensor& u, std::unique_ptr<MixerSaved>* saved,
                 const SequenceLayout& layout = {}) override;  // per token: ignores layout
  Tensor backward(Context& ctx, const MixerSaved& saved, const Tensor& dout) override;
  // 2 * in_dim * F per projection: 4 in F (relu2) or 6 in F (SwiGLU); independent of T.
  double forward_flops_per_token(int64_t T) const override;

  // Into a given y [..., in_dim]; accumulate: y += MLP(x).
  void forward_into(Context& ctx, const Tensor& x, Tensor& y, std::unique_ptr<MixerSaved>* saved,
                    bool accumulate = false);
  // dx [..., in_dim] = (or +=, when accumulate) the input gradient; parameter gradients +=.
  void backward_into(Context& ctx, const MixerSaved& saved, const Tensor& dout, Tensor& dx, bool accumulate = false);

  const MlpSpec& spec() const { return spec_; }

 private:
  // forward_into's work; an undefined *y is made by down_proj's forward_output (the mixer's own
  // forward: its row chunks may be reduced as computed), a defined one written or accumulated.
  void project(Context& ctx, const Tensor& x, Tensor* y, std::unique_ptr<MixerSaved>* saved, bool accumulate);

  MlpSpec spec_;  // the whole layer's widths
  bool split_ = false;
  double init_std_, out_std_;
  Linear gate_, up_, down_;
  FusedLinears gate_up_;  // SwiGLU's gate and up weights as one (frozen stores): one GEMM when nothing is kept
};

}  // namespace nemotron::model
