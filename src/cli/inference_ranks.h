// Tensor parallelism for the commands that run a model without training it (generate, serve),
// as vLLM's --tensor-parallel-size: the T ranks a launcher started (`mpirun -np T`, `srun`) each
// build their part of the model (heads, KV groups, Mamba heads and groups, widths and the
// vocabulary split T ways: model/tensor_split.h) and run the generation engine in lockstep. Rank 0
// alone talks to the user (prompts, outputs, HTTP) and broadcasts what the engine must do (the
// requests, a server's admissions, cancellations and stop) before the step that does it, so every
// rank's engine holds the same state and every collective meets its partners.
#pragma once
#include <memory>
#include <string>

#include "parallel/communicator.h"
#include "parallel/process_groups.h"
#include "train/inference_model.h"

namespace nemotron::cli {

struct InferenceRanks {
  int tensor_size = 1, rank = 0, local_rank = 0;
  // Set by shard_of() once the checkpoint's model is known (the layout is checked against it).
  std::shared_ptr<const parallel::ProcessGroups> groups;
  // Rank 0's messages to the others, through host memory (MPI's world); null for one process.
  parallel::Communicator* host = nullptr;
  bool leader() const { return rank == 0; }
  bool distributed() const { return tensor_size > 1; }
};

// --tensor-parallel-size against the launch: InputError naming the flag unless it equals the
// number of ranks (data-parallel generation, several engines, is not offered).
InferenceRanks inference_ranks(int tensor_parallel_size);
// The --device value of this rank: "auto" and "cuda" take the GPU of the launcher's local rank;
// "cuda:N" with several ranks is refused (they would share GPU N).
train::ComputeDevice inference_device(const std::string& device, const InferenceRanks& ranks);
// load_inference_model's shard_of: the layout checked against the model (a size that does not
// divide the heads, KV groups, Mamba groups or vocabulary is one line naming --tensor-parallel-size
// and the model's key, before any weight is read), the groups made on `backend`, this rank's part.
train::ShardOf inference_shard_of(InferenceRanks& ranks, Backend& backend, const std::string& source);
// The whole model's parameter count, split parameters counted whole (ParamStore::numel is this
// rank's part): what the start lines print.
int64_t whole_parameter_count(const model::ParamStore& params);

}  // namespace nemotron::cli
