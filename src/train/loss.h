// Losses over per-token log-probabilities, handed to the training step (train_step.h): the
// model gives log p(label_n | context) per token and takes d loss / d log p per token back, so
// pretraining, SFT, GRPO and evaluation share one step and differ only in this object.
// A step's loss is (sum over its micro-batches of the loss's numerator) / normaliser, the
// normaliser computed once per step over the whole global batch (Megatron's
// calculate_per_token_loss: the mean over every loss token of the step, not a mean of means).
// Two forms:
//  - linear (cross-entropy): numerator = sum_n c_n * -log p_n with c known before the forward;
//    the model's head then computes value and gradient in one fused pass (the cross-entropy
//    kernel with c as its mask), exactly as a dedicated cross-entropy path would.
//  - general (GRPO's clipped policy gradient, reference/pipeline-and-rl.md §2.8): the step runs
//    the forward, hands the per-token log-probs to per_token(), and back-propagates the
//    d numerator / d log p it returns through the same fused head (one more LM-head pass).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "model/hybrid_model.h"
#include "parallel/communicator.h"

namespace nemotron::train {

struct LossSum {
  double loss_sum = 0;     // the numerator, summed over the batches seen
  double token_count = 0;  // the normaliser (for cross-entropy: loss tokens)
  double mean() const { return token_count > 0 ? loss_sum / token_count : 0.0; }
};

// The general form's answer for one micro-batch.
struct TokenLossGrad {
  double loss_sum = 0;  // this micro-batch's part of the numerator
  // d numerator / d log p_n, [N] (N = B*T of the micro-batch; 0 where nothing depends on the
  // token), any float dtype, on the host or the compute device.
  Tensor dlogprob;
  // Sums the step adds up over micro-batches and reports (divided by the normaliser in logs when
  // their name says so); e.g. GRPO's clipped-token count and log-prob mismatch.
  std::map<std::string, double> metrics;
};

class LossFn {
 public:
  virtual ~LossFn() = default;
  // For logs: "lm loss" (Megatron's name for the masked cross-entropy).
  virtual std::string name() const = 0;
  // Once per step, before any forward, with every micro-batch of the global batch (on the host
  // or the device): the number the step divides numerator and gradients by. Must be > 0.
  // With data parallelism, `micro` is this rank's share and the step sums the answer over the
  // data group.
  virtual double normaliser(const std::vector<model::Batch>& micro) = 0;
  // Data parallelism: called by the step right after normaliser(), on every rank of the data
  // group, so a loss that keeps counts of the global batch (e.g. for metrics it returns already
  // divided) sums them over the group. The step sums the normaliser itself. Nothing by default.
  virtual void reduce_counts(parallel::Communicator& data_group) {}
  // How the step combines a metric over micro-batches and data-parallel ranks: summed by default;
  // extrema (e.g. GRPO's probs_ratio_min) by min or max.
  virtual parallel::ReduceOp metric_op(const std::string& name) const {
    (void)name;
    return parallel::ReduceOp::sum;
  }
  // True: a global batch with a normaliser of 0 (nothing to train) gives loss 0 and a zero
  // gradient, and the optimizer still steps (NeMo RL's GRPO: 0 / (0 + 1e-8)); false (default): the
  // step refuses it with an InputError.
  virtual bool zero_when_empty() const { return false; }
  // The linear form: when numerator = sum_n c_n * -log p_n with c independent of the log-probs,
  // set *c to [N] weights (compute dtype or float32, the batch's device) or leave it undefined
  // for c = 1 on every token with a label, and return true. False: the general form.
  virtual bool linear_weights(const model::Batch& mb, Tensor* c) const {
    (void)mb, (void)c;
    return false;
  }
  // The general form: `logprobs` [N] (stat dtype, compute device) are log p of mb.labels (0 where
  // a label is negative); `micro_index` is the micro-batch's position in the step (a loss holding
  // per-sample data, e.g. GRPO's old log-probs and advantages, finds its rows by it). Linear
  // losses implement it too (it is their reference and their evaluation path).
  virtual TokenLossGrad per_token(Context& ctx, int64_t micro_index, const model::Batch& mb,
                                  const Tensor& logprobs) = 0;
};

// Tokens that count towards the loss: labels >= 0, weighted by the mask.
double count_loss_tokens(const model::Batch& batch);

// Masked next-token cross-entropy (pretraining, SFT): numerator sum_n m_n * -log p_n over tokens
// with a label (label >= 0), normaliser sum_n m_n over the same tokens of the global batch (m = 1
// without a loss_mask; an SFT loss_mask is 1 on assistant tokens).
class MaskedCrossEntropy : public LossFn {
 public:
  std::string name() const override { return "lm loss"; }
  double normaliser(const std::vector<model::Batch>& micro) override;
  bool linear_weights(const model::Batch& mb, Tensor* c) const override;
  TokenLossGrad per_token(Context& ctx, int64_t micro_index, const model::Batch& mb, const Tensor& logprobs) override;
};

}  // namespace nemotron::train
