// Multi-token prediction of Nemotron 3 Super (reference/architectures.md A.8): after the trunk,
// D extra depths each predict one token further ahead. Depth k (1..D) on position t:
//   e   = Embedding[ids rolled left by k]                    (the trunk's embedding table)
//   u   = eh_proj(concat(enorm(e), hnorm(h^{k-1})))          (h^0 = the trunk after norm_f)
//   u   = the block's layer stack over u                      (its own pattern, e.g. "*E")
//   h^k = final_layernorm(u);  logits = lm_head(h^k)          (the trunk's head) -> token t+k+1
// num_nextn_predict_layers blocks are stored: one reused at every depth (Super) or one per depth.
// Parameters carry the HF names of A.8.2: block b's inner layer i is mtp.layers.{b*P+i} (P = the
// inner pattern's length); enorm/hnorm/eh_proj sit on its first inner layer, final_layernorm on
// its last. The loss of A.8.3 (per-depth means, L = L_main + alpha/D * sum_k L_k) is the train
// step's (train/train_step.cpp); this module computes per-depth sums and gradients.
// Training-time only: logits(), token_logprobs() and generation ignore it.
#pragma once
#include <memory>
#include <vector>

#include "model/layer_stack.h"

namespace nemotron::model {

struct Batch;

// Depth k's shifted inputs and targets (A.8.3), on `backend`: ids [B, T] int32 = input_ids rolled
// left by k (0 in the last k columns, as Megatron's roll_tensor fills); labels [B, T] int32 =
// labels rolled left by k, -1 where that leaves the row or (packed rows) the sequence; weights
// rolled likewise (undefined when `weights` is: every labelled token weighs 1); tokens = the sum
// of weights over labelled tokens (the depth's loss normaliser).
struct MtpTargets {
  Tensor ids, labels, weights;
  double tokens = 0;
};
// A context-parallel batch (mb.context_split) rolls each of its two chunks with the tokens after it
// (mb.ahead, at least k of them), exactly as the whole row would; its weights must then be its
// loss mask (the masked cross-entropy's).
MtpTargets mtp_targets(const Batch& mb, const Tensor& weights, int64_t k, Backend& backend);

// What one depth's forward keeps for its backward.
struct MtpDepthSaved {
  Tensor ids;            // the rolled ids (embedding backward)
  Tensor e, rstd_e;      // embedding rows and enorm statistics
  Tensor h_prev, rstd_h; // the depth's input hidden and hnorm statistics
  Tensor cat;            // [N, 2H] = concat(enorm(e), hnorm(h_prev)), the eh_proj input
  std::vector<LayerSaved> layers;
  Tensor u, rstd_f;      // the block's output and final_layernorm statistics
};

class MtpBlock {
 public:
  // Block `b` of `cfg` (inner layers numbered after the trunk's in messages).
  MtpBlock(const ModelConfig& cfg, ParamStore& store, int64_t b, const ModelShard& shard = {});
  void init(uint64_t seed);
  // h_prev [B, T, H] (normed), ids [B, T] -> h^k [B, T, H] (after final_layernorm); `saved`
  // null: nothing kept. `stats`, when given, receives the block's MoE layers' routing statistics
  // of this depth (appended in layer order), as the trunk's forward reports its own.
  Tensor forward(Context& ctx, const Tensor& h_prev, const Tensor& ids, const Param& embed, MtpDepthSaved* saved,
                 const SequenceLayout& layout, bool recompute, std::vector<MoeLayerStats>* stats = nullptr);
  // dh (of forward's output) -> d h_prev; gradients accumulate into this block's parameters and
  // the embedding. Consumes `saved`.
  Tensor backward(Context& ctx, MtpDepthSaved& saved, const Tensor& dh, Param& embed, const SequenceLayout& layout);
  const LayerStack& stack() const { return *stack_; }

 private:
  int64_t H_, vocab_size_;
  bool sequence_split_ = false;  // ModelShard::sequence_split(): h holds this rank's rows only
  float eps_;
  Param *enorm_, *hnorm_, *eh_proj_, *final_norm_;
  double init_std_;
  std::unique_ptr<LayerStack> stack_;
};

}  // namespace nemotron::model
