// Sharded training checkpoints: a run of several processes saves each tensor once, from the rank
// that owns it, into that rank's own file (io/tensor_pieces.h: a piece carries its global shape,
// its box and, for a distributed optimizer's state, its flat range), and the iteration is committed
// by the first rank only after every rank reported its file durable. Nothing is gathered to write.
//   <save>/iter_0000100/rank_00000.safetensors ... rank_0000N.safetensors  (world size N + 1)
//                       config.yaml, tokenizer/, train_state.json (format_version 2, "sharded":
//                       {"world_size", "rank_files"}, every file's size and content hash)
// Who writes what (the rest of the rank's replicas write nothing of it):
//   a parameter's value: the first rank of its replica group (data or expert-data group, context
//     rank 0), whole box; with a distributed optimizer that shards float32 masters, each rank its
//     own piece of the master (the truth), as a flat range;
//   Adam moments: sharded -> each rank its pieces; not sharded -> as the value.
// One process keeps the single-file format (model.safetensors by Hub name, optimizer.safetensors,
// train/checkpoint.h): the files other tools read directly. Readers take both, at any layout:
// a rank reads the boxes of its parameters and the ranges of its optimizer pieces.
#pragma once
#include <string>
#include <vector>

#include "io/tensor_pieces.h"
#include "model/weights_io.h"
#include "parallel/process_groups.h"
#include "train/checkpoint.h"

namespace nemotron::train {

// The pieces this rank writes of `c` under groups `g` (views of the live tensors; any device).
std::vector<io::TensorPiece> rank_pieces(const CheckpointContent& c, const parallel::ProcessGroups& g);

// Collective over g.world: every rank writes its rank file into the iteration's temporary
// directory and fsyncs it; the first rank then commits as save_checkpoint does (config,
// tokenizer, train_state.json last, rename, tracker, prune). `hook` sees "rank_file" on every
// rank before it writes, then the commit's stages on the first. A rank that fails makes every
// rank throw, with nothing committed (the tracker keeps naming the previous iteration). Returns
// the iteration directory on every rank.
std::string save_sharded_checkpoint(const std::string& save_dir, const CheckpointContent& c,
                                    const parallel::ProcessGroups& g, int64_t most_recent_k = -1,
                                    const SaveStageHook& hook = {});

// Fills the truth of every parameter of `params` that `only` accepts (all when empty) from the
// pieces of a sharded iteration: each parameter's own box (global shape and offset). Missing
// elements, another global shape or a non-finite value are an InputError naming the tensor.
// Strict: a tensor of the checkpoint that no parameter takes is an error, except a routed
// expert's (replicas expert_data) when the store holds routed experts (another rank's, under
// expert parallelism). `sink` (null: the whole truth) says which elements of each parameter
// are read and where they go (model/weights_io.h).
void load_sharded_weights(const io::PieceSet& pieces, model::ParamStore& params, const std::string& source,
                          const model::ParamFilter& only = {}, const model::WeightSink* sink = nullptr);
// Fills the moments `opt` holds (AdamW::state_range of each parameter) from a sharded iteration.
void load_sharded_optimizer(const io::PieceSet& pieces, AdamW& opt, const model::ParamStore& params,
                            const std::string& source);

}  // namespace nemotron::train
