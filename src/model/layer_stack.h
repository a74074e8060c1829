// A stack of pre-norm residual layers, one per LayerSpec (model/layer_spec.h; reference/
// architectures.md A.1, B.1): x = x + mixer_i(rmsnorm_i(x)). The trunk of HybridModel is one; each multi-token-prediction
// block (model/mtp.h, A.8) holds another over its own inner pattern. The stack neither embeds nor
// normalises its output: the caller does (final norm, MTP's final_layernorm).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/layer_spec.h"
#include "model/mixer.h"
#include "model/model_shard.h"
#include "model/moe_mixer.h"

namespace nemotron::model {

// What a training forward keeps per layer for the backward: its input and pre-norm statistics,
// and the mixer's saved activations (none under full recomputation: backward reruns the mixer).
struct LayerSaved {
  Tensor x_in;  // residual stream entering the layer
  Tensor rstd;  // of the pre-norm
  std::unique_ptr<MixerSaved> mixer;
};

class LayerStack {
 public:
  // Layer i registers specs[i].norm and its mixer under specs[i].prefix; `first_index` numbers
  // the layers in messages (the trunk's 0, an MTP block's after the trunk's).
  LayerStack(const ModelConfig& cfg, const std::vector<LayerSpec>& specs, ParamStore& store, int64_t first_index = 0,
             const ModelShard& shard = {});
  void init(uint64_t seed);
  size_t size() const { return mixers_.size(); }
  LayerKind kind(size_t i) const { return mixers_[i]->kind(); }
  const std::vector<std::unique_ptr<Mixer>>& mixers() const { return mixers_; }
  const std::vector<Param*>& norms() const { return norms_; }

  // x [B, T, H] -> the stream after every layer (under sequence parallelism x and the result are
  // this rank's rows [1, N / TP, H] and layout.rows the whole call's {B, T}). `saved` null: inference; else what backward()
  // needs (only inputs and norm statistics when `recompute`). `stats`, when given, receives each
  // MoE layer's routing statistics (appended, in layer order).
  Tensor forward(Context& ctx, Tensor x, std::vector<LayerSaved>* saved, std::vector<MoeLayerStats>* stats,
                 const SequenceLayout& layout, bool recompute);
  // dx (of forward's output; overwritten) down to the gradient of forward's input; parameter
  // gradients accumulate. Consumes `saved`.
  void backward(Context& ctx, std::vector<LayerSaved>& saved, Tensor& dx, const SequenceLayout& layout);

  // An observer called with (layer index, false) just before each layer's forward reads its
  // parameters and (index, true) just before its backward does (recomputation included), for
  // whoever owns where the parameters' values live (the trainer's full parameter sharding,
  // train/param_gather.h, gathers a layer's weights there). Null: none. Unlike
  // Context::on_layer_backward it belongs to the stack (set once for its life), so every forward
  // of the model, evaluation's included, sees it.
  using LayerObserver = std::function<void(int64_t layer, bool backward)>;
  void set_before_layer(const LayerObserver* f) { before_layer_ = f; }

 private:
  const LayerObserver* before_layer_ = nullptr;
  void notify(int64_t layer, bool backward) const {
    if (before_layer_ && *before_layer_) (*before_layer_)(layer, backward);
  }
  int64_t H_;
  float eps_;
  int64_t first_index_;
  std::vector<std::unique_ptr<Mixer>> mixers_;
  std::vector<MoeMixer*> moe_;  // per layer: the MoE mixer, or null
  std::vector<Param*> norms_;
  bool sequence_split_ = false;  // ModelShard::sequence_split(): x holds this rank's rows only

  Tensor run_mixer(Context& ctx, size_t i, const Tensor& h, std::unique_ptr<MixerSaved>* ms,
                   std::vector<MoeLayerStats>* stats, const SequenceLayout& layout);
  Tensor backward_split(Context& ctx, size_t i, const MixerSaved& ms, const Tensor& dout, const SequenceLayout& layout);
};

}  // namespace nemotron::model
