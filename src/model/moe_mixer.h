// The MoE mixer of Nemotron 3 (reference/architectures.md A.7): sigmoid router with a
// selection-only correction bias and group-limited top-k (ops/moe_router.h), tokens permuted to
// their experts (ops/moe_dispatch.h), the squared-ReLU expert MLPs as two grouped GEMMs over all
// experts' rows (ops/grouped_matmul.h), a weighted combine, optional latent projections around
// the routed experts, plus a shared expert on the full-width input:
//   out = fc2_latent(sum_j w_j E_{I_j}(fc1_latent(x))) + shared(x).
// The router runs in float32 (stat_dtype): scores, combine weights, the aux-loss statistics; its
// logits and their gradient are in the compute dtype (the gate GEMM's).
// Hub names under the prefix: gate.weight, gate.e_score_correction_bias (a buffer: requires_grad =
// false, no gradient), experts.{e}.{up,down}_proj.weight, shared_experts.{up,down}_proj.weight,
// fc1_latent_proj.weight, fc2_latent_proj.weight. Experts and shared expert carry biases iff
// mlp_bias (as the HF remote code's NemotronHMLP); router and latent projections never do.
// Tensor parallelism (ModelShard::tensor_size T > 1, Megatron's expert tensor parallelism = TP):
// each expert's and the shared expert's width split T ways (up by rows, down by columns); the
// router, the correction bias and the latent projections whole on every rank. The output and
// input gradient are partial sums (the router's input gradient counted on tensor rank 0 only).
// Expert parallelism (ModelShard::expert_size P > 1): the mixer holds and registers only its
// block of E / P experts (global names); every member routes its own tokens over all E, the
// expert inputs travel to their experts' ranks and back (model/expert_exchange.h, over the
// Context's expert group), and the rest (router, combine, shared expert, latents) is replicated.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "model/expert_exchange.h"
#include "model/mlp_mixer.h"
#include "model/model_shard.h"
#include "ops/moe_dispatch.h"
#include "ops/moe_router.h"

namespace nemotron::model {

// What one MoE forward reports, for load balancing and logs. The mixer keeps none of it: the
// caller asks for it per forward (so an inference or rollout forward between training
// micro-batches changes nothing the balancer sees).
struct MoeLayerStats {
  std::vector<int64_t> tokens_per_expert;  // [E], slots each expert received
  // seq_aux_loss of this forward (0 when off). Context-split rows: this rank's part (its tokens'
  // probabilities against the whole sequences' counts), which sums over the context group to the whole.
  double aux_loss = 0;
  // The expert choice [N, K] int32 on the compute device, as allocated from the forward's context
  // (valid until its workspace is reset; clone it to pin it with force_selection).
  Tensor selection;
};

struct MoeSaved : MixerSaved {
  Tensor x;                 // input rows [N, H], N = B*T
  Tensor scores;            // sigmoid router scores [N, E]
  Tensor topk_idx;          // chosen experts [N, K] int32, best first
  Tensor topk_w;            // their combine weights [N, K]
  ops::MoeDispatch dispatch;  // the permutation, with tokens_per_expert
  // Expert parallelism: the exchange of the rows with the experts' ranks (null without). The
  // expert buffers xs and act then hold the R rows this rank's experts received, not N*K.
  std::shared_ptr<const ExpertExchange> exchange;
  Tensor xs;                // expert inputs, expert-major slots [N*K, d_e] (or [R, d_e])
  Tensor act;               // relu2 of the up_proj outputs [N*K, F_moe]: dW_down's input, and all
                            // relu2's backward needs (ops::relu2_backward_from_output)
  Tensor ys;                // expert outputs [N*K, d_e], back in this rank's slots
  Tensor routed;            // weighted combine [N, d_e], the fc2_latent_proj input (latent only)
  std::unique_ptr<MixerSaved> shared;
  // Sequence aux loss (when on): per sequence b and expert i, the tokens whose unbiased top-k
  // holds i, [B, E] (stat dtype, on the device); grad_scale * coeff * E / (K S^2 B).
  Tensor aux_counts;
  double aux_grad_weight = 0;
};

class MoeMixer : public Mixer {
 public:
  MoeMixer(const ModelConfig& cfg, ParamStore& store, const std::string& prefix, int64_t layer_index,
           const ModelShard& shard = {});

