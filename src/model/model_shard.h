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
  // Tensor parallelism (Megatron's column/row-parallel layers): attention heads and KV groups,
  // MLP and expert widths, Mamba heads and groups and the vocabulary split into tensor_size
  // contiguous blocks, this rank holding block tensor_rank of each (model/tensor_split.h). A
  // mixer then returns its part of the output, which the layer stack sums over the tensor group.
  int tensor_rank = 0, tensor_size = 1;
  // Sequence parallelism (model/sequence_split.h): between the split mixers each tensor rank holds
  // only its share of the rows; whole parameters fed by those rows (norms, MTP's projection, a
  // whole mixer) then get gradients that are partial over the tensor group.
  bool sequence_parallel = false;
  bool tensor_parallel() const { return tensor_size > 1; }
  bool sequence_split() const { return tensor_size > 1 && sequence_parallel; }
  bool operator==(const ModelShard&) const = default;
};

}  // namespace nemotron::model
