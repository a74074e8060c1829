// DAPO's dynamic sampling as NeMo RL runs it (nemo_rl/algorithms/grpo.py dynamic_sampling,
// docs/guides/dapo.md; keys grpo.use_dynamic_sampling, batch_multiplier,
// dynamic_sampling_max_gen_batches in rl/grpo_config.h). A prompt group whose rewards are all
// equal (every sample right, or every one wrong) has zero advantage on every row: it adds no
// gradient and only dilutes the batch's token-mean loss. The step's rollouts are gathered round by
// round: each round's groups with a reward spread are kept, the others dropped, until the kept
// rows fill num_prompts_per_step groups; the last round's surplus is cut off (counted as NeMo RL's
// dynamic_sampling_num_discarded_valid_samples). Rounds are capped by
// dynamic_sampling_max_gen_batches; a step still short then is an error (NeMo RL raises), which
// the trainer reports naming the key.
// One difference of form: NeMo RL keeps rows whose per-row std is non-zero; under the whole-group
// baseline that is whole groups, as here. Under the leave-one-out baseline its per-row std drops
// single rows of a mixed group (the one right answer among wrong ones); here a group is kept or
// dropped whole, so its baseline stays the one its rows were scored against.
#pragma once
#include <cstdint>
#include <vector>

#include "rl/grpo_config.h"
#include "rl/rollout.h"

namespace nemotron::rl {

// The rows' rewards as the advantages (and this filter) see them: grpo.reward_scaling, then
// grpo.reward_shaping.
std::vector<double> trained_rewards(const GrpoSection& g, const std::vector<Rollout>& rows);

// Per prompt group (rows [k G, (k + 1) G), the rollouts' layout): whether its rewards differ
// among the rows that have one (scored, and generated: an over-long prompt's rows have none).
// `rewards` are those the advantages see (after grpo.reward_scaling / reward_shaping).
std::vector<bool> groups_with_reward_spread(const std::vector<Rollout>& rows, const std::vector<double>& rewards,
                                            int64_t generations);

// The step's kept groups, gathered over its generation rounds.
class DynamicSamplingBuffer {
 public:
  // target_rows = num_prompts_per_step * generations (whole groups).
  DynamicSamplingBuffer(int64_t target_rows, int64_t generations, int64_t max_gen_batches);

  // One round's rollouts (every row of the round, whole groups) and their rewards as the
  // advantages see them: keeps the groups with a reward spread. The round's counts (tokens,
  // prompts, times) are added whatever is kept: they are the work the step did.
  void add(const RolloutBatch& round, const std::vector<double>& rewards);

  bool full() const { return static_cast<int64_t>(kept_.rows.size()) >= target_rows_; }
  // Whether the cap allows another round: fewer than dynamic_sampling_max_gen_batches so far.
  bool may_generate() const { return rounds_ < max_gen_batches_; }
  int64_t rounds() const { return rounds_; }  // NeMo RL's dynamic_sampling_num_gen_batches
  int64_t kept_rows() const { return static_cast<int64_t>(kept_.rows.size()); }
  int64_t generated_rows() const { return generated_rows_; }

  // The first target_rows kept rows (whole groups, in the order generated) and the counts of
  // every round. Needs full().
  RolloutBatch take();
  // Kept rows beyond target_rows, cut off by take(): NeMo RL's
  // dynamic_sampling_num_discarded_valid_samples.
  int64_t discarded_valid_rows() const { return full() ? kept_rows() - target_rows_ : 0; }

  // Over every generated row of every round (what the step's reward and accuracy report, as
  // NeMo RL's total_reward is the unfiltered batch's): the mean reward over the scored rows and
  // the share right and finished over the rows with a reward (RolloutBatch's own rules).
  double generated_reward_mean() const { return rewarded_ > 0 ? reward_sum_ / static_cast<double>(rewarded_) : 0; }
  double generated_accuracy() const { return judged_ > 0 ? right_ / static_cast<double>(judged_) : 0; }

 private:
  int64_t target_rows_, generations_, max_gen_batches_;
  int64_t rounds_ = 0, generated_rows_ = 0;
  double reward_sum_ = 0, right_ = 0;
  int64_t rewarded_ = 0, judged_ = 0;
  RolloutBatch kept_;  // the kept rows and every round's counts (no environment results)
};

}  // namespace nemotron::rl
