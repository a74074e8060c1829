// The refit of a generator split otherwise than its trainer (issue 23 §4: NeMo RL's vLLM may use
// another tensor-parallel size than the Megatron policy): each parameter's whole tensor is put
// together from the trainer's parts by an all-gather over the trainer's tensor group, then this
// rank's part at the generator's layout is cut from it, all on the parameters' device (NCCL and
// device copies on a GPU, no trip through the host). Parts are placed by the shards' global
// offsets (model/param.h), so every split tensor_split.h makes (column, row, row blocks) moves.
#pragma once
#include "core/context.h"
#include "model/param.h"
#include "parallel/communicator.h"

namespace nemotron::model {

// to's values = the same model's values in `from`, resharded: `from` holds this rank's parts at
// one tensor-parallel layout, split over `from_tensor` (every member calls this, in the same
// order); `to` this rank's parts at another (or the same) layout of the same parameters, in the
// same dtypes. Masters and gradients are not touched. Returns the bytes gathered over the group.
int64_t reshard_values(Context& ctx, const ParamStore& from, parallel::Communicator& from_tensor, ParamStore& to);

}  // namespace nemotron::model
