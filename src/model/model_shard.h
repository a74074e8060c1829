// Which part of the model this rank builds: all model code knows of the parallel layout at
// construction (issue 22). The forward passes reach their groups through the Context
// (parallel::groups_of); the sizes here must match those groups. A single process, and every
// layout whose sizes are 1, builds the whole model: today's code path, not a second one.
#pragma once
#include <cstdint>

namespace nemotron::model {

struct ModelShard {
  // Expert parallelism: the routed experts split into expert_size contiguous blocks; this rank
  // builds block expert_rank (experts [expert_rank * E / expert_size, ...)) and registers only
  // those, under their global Hub names.
  int expert_rank = 0, expert_size = 1;
  bool operator==(const ModelShard&) const = default;
};

}  // namespace nemotron::model
