// The training step every stage shares (pretraining, SFT, GRPO; the demo and the benchmarks):
// one optimizer step on a global batch given as micro-batches, with the loss handed in
// (train/loss.h). Order, as Megatron's train_step:
//   zero grads; normaliser = loss.normaliser(all micro-batches); for each micro-batch: forward
//   (MoE routing statistics collected explicitly), loss, backward with gradient scale
//   1 / normaliser; the gradients summed over the data-parallel group (data_parallel.h); the
//   gradient hook; global-norm clip; a finite check; AdamW at the given lr; MoE expert-bias
//   update from the step's expert counts.
// The loop around it (logging, evaluation, checkpoints, resume) is the Trainer's (trainer.h).
// On a GPU the step waits for the device as little as it can (core/host_waits.h): every
// micro-batch is uploaded before the first forward and the loss is read once, after the last
// backward; what remains are the ops' own waits (range checks of token ids, in the embedding's
// forward only, and of labels; the MoE expert counts) and the gradient norm's.
// The CPU reduces in a fixed order, so the same inputs give bit-identical results.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/workspace.h"
#include "parallel/process_groups.h"
#include "model/hybrid_model.h"
#include "train/adamw.h"
#include "train/data_parallel.h"
#include "train/grad_slots.h"
#include "train/loss.h"
#include "train/moe_balancing.h"
#include "train/param_gather.h"

namespace nemotron::train {

// Multi-token prediction's part of the objective (reference/architectures.md A.8.3): numerator
// += sum_k weight[k-1] * S_k (S_k: depth k's cross-entropy sum), weight_k = alpha / D *
// normaliser / tokens_k with tokens_k the global batch's depth-k loss tokens (the labels rolled
// left by k), so that objective / normaliser = L_main + alpha / D * sum_k L_k, each L_k the
// depth's own per-token mean (Megatron's calculate_per_token_loss renormalisation). Empty when
// the model has no MTP or the loss is not linear (GRPO's policy loss trains without MTP).
struct MtpWeights {
  std::vector<double> weight, tokens;  // per depth k = 1..D
  bool on() const { return !weight.empty(); }
};
// With `group`, the depths' token counts are summed over it (data parallelism: the global batch
// is every member's micro-batches).
MtpWeights mtp_weights(const model::HybridModel& net, const std::vector<model::Batch>& micro, const LossFn& loss,
                       double normaliser, parallel::Communicator* group = nullptr);

// One micro-batch's part of a step.
struct MicroBatchResult {
  double loss_sum = 0;                    // the loss's numerator over this micro-batch (main head)
  // With defer_loss_read (linear losses): loss_sum stays 0 and this holds the per-token values,
  // not yet read, whose sum it is (their own copy on the model's device: no host wait).
  Tensor loss_values;
  std::map<std::string, double> metrics;  // the loss's metrics (general form only)
  std::vector<double> mtp_sums;           // per MTP depth: its cross-entropy sum (when MTP is on)
  double mtp_objective = 0;               // sum_k weight_k * mtp_sums[k-1]: MTP's part of the numerator
};

// One micro-batch through the model with `loss`: forward, the loss, backward; the gradient of
// grad_scale * numerator accumulates (+=) into the model's parameters. Linear losses
// (cross-entropy) take the fused head path: the same kernel calls as a dedicated cross-entropy
// step. General losses run the head forward, per_token(), then the head backward with the
// returned d numerator / d log p. `stats` receives the forward's MoE statistics when given (the
// MTP depths' MoE layers' in stats->mtp_moe when they ran).
// `mtp` on (linear losses only): the MTP depths' loss joins the objective with those weights.
// `trunk_layer_done` (when given) is called as the trunk's backward completes each layer's
// gradients (Context::on_layer_backward; data parallelism's overlapped reduction).
// `defer_loss_read`: leave the main head's loss on the device (MicroBatchResult::loss_values)
// instead of waiting for it; the step reads every micro-batch's at once (sum_loss_values).
MicroBatchResult forward_backward(Context& ctx, model::HybridModel& net, const model::Batch& mb, LossFn& loss,
                                  int64_t micro_index, double grad_scale, model::ForwardStats* stats = nullptr,
                                  const MtpWeights* mtp = nullptr,
                                  const std::function<void(int64_t)>* trunk_layer_done = nullptr,
                                  bool defer_loss_read = false);
// The sums of deferred loss values, added in order (as the micro-batches' loss_sum would be),
// with one copy to the host: one wait for the whole step instead of one per micro-batch.
double sum_loss_values(const std::vector<Tensor>& values);
// Forward only: the loss's numerator over one batch (evaluation: the main head's loss only).
// With `mtp` on, *mtp_objective (when given) receives MTP's part of the numerator.
double forward_loss(Context& ctx, model::HybridModel& net, const model::Batch& mb, LossFn& loss,
                    int64_t micro_index = 0, const MtpWeights* mtp = nullptr, double* mtp_objective = nullptr);

// Masked cross-entropy of one batch without an optimizer (gradient checks, `compare`, tests):
// the numerator and the token count; with grad_scale, gradients of grad_scale * numerator
// accumulate into the model's parameters. With MTP the numerator is the whole objective of
// A.8.3 (main + MTP weighted as in mtp_weights over this one batch).
LossSum cross_entropy_loss(Context& ctx, model::HybridModel& net, const model::Batch& batch);
LossSum cross_entropy_backward(Context& ctx, model::HybridModel& net, const model::Batch& batch, double grad_scale);

struct StepConfig {
  double clip_grad = 1.0;  // optimizer.clip_grad: max global norm, 0 = no clipping
  MoeSection moe;          // router load balancing (moe:)
  uint64_t seed = 0;       // rng.seed: keys the dropout masks of each micro-batch (Context::dropout)
  // The run's process groups (null: one process). With a data group of D ranks, each rank's
  // run() gets its share of the global batch's micro-batches (DataParallelSource) and the step
  // reduces the normaliser, the loss sums, the MoE statistics and the gradients over the group.
  std::shared_ptr<const parallel::ProcessGroups> groups;
  // Elements per gradient bucket of the data-parallel reduction (Megatron's ddp.bucket_size); a
  // sharded optimizer's buckets are its own (AdamW's bucket_elements).
  int64_t grad_bucket_elements = GradReducer::kDefaultBucketElements;
};

struct StepResult {
  double loss = 0;        // numerator / normaliser: the mean the step minimised
  double loss_sum = 0;    // numerator over the global batch
  double normaliser = 0;  // e.g. loss tokens of the global batch
  double aux_loss = 0;    // MoE seq_aux_loss summed over layers, mean over micro-batches (0 when off)
  double grad_norm = 0;   // before clipping
  double lr = 0;
  double moe_max_load = 0;                // worst layer's max_i c_i / mean(c); 0 without MoE
  std::map<std::string, double> metrics;  // the loss's metric sums over the step
  std::vector<double> mtp_losses;         // per MTP depth k: L_k, its mean cross-entropy (A.8.3)
  double mtp_loss = 0;                    // alpha / D * sum_k L_k: what MTP adds to `loss` in the objective
};

// Called after the backward of the last micro-batch, before the gradient norm, with the store
// whose gradients are complete on this rank: where data-parallel reduction goes. None by default.
// With the distributed optimizer the store's gradients are this rank's local sums (the reduced
// range is in AdamW::shard_grads()).
using GradHook = std::function<void(model::ParamStore& params)>;

class TrainStep {
 public:
  // `opt` must be built over net.params(). Activations come from an arena on the CPU (no
  // allocator calls in a step) and from the caching allocator on the GPU (each freed after its
  // last use: a lower peak, and what makes model.recompute_granularity save memory).
  TrainStep(model::HybridModel& net, AdamW& opt, StepConfig cfg);

