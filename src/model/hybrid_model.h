// The layer stack (reference/architectures.md A.1, B.1): embedding, one pre-norm residual layer
// per entry of layer_specs(cfg) (x = x + mixer(rmsnorm(x)); a Nemotron-H pattern symbol or a
// DeciLM sub-block), final norm and LM head (tied or untied), and Nemotron-H's multi-token
// prediction blocks (model/mtp.h) when configured. Parameters carry the Hub names (`backbone.*`
// or DeciLM's `model.*`, `mtp.*`, and `lm_head.weight`). The model knows no loss: it
// returns the final hidden states (forward) and takes their gradient (backward); its head turns
// them into per-token log-probs of given targets, fused with their gradient, over row chunks so
// a [B*T, V] logits buffer never exists at once. Losses live in train/loss.h.
#pragma once
#include <memory>
#include <vector>

#include "model/layer_stack.h"
#include "model/mixer.h"
#include "model/moe_mixer.h"
#include "model/mtp.h"

namespace nemotron::model {

struct Batch {
  Tensor input_ids;  // [B, T] int32/int64
  Tensor labels;     // [B, T] int32/int64; negative = ignored
  Tensor loss_mask;  // [B, T] float in the compute dtype, or undefined (all ones)
  // Packed rows (mixer.h SequenceLayout): seq_idx and position_ids [B, T] int32, or undefined
  // (one sequence per row).
  Tensor seq_idx = {};
  Tensor position_ids = {};
  // This context rank's chunks of every row (train/context_batch.h), not whole rows; then `ahead`
  // holds, for multi-token prediction, the tokens that follow each chunk in its row: [B, 2A]
  // (chunk j's A tokens at columns [jA, (j+1)A); past the row's end ids 0, labels -1, loss mask
  // 0, seq -1).
  bool context_split = false;
  std::shared_ptr<const Batch> ahead = {};
  SequenceLayout layout() const { return {seq_idx, position_ids, {}, context_split}; }
};

// What a forward reports besides its output, when asked: each MoE layer's routing statistics,
// in layer order (the trainer's load balancing reads these; the mixers keep nothing).
struct ForwardStats {
  std::vector<MoeLayerStats> moe;
  // The MTP blocks' MoE layers, filled by mtp_loss: per depth k = 1..D, the MoE layers of depth
  // k's block in layer order (a block reused at every depth reports once per depth).
  std::vector<MoeLayerStats> mtp_moe;
};

// What a training forward keeps for backward(): per layer its input and pre-norm statistics and
// the mixer's saved activations (none under full recomputation: backward reruns the mixer).
struct Activations {
  using Layer = LayerSaved;
  Tensor input_ids;
  SequenceLayout layout;  // of the forward (a recomputed mixer forward needs it again)
  std::vector<Layer> layers;
};

// Rows of the LM head's logits computed at once (a 1 GiB buffer of `dtype`, at most `tokens`).
int64_t head_rows_per_chunk(int64_t vocab_size, DType dtype, int64_t tokens);

class HybridModel {
 public:
  // `shard`: the part of the model this rank builds (model/model_shard.h); the whole by default.
  // `trainable` false: every parameter frozen from the start (ParamStore), for a copy that only runs.
  // `defer_grads`: trainable parameters get no gradient at construction (ParamStore's defer_grads;
  // the optimizer lays them out), for a model whose whole gradients need not exist at once.
  HybridModel(const ModelConfig& cfg, Backend& backend, DType dtype, const ModelShard& shard = {},
              bool trainable = true, bool defer_grads = false);
  ~HybridModel();
  const ModelConfig& config() const { return cfg_; }
  const ModelShard& shard() const { return shard_; }
  ParamStore& params() { return store_; }
  // The trunk's mixers (MTP blocks' are in mtp_blocks()).
  const std::vector<std::unique_ptr<Mixer>>& mixers() const { return trunk_->mixers(); }
  // The trunk's layer observer (LayerStack::set_before_layer; the MTP blocks' layers have none).
  void set_trunk_observer(const LayerStack::LayerObserver* f) { trunk_->set_before_layer(f); }
  void init(uint64_t seed);

