// Router load balancing while training (reference/architectures.md A.7.4): the aux-loss-free
// expert-bias update (tokens each expert received over the step's micro-batches, then
// b_i += rate * sign(mean(c) - c_i) after the optimizer step) and Megatron's seq_aux_loss, whose
// gradient the MoE mixers add themselves (MoeMixer::set_seq_aux_loss). One object per model.
// The MTP blocks' MoE layers (model/mtp.h) take part as the trunk's do: the aux loss of every
// depth's forward, and a bias update from the tokens of all the depths that ran the layer (a block
// reused at every depth sums its D forwards, as its weights' gradient does).
#pragma once
#include <cstdint>
#include <vector>

#include "model/hybrid_model.h"
#include "model/moe_mixer.h"
#include "parallel/communicator.h"
#include "train/train_loop_config.h"

namespace nemotron::train {

// b_i += rate * sign(mean(c) - c_i) (sign(0) = 0), in the bias's dtype.
void update_expert_bias(model::Param& bias, const std::vector<int64_t>& counts, double rate);

class MoeBalancer {
 public:
  MoeBalancer(model::HybridModel& net, const MoeSection& cfg);
  int64_t num_layers() const { return static_cast<int64_t>(layers_.size()); }

  // Before a step of `micro_batches` forward/backwards: the aux loss of each micro-batch gets
  // weight 1 / micro_batches (the objective is the lm loss over the global batch plus each MoE
  // layer's aux loss averaged over the micro-batches); clears the step's counts.
  void begin_step(int64_t micro_batches);
  // After each training forward: adds the expert counts and aux losses that forward reported
  // (HybridModel::forward's stats, and mtp_loss's when the step ran the MTP depths). Forwards
  // whose stats are not passed here (evaluation, rollouts) do not count.
  void add(const model::ForwardStats& stats);
  // Data parallelism: the step's counts and aux losses summed over the data group, before the
  // bias update, so every rank updates the biases alike (from the whole global batch).
  void reduce(parallel::Communicator& group);
  // After the optimizer step: the expert-bias update, when enabled.
  void end_step();
  // Turns the aux loss off for evaluation forwards (begin_step turns it back on).
  void for_evaluation();

  // Of the last step: the aux loss summed over layers (mean over micro-batches), and the worst
  // layer's max_i c_i / mean(c) (1 = perfectly balanced).
  double step_aux_loss() const { return aux_sum_ / static_cast<double>(micro_batches_ > 0 ? micro_batches_ : 1); }
  double step_max_load() const;
  // Per layer (the trunk's MoE layers, then each MTP block's), tokens per expert in the last step.
  const std::vector<std::vector<int64_t>>& step_counts() const { return counts_; }

 private:
  MoeSection cfg_;
  std::vector<model::MoeMixer*> layers_;  // the trunk's MoE layers, then each MTP block's
  int64_t trunk_layers_ = 0;
  // ForwardStats::mtp_moe entry j belongs to layers_[mtp_slots_[j]] (depth by depth).
  std::vector<size_t> mtp_slots_;
  std::vector<std::vector<int64_t>> counts_;
  int64_t micro_batches_ = 0;
  double aux_sum_ = 0;
};

}  // namespace nemotron::train
