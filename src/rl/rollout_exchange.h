// A step's rollouts moved from the ranks that generated them to the ranks that train on them, for
// a generator laid out otherwise than the trainer (policy.generation.vllm_cfg.tensor_parallel_size:
// its data ranks hold other prompts than the trainer's). Rows are small host data (tokens,
// log-probs, rewards), so they travel as host values; the weights never do (model/weight_reshard.h).
#pragma once
#include <cstdint>

#include "parallel/communicator.h"
#include "rl/rollout.h"

namespace nemotron::rl {

// Every row of the step on every member of `world` (a collective: every member calls it). The
// members with `contributes` hand in `mine`, rows [first_row, first_row + mine.rows.size()) of
// the step's `total_rows`; together they cover each row once (one member of each generator
// tensor group, whose members hold the same rows). The counts (tokens, prompts, scored rows) are
// summed over the contributors, the times the slowest contributor's. `results` (the environment's
// answers) stay with the rows' generator: the result has none.
RolloutBatch share_rollouts(const RolloutBatch& mine, bool contributes, int64_t first_row, int64_t total_rows,
                            parallel::Communicator& world);

// Rows [begin, end) of `all` with its `finished` flags; the counts of `all` only when
// `keep_counts` (so that a sum over the trainer's data ranks counts each once), else zero.
RolloutBatch rollout_rows(const RolloutBatch& all, int64_t begin, int64_t end, bool keep_counts);

}  // namespace nemotron::rl
