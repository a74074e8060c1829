// GrpoTrainer's rollout rounds: one round's rollouts on this rank's engine (or the generator's
// layout, or a gathered whole copy under full parameter sharding), and a step's rounds under
// DAPO's dynamic sampling (rl/grpo_dynamic_sampling.h) until enough groups with a reward spread.
#include <fmt/format.h>

#include <memory>

#include "core/error.h"
#include "rl/grpo_dynamic_sampling.h"
#include "rl/grpo_trainer.h"
#include "rl/rollout_exchange.h"

namespace nemotron::rl {

RolloutBatch GrpoTrainer::generate_round(GrpoStepRecord& r, int64_t round,
                                         const std::vector<const RlPrompt*>& all_prompts) {
  const GrpoConfig& g = cfg_.grpo;
  // Every rank draws the round's prompts (one cursor) and generates its own share of them.
  const int64_t D = groups_->data->size(), rank = groups_->data->rank();
  const int64_t per_rank = static_cast<int64_t>(all_prompts.size()) / D;
  const std::vector<const RlPrompt*> prompts(all_prompts.begin() + rank * per_rank,
                                             all_prompts.begin() + (rank + 1) * per_rank);

  RolloutOptions ro;
  ro.generations = g.grpo.num_generations_per_prompt;
  ro.sampling.temperature = g.policy.generation.temperature;
  ro.sampling.top_p = g.policy.generation.top_p;
  ro.sampling.top_k = g.policy.generation.top_k.value_or(0);
  ro.sampling.max_new_tokens = g.policy.generation.max_new_tokens;
  ro.sampling.stop = g.policy.generation.stop_strings;
  ro.sampling.seed = g.grpo.seed;
  ro.max_total_sequence_length = g.policy.max_total_sequence_length;
  ro.max_slots = std::min<int64_t>(static_cast<int64_t>(all_prompts.size()) * ro.generations, 64);
  // Row i of the step keeps its sampling stream on whichever rank generates it: a data-parallel
  // run draws the single process's rollouts. Dynamic sampling's later rounds continue the step's
  // row count (round 0 is the step's only round without it).
  ro.first_request_id = static_cast<uint64_t>(r.step) * kIdsPerStep +
                        static_cast<uint64_t>((round * static_cast<int64_t>(all_prompts.size()) + rank * per_rank) *
                                              ro.generations);
  ro.progress_label = opts_.progress ? "rollouts" : nullptr;
  ro.groups = step_runner_.context().groups;
  ro.prefix_sharing = g.policy.generation.prefix_sharing;
  if (opts_.generator_groups) return rollouts_on_generator(r, all_prompts, ro);
  const RolloutBatch rb = [&] {
    if (!step_runner_.param_gather()) return collect_rollouts(net_, tok_, *cfg_.environment, prompts, ro);
    // Full parameter sharding: the refit is the gather of the engine's whole copy, freed after the
    // rollouts (between steps the device holds the trainer's slices only).
    double seconds = 0;
    int64_t bytes = 0;
    const std::unique_ptr<model::HybridModel> whole = gathered_policy(&seconds, &bytes);
    r.refit_seconds += seconds, r.refit_bytes += bytes;
    return collect_rollouts(*whole, tok_, *cfg_.environment, prompts, ro);
  }();
  r.unscored_reasons = note_unscored(fmt::format("step {}", r.step), r.step, rb, true);  // throws past the bound
  return rb;
}

RolloutBatch GrpoTrainer::dynamically_sampled_rollouts(GrpoStepRecord& r) {
  const GrpoConfig& g = cfg_.grpo;
  const int64_t G = g.grpo.num_generations_per_prompt, n = g.round_prompts();
  const int64_t D = groups_->data->size(), j = groups_->data->rank();
  DynamicSamplingBuffer kept(g.rollout_rows(), G, g.grpo.dynamic_sampling_max_gen_batches);
  while (!kept.full()) {
    if (!kept.may_generate())  // NeMo RL raises here too: training on a short batch would change its size
      throw Error(fmt::format(
          "step {}: grpo.dynamic_sampling_max_gen_batches: {} generation round(s) of {} prompts x {} gave {} of the "
          "{} rows (grpo.num_prompts_per_step {} groups) whose rewards differ; every other group's rewards were all "
          "equal. Raise grpo.dynamic_sampling_max_gen_batches or grpo.batch_multiplier, or make the prompts' "
          "outcomes more varied (more generations, another temperature)",
          r.step, kept.rounds(), n, G, kept.kept_rows(), g.rollout_rows(), g.grpo.num_prompts_per_step));
    const RolloutBatch mine = generate_round(r, kept.rounds(), next_prompts(n));
    // The filter sees every rank's groups, so each rank keeps what the single process keeps.
    const RolloutBatch round =
        D > 1 ? share_rollouts(mine, true, j * (n / D) * G, n * G, *groups_->data) : mine;
    kept.add(round, trained_rewards(g.grpo, round.rows));
  }
  r.dynamic_sampling_num_gen_batches = kept.rounds();
  r.dynamic_sampling_num_discarded_valid_samples = kept.discarded_valid_rows();
  r.generated_reward_mean = kept.generated_reward_mean();
  r.generated_accuracy = kept.generated_accuracy();
  const RolloutBatch all = kept.take();
  if (D == 1) return all;
  // This data rank's share (whole groups); the counts stay with data rank 0, so their sum over
  // the data group is the step's.
  const int64_t rows = g.rollout_rows();
  return rollout_rows(all, j * rows / D, (j + 1) * rows / D, j == 0);
}

}  // namespace nemotron::rl