  LayerKind kind() const override { return LayerKind::moe; }
  bool split_over_tensor() const override { return split_; }
  // Router, up projections, fc1_latent ~ N(0, initializer_range); down projections (experts and
  // shared) and fc2_latent ~ N(0, initializer_range / sqrt(num_layers)); correction bias 0.
  void init(uint64_t seed) override;
  // Per token; of the layout only context_split matters (seq_aux_loss counts per row, as Megatron's
  // does per sample, and a context-split row's counts are the whole row's).
  Tensor forward(Context& ctx, const Tensor& u, std::unique_ptr<MixerSaved>* saved,
                 const SequenceLayout& layout = {}) override {
    return forward(ctx, u, saved, static_cast<MoeLayerStats*>(nullptr), layout);
  }
  // The same, reporting this forward's routing statistics into `stats` when given (the aux loss
  // value, a [B, E] host read, is computed only then).
  Tensor forward(Context& ctx, const Tensor& u, std::unique_ptr<MixerSaved>* saved, MoeLayerStats* stats,
                 const SequenceLayout& layout = {});
  Tensor backward(Context& ctx, const MixerSaved& saved, const Tensor& dout) override;
  // Only what one token runs: router 2 H E, K experts of 4 d_e F_moe, the shared expert
  // 4 H F_sh, latent projections 2 * 2 H d_lat. Independent of T.
  double forward_flops_per_token(int64_t T) const override;

  // Pins the expert choice to topk_idx [B*T, K] int32 (host) for the following forwards, e.g. to
  // hold it fixed while a gradient check differences the router; nullopt routes normally again.
  void force_selection(std::optional<Tensor> topk_idx) { forced_ = std::move(topk_idx); }
  const ops::MoeRouterParams& router_params() const { return router_; }
  // The selection-only correction bias (a buffer), which aux-loss-free balancing moves (A.7.4).
  Param& correction_bias() { return *correction_bias_; }

  // Megatron's seq_aux_loss (A.7.4), off while coeff == 0. Each forward then computes, over the
  // B sequences of S tokens of u, with p = s / (sum_i s_i + 1e-20) (s = router scores; no
  // normalisation when K = 1) and m the top-K of p without the bias (lowest index wins ties):
  //   aux = coeff * (1/B) * sum_b E / (K S^2) * sum_i (sum_t m_ti) (sum_t p_ti)
  // and each backward adds grad_scale * d aux / d logits to the router gradient (m is constant).
  // Context-split rows (layout.context_split, C ranks each holding S / C tokens of every row):
  // sum_t m_ti is all-reduced over the context group and S is the whole row's, so each rank's
  // gradient is the one-process gradient of its own tokens' logits; sum_t p_ti stays local, as in
  // Megatron-Core (tokens_per_expert reduced over the TP x CP group, probabilities local).
  // A setting (the trainer's MoeBalancer sets it per step and clears it for evaluation), not a
  // per-call record; MoeLayerStats::aux_loss reports the value.
  void set_seq_aux_loss(double coeff, double grad_scale) { aux_coeff_ = coeff, aux_grad_scale_ = grad_scale; }
  int64_t expert_dim() const { return d_e_; }
  // Expert parallelism: the experts this mixer holds, [first_local_expert, + local_experts).
  int64_t first_local_expert() const { return first_expert_; }
  int64_t local_experts() const { return static_cast<int64_t>(up_.size()); }

 private:
  int64_t H_, d_e_, F_moe_;  // F_moe_: this rank's part of the experts' width
  ops::MoeRouterParams router_;
  double init_std_, out_std_;
  bool split_ = false;  // tensor parallel: experts and shared expert split by width, router whole
  int tensor_rank_ = 0;
  Linear gate_;
  Param* correction_bias_ = nullptr;
  int ep_size_ = 1;
  int64_t first_expert_ = 0;
  // experts.{e}.up_proj / down_proj of the held experts, registered per expert (Hub names), run
  // grouped.
  std::vector<Linear> up_, down_;
  std::unique_ptr<MlpMixer> shared_;
  Linear fc1_latent_, fc2_latent_;
  std::optional<Tensor> forced_;
  double aux_coeff_ = 0, aux_grad_scale_ = 1;
};

}  // namespace nemotron::model
