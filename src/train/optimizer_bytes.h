// What an optimizer's float32 masters hold in memory on this rank, for the lines that print it
// (GRPO's GPU memory line): under the distributed optimizer the masters live in its shard, not in
// the parameters, so counting the parameters' own alone reads 0 there.
#pragma once
#include <cstdint>

#include "model/param.h"
#include "train/adamw.h"

namespace nemotron::train {

// Bytes of float32 masters this rank holds: the parameters' own (all of them unsharded; outside
// the shard, e.g. expert-parallel experts, sharded) and its pieces of the optimizer's master shard.
int64_t held_master_bytes(const model::ParamStore& params, const AdamW& opt);

}  // namespace nemotron::train
