#include "rl/grpo_dynamic_sampling.h"

#include "core/error.h"
#include "rl/grpo_advantages.h"

namespace nemotron::rl {

std::vector<double> trained_rewards(const GrpoSection& g, const std::vector<Rollout>& rows) {
  std::vector<double> rewards;
  std::vector<int64_t> lengths;
  std::vector<bool> truncated;
  for (const Rollout& x : rows) {
    rewards.push_back(x.reward);
    lengths.push_back(static_cast<int64_t>(x.response.size()));
    truncated.push_back(x.truncated);
  }
  if (g.reward_scaling.enabled) scale_rewards(g.reward_scaling, rewards);
  if (g.reward_shaping.enabled) shape_rewards(g.reward_shaping, rewards, lengths, truncated);
  return rewards;
}

namespace {

// As RolloutBatch::accuracy() counts a row: generated (not an over-long prompt) and scored.
bool has_reward(const Rollout& r) { return !r.unscored && !(r.response.empty() && r.mask_sample); }

}  // namespace

std::vector<bool> groups_with_reward_spread(const std::vector<Rollout>& rows, const std::vector<double>& rewards,
                                            int64_t generations) {
  NM_CHECK(generations > 0 && rows.size() == rewards.size() && rows.size() % static_cast<size_t>(generations) == 0,
           "{} rows, {} rewards in groups of {}", rows.size(), rewards.size(), generations);
  const size_t G = static_cast<size_t>(generations);
  std::vector<bool> spread(rows.size() / G, false);
  for (size_t k = 0; k < spread.size(); ++k) {
    bool seen = false;
    double first = 0;
    for (size_t i = k * G; i < (k + 1) * G && !spread[k]; ++i) {
      if (!has_reward(rows[i])) continue;
      if (!seen) seen = true, first = rewards[i];
      else if (rewards[i] != first) spread[k] = true;  // NeMo RL's std != 0: any two differ
    }
  }
  return spread;
}

DynamicSamplingBuffer::DynamicSamplingBuffer(int64_t target_rows, int64_t generations, int64_t max_gen_batches)
    : target_rows_(target_rows), generations_(generations), max_gen_batches_(max_gen_batches) {
  NM_CHECK(generations > 0 && target_rows > 0 && target_rows % generations == 0 && max_gen_batches > 0,
           "dynamic sampling of {} rows in groups of {}, {} rounds", target_rows, generations, max_gen_batches);
}

void DynamicSamplingBuffer::add(const RolloutBatch& round, const std::vector<double>& rewards) {
  NM_CHECK(round.finished.size() == round.rows.size(), "{} rows, {} finished flags", round.rows.size(),
           round.finished.size());
  ++rounds_;
  generated_rows_ += static_cast<int64_t>(round.rows.size());
  for (size_t i = 0; i < round.rows.size(); ++i) {
    const Rollout& r = round.rows[i];
    if (!r.unscored) reward_sum_ += r.reward, ++rewarded_;
    if (has_reward(r)) right_ += r.reward >= 1.0 && round.finished[i] ? 1.0 : 0.0, ++judged_;
  }
  const std::vector<bool> spread = groups_with_reward_spread(round.rows, rewards, generations_);
  const size_t G = static_cast<size_t>(generations_);
  for (size_t k = 0; k < spread.size(); ++k) {
    if (!spread[k]) continue;
    kept_.rows.insert(kept_.rows.end(), round.rows.begin() + k * G, round.rows.begin() + (k + 1) * G);
    kept_.finished.insert(kept_.finished.end(), round.finished.begin() + k * G, round.finished.begin() + (k + 1) * G);
  }
  kept_.overlong_prompts += round.overlong_prompts;
  kept_.scored_rows += round.scored_rows;
  kept_.unscored += round.unscored;
  kept_.generated_tokens += round.generated_tokens;
  kept_.prefill_tokens += round.prefill_tokens;
  kept_.shared_prefill_tokens += round.shared_prefill_tokens;
  kept_.idle_steps += round.idle_steps;
  kept_.prefill_seconds += round.prefill_seconds;
  kept_.generation_seconds += round.generation_seconds;
  kept_.engine_setup_seconds += round.engine_setup_seconds;
  kept_.reward_seconds += round.reward_seconds;
}

RolloutBatch DynamicSamplingBuffer::take() {
  NM_CHECK(full(), "dynamic sampling: {} of {} rows kept", kept_rows(), target_rows_);
  RolloutBatch out = kept_;
  out.rows.resize(static_cast<size_t>(target_rows_));
  out.finished.resize(static_cast<size_t>(target_rows_));
  return out;
}

}  // namespace nemotron::rl
