// The trainer's side of context parallelism (model/context_split.h): each context rank trains on
// its two chunks of every row of the micro-batches its data rank reads, so the batch is cut
// before the model sees it. Labels and loss masks are cut the same way (a token's label stays
// with it), packed-sequence ids too, and the positions become explicit global positions (RoPE).
#pragma once
#include "model/hybrid_model.h"

namespace nemotron::train {

// Rows [B, T] -> this rank's chunks [B, 2T / (2 size)] (chunks rank and 2 size - 1 - rank),
// marked context_split, with the `lookahead` tokens after each chunk in batch.ahead (multi-token
// prediction's targets; at most a chunk); size 1 returns the batch as it is. T must be a multiple
// of 2 size.
model::Batch context_shard(const model::Batch& batch, int rank, int size, int64_t lookahead = 0);

}  // namespace nemotron::train