  // The trunk: embedding and every layer -> the final residual stream x [B, T, H] (before the
  // final norm). `act` null: inference, nothing kept; else what backward() needs. `stats`, when
  // given, receives the MoE layers' routing statistics of this forward. `layout`: packed rows
  // (every sequence computed as if alone); the default is one sequence per row.
  Tensor forward(Context& ctx, const Tensor& input_ids, Activations* act, ForwardStats* stats = nullptr,
                 const SequenceLayout& layout = {});
  // From dx = d objective / d x (of forward's output; overwritten, it carries the residual
  // gradient down) back through the layers and the embedding: parameter gradients accumulate
  // (+=); frozen parameters get none. Consumes `act`.
  void backward(Context& ctx, Activations& act, Tensor& dx);

  // The head on x [B, T, H]: final norm, LM head and log-softmax at `targets` [B, T], in row
  // chunks. Per token n with target y_n (negative: ignored, 0) and weight w_n (`weights` [B, T]
  // or [N] in the compute dtype or float32; undefined: 1):
  //   out[n] = -w_n * log p(y_n | x_n) = w_n * (logsumexp(z_n) - z_n[y_n])
  // returned as [N] in stat_dtype on the device. With dx: also accumulates the gradient of
  // scale * sum_n out[n] into the head's parameters and writes dx (same shape as x). The
  // cross-entropy kernel fuses the value and the gradient; any per-token loss with
  // d loss / d log p_n = -scale * w_n goes through it (cross-entropy: w = mask).
  Tensor head(Context& ctx, const Tensor& x, const Tensor& targets, const Tensor& weights, double scale, Tensor* dx);
  // Log-probs at a sampling temperature: head() (so the loss, its gradient and token_logprobs)
  // works on logits / t, as NeMo RL's policy does when the generator samples at temperature t
  // (the engine's processed log-probs are log softmax(z / t)). 1 by default; logits(),
  // head_logits() and extend() always return the raw logits.
  void set_logit_temperature(double t);
  double logit_temperature() const { return logit_temperature_; }
  // head() after its final norm (and untempered): the LM head and cross-entropy on normed rows h
  // (MTP depths run it on their final_layernorm output); with dh, writes d(scale * sum out) / dh.
  Tensor lm_head_loss(Context& ctx, const Tensor& h, const Tensor& targets, const Tensor& weights, double scale,
                      Tensor* dh);

  // Multi-token prediction (model/mtp.h, A.8): its depths D (0 without MTP) and blocks.
  int64_t mtp_depths() const { return cfg_.mtp_depths(); }
  const std::vector<std::unique_ptr<MtpBlock>>& mtp_blocks() const { return mtp_; }
  // The D depths on forward()'s output x (the layout of mb), with mb's labels and per-token
  // weights `weights` (undefined: 1) rolled per depth (mtp_targets): returns per depth k the sum
  // sum_n w_k,n * -log p_k(label_k,n) (host). With dx: the gradient of sum_k scales[k-1] * sum_k
  // accumulates into the parameters (MTP blocks, the shared embedding and head, norm_f) and is
  // ADDED into *dx (which holds the main head's gradient), for backward() to carry into the trunk.
  // `stats`, when given, has its mtp_moe replaced by the depths' MoE routing statistics.
  std::vector<double> mtp_loss(Context& ctx, const Tensor& x, const Batch& mb, const Tensor& weights,
                               const std::vector<double>& scales, Tensor* dx, ForwardStats* stats = nullptr);
  // Per-token log-probs log p(targets_n | input_ids_<=n) [B*T] in stat_dtype on the device, 0
  // where the target is negative. Inference: nothing kept.
  Tensor token_logprobs(Context& ctx, const Tensor& input_ids, const Tensor& targets, ForwardStats* stats = nullptr,
                        const SequenceLayout& layout = {});
  // Logits [B, T, V] (nothing is kept for a backward pass).
  Tensor logits(Context& ctx, const Tensor& input_ids, const SequenceLayout& layout = {});
  // The final norm and the LM head on chosen rows of forward()'s output x [B, T, H] (flat row
  // indices into B*T): logits [R, V] in `logits_dtype` on ctx's device. Scoring a few positions
  // of long rows (log-likelihood eval) this way never materialises [B, T, V].
  Tensor head_logits(Context& ctx, const Tensor& x, const std::vector<int64_t>& rows, DType logits_dtype = DType::f32);

