// The refit of a generator split otherwise than its trainer (issue 23 §4: NeMo RL's vLLM may use
// another tensor-parallel size than the Megatron policy): each parameter's whole tensor is put
// together from the trainer's parts by an all-gather over the trainer's tensor group, then this
// rank's part at the generator's layout is cut from it, all on the parameters' device (NCCL and
// device copies on a GPU, no trip through the host). Parts are placed by the shards' global
// offsets (model/param.h), so every split tensor_split.h makes (column, row, row blocks) moves.
// Routed experts split over an expert group (model_shard.h) move too: when the generator holds
// other experts than the trainer's rank, each expert block is first all-gathered over the
// trainer's expert group, then handled as any other parameter.
#pragma once
#include "core/context.h"
#include "model/param.h"
#include "parallel/communicator.h"

namespace nemotron::model {

// Where the parts of the source of a reshard lie.
struct ReshardSource {
  const ParamStore& params;       // this rank's parts
  parallel::Communicator& tensor;  // its tensor-split parts are spread over this group
  // Its routed experts are spread over this group (member r holding expert block r, as
  // model_shard.h builds them) and the target holds other experts than this rank: null (or a
  // group of one) when every rank's target holds the experts its source holds, or all of them.
  parallel::Communicator* expert = nullptr;
  int64_t routed_experts = 0;  // per MoE layer: names the experts of the other members (with `expert`)
};

// to's values = the same model's values in `from`, resharded: `from` holds this rank's parts at
// one layout (every member of its groups calls this, in the same order); `to` this rank's parts
// at another (or the same) layout of the same parameters, in the same dtypes; every parameter of
// `to` is filled (source parameters `to` does not hold are gathered for the other members only).
// Masters and gradients are not touched. Returns the bytes gathered over the groups.
int64_t reshard_values(Context& ctx, const ReshardSource& from, ParamStore& to);

}  // namespace nemotron::model
