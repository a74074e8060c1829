// The attention mixer (reference/architectures.md A.5; B.3 for RoPE): GQA self-attention,
//   q = u Wq^T, k = u Wk^T, v = u Wv^T (+ biases iff attention_bias), split into heads of
//   hd = cfg.attn_head_dim() (not necessarily H / nq); RoPE on q and k iff
//   position_embedding_type == "rope" (Llama/DeciLM; Nemotron-H has none); causal attention
//   (ops/attention.h); out = o Wo^T.
// Hub names under the prefix: q_proj, k_proj, v_proj, o_proj (.weight, .bias).
#pragma once
#include <string>

#include "model/fused_linears.h"
#include "model/linear.h"
#include "model/mixer.h"
#include "model/model_shard.h"
#include "ops/rope_freq.h"

namespace nemotron::model {

struct AttentionSaved : MixerSaved {
  Tensor u;        // input [B, T, H]
  Tensor q, k, v;  // heads, after RoPE when used: [B, T, nq|nkv, hd]
  Tensor o;        // attention output [B, T, nq, hd], the o_proj input
  Tensor lse;      // row log-sum-exp of the scaled scores [B, nq, T] (context parallel: per local
                   // chunk, [2, B, nq, T / 2])
  SequenceLayout layout;  // packed rows: the forward's seq_idx and position_ids
  LinearSaved q_proj, k_proj, v_proj, o_proj;  // their adapters' h (LoRA), for the backward
};

class AttentionMixer : public Mixer {
 public:
  // num_key_value_heads: this layer's KV-head count (DeciLM: per layer), 0 = the config's.
  // Tensor parallelism (shard.tensor_size T > 1): this rank holds nq / T query heads and nkv / T
  // KV groups (q/k/v split by rows, o_proj by columns) and returns its partial o_proj product;
  // with fewer KV groups than T (T a multiple of nkv), k/v whole and one group computed per rank.
  // Context parallelism (layout.context_split): K and V all-gathered over the context group, each
  // local chunk's queries (RoPE at their global positions) attend over the keys up to the chunk's
  // end; see forward().
  AttentionMixer(const ModelConfig& cfg, ParamStore& store, const std::string& prefix, int64_t layer_index,
                 int64_t num_key_value_heads = 0, const ModelShard& shard = {});

  LayerKind kind() const override { return LayerKind::attention; }
  bool split_over_tensor() const override { return split_; }
  // q/k/v ~ N(0, initializer_range), o_proj ~ N(0, initializer_range / sqrt(num_layers)), biases 0.
  void init(uint64_t seed) override;
  Tensor forward(Context& ctx, const Tensor& u, std::unique_ptr<MixerSaved>* saved,
                 const SequenceLayout& layout = {}) override;
  Tensor backward(Context& ctx, const MixerSaved& saved, const Tensor& dout) override;
  // Projections 2 H hd (2 nq + 2 nkv) plus causal attention: token t attends to t + 1 keys, on
  // average (T + 1) / 2, and QK^T and PV each cost 2 hd per (query head, key):
  //   2 H hd (2 nq + 2 nkv) + 4 nq hd (T + 1) / 2.
  double forward_flops_per_token(int64_t T) const override;
  // Paged KV pools [num_blocks, block_size, nkv, hd] for K and V (model/decode_state.h).
  std::unique_ptr<LayerDecodeState> make_decode_state(const DecodeConfig& cfg, Backend& backend,
                                                      DType dtype) const override;
  // q/k/v of the new tokens (RoPE at their positions when used), their K and V written into the
  // slots' blocks, then attention of the new queries over each sequence's cache
  // (ops/kv_cache_decode.h, ops/attention_decode.h), o_proj. In a model that only generates,
  // q/k/v come from one GEMM on their fused weights (model/fused_linears.h) and one split.
  Tensor extend(Context& ctx, const Tensor& u, LayerDecodeState* state, const DecodeBatch& batch) override;

 private:
  // k or v of this rank's KV groups (all of the projection's rows, or kv_rows_ when shared), and
  // its backward (du accumulated).
  Tensor project_kv(Context& ctx, const Linear& proj, const Tensor& u, LinearSaved* keep = nullptr) const;
  void project_kv_backward(Context& ctx, const Linear& proj, const Tensor& u, const Tensor& dy, Tensor& du,
                           const LinearSaved& kept) const;

  int64_t H_, nq_, nkv_, hd_;  // nq_, nkv_: this rank's heads
  RowBlock kv_rows_;           // the shared KV group's rows of k_proj / v_proj ({0, 0}: not shared)
  bool rope_;
  bool split_ = false;
  ops::RopeFreq rope_freq_;
  double init_std_, out_std_;
  Linear q_proj_, k_proj_, v_proj_, o_proj_;
  FusedLinears qkv_;  // q, k, v_proj's weights as one (frozen stores, KV groups not shared)
};

}  // namespace nemotron::model
