// The Nemotron-H stack (reference/architectures.md A.1): embedding, one pre-norm residual layer
// per pattern symbol (x = x + mixer(rmsnorm(x))), final norm, LM head (tied or untied) and the
// fused softmax cross-entropy. Parameters carry the Hub names (`backbone.*`, `lm_head.weight`).
// The LM head and loss run over row chunks, so a [B*T, V] logits buffer never exists at once.
#pragma once
#include <memory>
#include <vector>

#include "model/mixer.h"

namespace nemotron::model {

struct Batch {
  Tensor input_ids;  // [B, T] int32/int64
  Tensor labels;     // [B, T] int32/int64; negative = ignored
  Tensor loss_mask;  // [B, T] float in the compute dtype, or undefined (all ones)
};

struct LossSum {
  double loss_sum = 0;    // sum over tokens of mask * cross-entropy
  double token_count = 0; // sum of the mask over tokens with a label
  double mean() const { return token_count > 0 ? loss_sum / token_count : 0.0; }
};

// Rows of the LM head's logits computed at once (a 1 GiB buffer of `dtype`, at most `tokens`).
int64_t head_rows_per_chunk(int64_t vocab_size, DType dtype, int64_t tokens);

class HybridModel {
 public:
  HybridModel(const ModelConfig& cfg, Backend& backend, DType dtype);
  ~HybridModel();
  const ModelConfig& config() const { return cfg_; }
  ParamStore& params() { return store_; }
  const std::vector<std::unique_ptr<Mixer>>& mixers() const { return mixers_; }
  void init(uint64_t seed);

  // Logits [B, T, V] (nothing is kept for a backward pass).
  Tensor logits(Context& ctx, const Tensor& input_ids);
  // Loss only (evaluation).
  LossSum loss(Context& ctx, const Batch& batch);
  // Loss, then gradients of grad_scale * loss_sum accumulated (+=) into params().
  LossSum forward_backward(Context& ctx, const Batch& batch, double grad_scale);

  // Forward FLOPs per token at sequence length T (matmuls + attention), for MFU.
  double forward_flops_per_token(int64_t T) const;

 private:
  struct LayerSaved;
  Tensor run_layers(Context& ctx, const Tensor& input_ids, std::vector<LayerSaved>* saved);
  // Per-token losses [B*T] on the device (and dh when asked); sum_losses reads them.
  Tensor head_and_loss(Context& ctx, const Tensor& h, const Batch& batch, double grad_scale, Tensor* dh);
  LossSum sum_losses(const Tensor& losses, const Batch& batch) const;
  Param& head_weight();
  bool recompute() const { return cfg_.recompute_granularity == "full"; }

  ModelConfig cfg_;
  ParamStore store_;
  std::vector<std::unique_ptr<Mixer>> mixers_;
  Param* embed_ = nullptr;
  Param* norm_f_ = nullptr;
  Param* lm_head_ = nullptr;  // null when tied to the embedding
  std::vector<Param*> layer_norms_;
};

}  // namespace nemotron::model