  // Incremental decoding (model/decode_state.h): the per-sequence state of `cfg.max_slots`
  // sequences on this model's backend (KV in the model's dtype, SSM states in its stat_dtype).
  // A step's prompts run Mamba through the chunked scan (model/prefill_layout.h) unless
  // set_prefill_by_scan(false) was called before make_decode_state (the token-by-token recurrence
  // of ops/ssd_decode.h, kept for A/B comparisons); cfg.scan_chunk is set here.
  DecodeState make_decode_state(const DecodeConfig& cfg);
  void set_prefill_by_scan(bool on) { prefill_by_scan_ = on; }
  // Appends tokens[i] to slot slots[i]'s sequence (prefill: many tokens, decode: one each; a slot
  // at length 0 starts a new sequence; slots distinct) and returns logits [S, V] in
  // `logits_dtype` (float32 by default; float64 for the exactness tests) on ctx's device, at each
  // slot's last appended token: per token what logits() gives at that position of the whole
  // sequence. Inference only, nothing kept for backward; only the last token's rows go through
  // the head. Token ids are checked (InputError); a call the state refuses (no free KV blocks,
  // over max_seq_len) throws Error before anything changes. After any other failure the state of
  // the call's slots is undefined: release them.
  Tensor extend(Context& ctx, DecodeState& state, const std::vector<int64_t>& slots,
                const std::vector<std::vector<int32_t>>& tokens, DType logits_dtype = DType::f32);
  // extend() in parts, for a decode step captured as a CUDA graph (engine/decode_graphs.h):
  // check_token_ids is its host check (InputError naming the slot); extend_batch runs the model
  // on a planned batch (DecodeState::begin_host, its tensors on ctx's device) and the token ids
  // ids [1, Ntot] int32 already on the device and checked, and only queues work: for a batch of
  // one token per sequence it never waits for the stream (under tensor parallelism its
  // collectives do). The caller commits the batch (DecodeState::commit).
  void check_token_ids(const std::vector<int64_t>& slots, const std::vector<std::vector<int32_t>>& tokens) const;
  Tensor extend_batch(Context& ctx, DecodeState& state, const DecodeBatch& batch, const Tensor& ids,
                      DType logits_dtype);

  // Forward FLOPs per token at sequence length T (matmuls + attention), for MFU; with MTP, its
  // depths' too (a training step runs them).
  double forward_flops_per_token(int64_t T) const;
  // The token embedding: its gradient is the last the backward completes (after the trunk's).
  const Param& embedding() const { return *embed_; }

 private:
  Param& head_weight();
  Tensor gather_rows(Context& ctx, const Tensor& xf, const std::vector<int64_t>& rows);
  // A split model's forward needs its tensor group in the context (internal check).
  void check_groups(const Context& ctx) const;
  Tensor head_on_rows(Context& ctx, const Tensor& x, DType logits_dtype);
  bool recompute() const { return cfg_.recompute_granularity == "full"; }

  ModelConfig cfg_;
  ModelShard shard_;
  double logit_temperature_ = 1.0;
  bool prefill_by_scan_ = true;
  ParamStore store_;
  Param* embed_ = nullptr;
  std::unique_ptr<LayerStack> trunk_;
  Param* norm_f_ = nullptr;
  Param* lm_head_ = nullptr;  // null when tied to the embedding
  std::vector<std::unique_ptr<MtpBlock>> mtp_;
};

}  // namespace nemotron::model
