#include "rl/rollout_exchange.h"

#include "core/error.h"

namespace nemotron::rl {

namespace {

// Per row: prompt length, response length, truncated, mask_sample, unscored, finished, reward.
constexpr size_t kRowFields = 7;

}  // namespace

RolloutBatch share_rollouts(const RolloutBatch& mine, bool contributes, int64_t first_row, int64_t total_rows,
                            parallel::Communicator& world) {
  const size_t n = static_cast<size_t>(total_rows), first = static_cast<size_t>(first_row);
  NM_CHECK(!contributes || first + mine.rows.size() <= n, "rows [{}, +{}) of {}", first, mine.rows.size(), n);
  // Every value travels in a sum where the other members add 0: token ids and log-probs arrive as
  // they left (x + 0 = x in floating point).
  std::vector<double> head(n * kRowFields + 7, 0.0);
  if (contributes) {
    for (size_t i = 0; i < mine.rows.size(); ++i) {
      const Rollout& r = mine.rows[i];
      double* h = &head[(first + i) * kRowFields];
      h[0] = static_cast<double>(r.prompt.size()), h[1] = static_cast<double>(r.response.size());
      h[2] = r.truncated, h[3] = r.mask_sample, h[4] = r.unscored, h[5] = mine.finished[i], h[6] = r.reward;
    }
    double* c = &head[n * kRowFields];
    c[0] = static_cast<double>(mine.overlong_prompts), c[1] = static_cast<double>(mine.scored_rows);
    c[2] = static_cast<double>(mine.unscored), c[3] = static_cast<double>(mine.generated_tokens);
    c[4] = static_cast<double>(mine.prefill_tokens), c[5] = static_cast<double>(mine.shared_prefill_tokens);
    c[6] = static_cast<double>(mine.idle_steps);
  }
  world.all_reduce_host(head);
  std::vector<double> times{mine.prefill_seconds, mine.generation_seconds, mine.engine_setup_seconds,
                            mine.reward_seconds};
  world.all_reduce_host(times, parallel::ReduceOp::max);

  RolloutBatch all;
  all.rows.resize(n);
  all.finished.assign(n, false);
  size_t values = 0;
  for (size_t i = 0; i < n; ++i) {
    const double* h = &head[i * kRowFields];
    Rollout& r = all.rows[i];
    r.prompt.resize(static_cast<size_t>(h[0]));
    r.response.resize(static_cast<size_t>(h[1]));
    r.generation_logprobs.resize(r.response.size());
    r.truncated = h[2] != 0, r.mask_sample = h[3] != 0, r.unscored = h[4] != 0, all.finished[i] = h[5] != 0;
    r.reward = h[6];
    values += r.prompt.size() + 2 * r.response.size();
  }
  std::vector<double> body(values, 0.0);
  if (contributes) {
    size_t at = 0;
    for (size_t i = 0; i < first; ++i) at += all.rows[i].prompt.size() + 2 * all.rows[i].response.size();
    for (const Rollout& r : mine.rows) {
      for (int32_t t : r.prompt) body[at++] = t;
      for (int32_t t : r.response) body[at++] = t;
      for (double lp : r.generation_logprobs) body[at++] = lp;
    }
  }
  world.all_reduce_host(body);
  size_t at = 0;
  for (Rollout& r : all.rows) {
    for (int32_t& t : r.prompt) t = static_cast<int32_t>(body[at++]);
    for (int32_t& t : r.response) t = static_cast<int32_t>(body[at++]);
    for (double& lp : r.generation_logprobs) lp = body[at++];
  }
  const double* c = &head[n * kRowFields];
  all.overlong_prompts = static_cast<int64_t>(c[0]), all.scored_rows = static_cast<int64_t>(c[1]);
  all.unscored = static_cast<int64_t>(c[2]), all.generated_tokens = static_cast<int64_t>(c[3]);
  all.prefill_tokens = static_cast<int64_t>(c[4]), all.shared_prefill_tokens = static_cast<int64_t>(c[5]);
  all.idle_steps = static_cast<int64_t>(c[6]);
  all.prefill_seconds = times[0], all.generation_seconds = times[1], all.engine_setup_seconds = times[2];
  all.reward_seconds = times[3];
  return all;
}

RolloutBatch rollout_rows(const RolloutBatch& all, int64_t begin, int64_t end, bool keep_counts) {
  NM_CHECK(0 <= begin && begin <= end && end <= static_cast<int64_t>(all.rows.size()), "rows [{}, {}) of {}", begin,
           end, all.rows.size());
  RolloutBatch out;
  if (keep_counts) {
    out = all;
    out.rows.clear(), out.finished.clear(), out.results.clear();
  } else {
    out.prefill_seconds = all.prefill_seconds, out.generation_seconds = all.generation_seconds;
    out.engine_setup_seconds = all.engine_setup_seconds, out.reward_seconds = all.reward_seconds;
  }
  out.rows.assign(all.rows.begin() + begin, all.rows.begin() + end);
  out.finished.assign(all.finished.begin() + begin, all.finished.begin() + end);
  return out;
}

}  // namespace nemotron::rl
