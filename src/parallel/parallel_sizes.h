// The parallel layout a recipe asks for, in Megatron-Bridge's keys of the `model:` section
// (model.tensor_model_parallel_size, model.context_parallel_size, model.expert_model_parallel_size,
// model.sequence_parallel). Data parallelism is not a key: it is the world size over the others.
// Plain values only; rank_layout.h checks them against a world size and a model.
#pragma once
#include <cstdint>

namespace nemotron::parallel {

struct ParallelSizes {
  int64_t tensor = 1;   // model.tensor_model_parallel_size
  int64_t context = 1;  // model.context_parallel_size
  int64_t expert = 1;   // model.expert_model_parallel_size
  bool sequence_parallel = false;  // model.sequence_parallel (needs tensor > 1)
  bool operator==(const ParallelSizes&) const = default;
};

}  // namespace nemotron::parallel
