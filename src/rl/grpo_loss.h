// GRPO's loss, NeMo RL's ClippedPGLossFn (reference/pipeline-and-rl.md §2.8;
// nemo_rl/algorithms/loss/loss_functions.py), as a general-form train::LossFn: the shared training
// step runs the forward, hands per_token() the current log-probs lp, and back-propagates the
// returned d numerator / d lp. Per token (M = token mask * sample mask; prev = stopgrad(lp) under
// force_on_policy_ratio):
//   ratio r = exp(lp - prev); force_on_policy_ratio: exp(lp - stopgrad(lp)) (value 1, unclamped);
//   disable_ppo_ratio: r = lp (unclamped, REINFORCE); sequence_level_importance_ratios (GSPO): one
//   r per row, exp(token mean of lp - prev), the mean over the token mask (+ 1e-8).
//   clipped = clamp(r, 1 - ratio_clip_min, 1 + ratio_clip_max), l = max(-A*r, -A*clipped); CISPO:
//   l = -A * stopgrad(clipped) * lp; dual clip (ratio_clip_c = c): where A < 0, l = min(l, -A*c);
//   w = exp(prev - gen_lp) per token, or per row exp(sum_t M (prev - gen_lp)) with GSPO (NaN/inf
//   -> 0, a constant); truncated importance sampling on w: tis clamps it to [ratio_min or 0,
//   ratio], icepop zeroes the tokens outside [ratio_min, ratio], seq-mask-tis zeroes the rows whose
//   exp(token mean of prev - gen_lp) is outside it; w multiplies l when
//   use_importance_sampling_correction (the only way it is used; TIS needs it).
//   KL (beta = reference_policy_kl_penalty, 0 under use_kl_in_reward): logr = clamp(ref_lp - lp,
//   +-kl_input_clamp_value), k1 = -logr, k2 = logr^2/2, k3 = exp(logr) - 1 - logr; beta *
//   clamp(v * k, +-kl_output_clamp_value) with v = exp(lp - gen_lp) under
//   use_on_policy_kl_approximation, else exp(lp - stopgrad(lp)) (value 1): v keeps its gradient
//   (the score-function term), except where the input clamp is active.
// token_level_loss: numerator sum M*(w*l + kl), normaliser = valid tokens of the global batch;
// otherwise per row the token mean (over the token mask, + 1e-8) times the sample mask, normaliser
// = valid samples of the global batch (the KL too: its metric is then a mean over sequences).
// positive_example_nll_weight mu > 0 (VAPO): + mu * the micro-batch's mean -lp over M of the rows
// with reward > 0 (normalised by that micro-batch's own count, as NeMo RL's). NeMo RL adds 1e-8 to
// the global normaliser; we do not, and a global batch with nothing to train gives loss 0 and a
// zero gradient (its 0 / (0 + 1e-8)).
// Gradients follow torch's: clamp passes the gradient only inside its bounds, constants get none.
#pragma once
#include <string>
#include <vector>

#include "rl/grpo_config.h"
#include "train/loss.h"

namespace nemotron::rl {

// One micro-batch's per-sample data, every vector [B*T] aligned with the batch's labels (position
// n holds the values of the token labels[n], i.e. NeMo RL's tensors after the [:, 1:] shift).
struct GrpoTokenData {
  std::vector<double> advantages;
  std::vector<double> prev_logprobs;        // the trainer's log-probs before the update
  std::vector<double> generation_logprobs;  // the generator's (0 where not generated)
  std::vector<double> reference_logprobs;   // the frozen initial policy's; empty = none
  std::vector<double> sample_mask;          // [B]: 0 drops the whole row
  std::vector<double> rewards;              // [B]: for positive_example_nll_weight; empty = none
};

class ClippedPGLoss : public train::LossFn {
 public:
  explicit ClippedPGLoss(LossFnSection cfg);
  // The step's per-micro-batch data, in the order the micro-batches are given to TrainStep::run.
  void set_data(std::vector<GrpoTokenData> micro) { data_ = std::move(micro); }
  // Context parallelism: the training step hands per_token and normaliser this rank's two chunks of
  // every row (model/context_split.h; the batch's context_split), so the whole rows' data is cut
  // alike and the per-row sums (tokens, GSPO's and seq-mask-tis's log sums, the NLL's count, GSPO's
  // row gradient) are summed over `group` (null: one process); per-row counts (samples) are
  // counted by its rank 0 only.
  void set_context_group(parallel::Communicator* group) { context_ = group; }
  const std::vector<GrpoTokenData>& data() const { return data_; }
  const LossFnSection& config() const { return cfg_; }

  std::string name() const override { return "loss"; }  // NeMo RL's name in train metrics
  // Valid tokens (token_level_loss) or valid samples of the global batch; also records both for
  // the metrics, which are returned already divided (NeMo RL's globally normalised sums: summing
  // them over the micro-batches gives the global mean).
  double normaliser(const std::vector<model::Batch>& micro) override;
  // Metrics (NeMo RL's): probs_ratio, probs_ratio_clamped, clip_fraction_lower, clip_fraction_upper
  // (tokens whose clamp was active below / above; 0 where nothing is clamped), token_mult_prob_error
  // (mean exp|gen_lp - prev|), gen_kl_error, policy_kl_error, js_divergence_error (Jensen-Shannon
  // of prev and gen_lp's token probabilities through their mixture), approx_entropy (-mean
  // exp(lp - gen_lp) * lp), sampling_importance_ratio (the truncated weights; a mean over rows with
  // GSPO), is_oob_ratio (with TIS: tokens, or rows for seq-mask-tis, outside its bounds), all means
  // over M; kl_penalty (the loss's KL term / beta: over tokens or sequences as the loss);
  // num_valid_samples (a count); positive_nll_loss (the micro-batch's NLL mean; NeMo RL sums them);
  // probs_ratio_min/max and probs_ratio_clamped_min/max over M (+-inf for none; reduced by min/max:
  // metric_op).
  train::TokenLossGrad per_token(Context& ctx, int64_t micro_index, const model::Batch& mb,
                                 const Tensor& logprobs) override;
  // Valid tokens and samples summed over the data-parallel group: the metrics' token means are
  // over the whole global batch, so summing every rank's metrics gives the global mean.
  void reduce_counts(parallel::Communicator& data_group) override;
  parallel::ReduceOp metric_op(const std::string& name) const override;
  bool zero_when_empty() const override { return true; }

 private:
  LossFnSection cfg_;
  std::vector<GrpoTokenData> data_;
  parallel::Communicator* context_ = nullptr;
  double valid_tokens_ = 0, valid_samples_ = 0;
};

// Token mask of a batch: 1 where labels >= 0, times loss_mask where there is one. [B*T].
std::vector<double> grpo_token_mask(const model::Batch& mb);

}  // namespace nemotron::rl
