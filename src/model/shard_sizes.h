// What a parallel layout splits of a model, from its config alone (nothing is allocated, so the
// real Nemotron 3 Super can be planned on a laptop):
//  - the sizes tensor parallelism must divide and the routed experts expert parallelism must
//    divide (the facts parallel::RankLayout validates a layout against);
//  - the parameters one rank registers under a ModelShard, counted the way the mixers'
//    constructors register them (model/tensor_split.h): a column- or row-split tensor holds 1/TP
//    of its elements, a whole one (norms, the MoE router and correction bias, latent projections,
//    row-split biases, DeciLM's linear replacements, MTP's eh_proj) all of them, and the routed
//    experts E/EP. shard_sizes_test.cpp checks the count against a built model's ParamStore.
#pragma once
#include <cstdint>

#include "model/model_config.h"
#include "model/model_shard.h"
#include "parallel/rank_layout.h"

namespace nemotron::model {

// The routed experts of a model with MoE layers (trunk or MTP), else 0.
int64_t routed_experts(const ModelConfig& cfg);
// The sizes tensor parallelism splits, by the key that sets each (layers of this model only).
parallel::LayoutModelFacts layout_facts(const ModelConfig& cfg);

struct ShardParams {
  int64_t total = 0;           // elements in the rank's ParamStore
  int64_t frozen = 0;          // of total: buffers that never train (the MoE correction bias)
  int64_t routed_experts = 0;  // of total: the rank's routed experts (their own optimizer state under EP)
  int64_t whole = 0;           // of total: held whole by every tensor rank
  int64_t trainable() const { return total - frozen; }
};

// The parameters rank `shard` registers (a layout that model::layout_facts accepts).
ShardParams shard_params(const ModelConfig& cfg, const ModelShard& shard);

}  // namespace nemotron::model