  // One optimizer step on `micro` (the global batch's micro-batches, on the host or the compute
  // device) at learning rate lr. `iteration` names the step in errors and keys its dropout masks. Throws
  // InputError when the normaliser is not positive (e.g. no token with a label), Error when the
  // loss or the gradient norm is not finite (before the update: the weights stay as they were).
  StepResult run(const std::vector<model::Batch>& micro, LossFn& loss, double lr, int64_t iteration);
  // Forward only, MoE aux loss off: the numerator and normaliser of one batch (evaluation).
  LossSum evaluate(const model::Batch& batch, LossFn& loss);
  // A rank's evaluation sums -> the whole data x context group's (the identity on one process).
  LossSum reduce(LossSum local);

  void set_grad_hook(GradHook hook) { grad_hook_ = std::move(hook); }
  // The compute context of every forward/backward (e.g. to attach an op profiler).
  Context& context() { return ctx_; }
  const parallel::ProcessGroups& groups() const { return parallel::groups_of(ctx_); }
  // Not under sharded gradients (grad_slots() then).
  const GradReducer& grad_reducer() const { return *reducer_; }
  // Sharded gradients (the optimizer shards them over a data group of several; train/grad_slots.h):
  // where each layer's are reduce-scattered; null otherwise.
  const GradSlots* grad_slots() const { return slots_.get(); }
  // Full parameter sharding (the optimizer shards values over a data group of several): where
  // the layers' weights are gathered (train/param_gather.h); null otherwise.
  ParamGather* param_gather() { return gather_.get(); }
  const MoeBalancer& balancer() const { return balancer_; }
  model::HybridModel& model() { return net_; }
  AdamW& optimizer() { return opt_; }

 private:
  // Context parallelism: this context rank's chunks of each micro-batch (train/context_batch.h).
  std::vector<model::Batch> context_rows(const std::vector<model::Batch>& micro) const;
  model::HybridModel& net_;
  AdamW& opt_;
  StepConfig cfg_;
  MoeBalancer balancer_;
  Workspace ws_;
  Context ctx_;
  std::unique_ptr<GradReducer> reducer_;  // sums the gradients over the data group (or reduce-scatters them)
  std::unique_ptr<GradSlots> slots_;      // sharded gradients only (instead of reducer_)
  std::unique_ptr<ParamGather> gather_;   // full parameter sharding only
  GradHook grad_hook_;
};

// The start-up lines of Megatron FSDP's sharded weights and gradients ("full parameter sharding
// (KEY=optim_grads_params): bf16 weights 1/D per rank: X MiB of Y MiB, ..."; "sharded gradients
// ..."), "" where `step` shards neither; `strategy_key`: the sharding strategy's key in the stage's
// schema.
std::string fsdp_state_lines(TrainStep& step, const std::string& strategy_key);

}  // namespace nemotron::train
