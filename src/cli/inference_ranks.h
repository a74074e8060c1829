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

#include "engine/engine.h"
#include "parallel/communicator.h"
#include "parallel/process_groups.h"
#include "train/inference_model.h"

namespace nemotron::cli {

// Expert parallelism (generate's and serve's --expert-parallel-size E, vLLM's
// --enable-expert-parallel over its data-parallel ranks): the launch holds E tensor groups, the
// data ranks, each running its own share of the requests with its own engine; the routed experts
// are split over them (Megatron's layout: an expert group is E data ranks of one tensor
// coordinate) and the tokens cross by all-to-all, every engine stepping in lockstep with its
// expert group (idle steps when it has no work left: StepModel::group_has_work). Rank 0 gathers
// the results (a server: each step's tokens, serve/step_report.h).
struct InferenceRanks {
  int tensor_size = 1, expert_size = 1, rank = 0, local_rank = 0;
  // Set by shard_of() once the checkpoint's model is known (the layout is checked against it).
  std::shared_ptr<const parallel::ProcessGroups> groups;
  // Rank 0's messages to the others, through host memory (MPI's world); null for one process.
  parallel::Communicator* host = nullptr;
  bool leader() const { return rank == 0; }
  bool distributed() const { return tensor_size * expert_size > 1; }
  // This rank's data coordinate (its share of the requests) and whether it leads its tensor group.
  int data_rank() const { return rank / tensor_size; }
  bool tensor_leader() const { return rank % tensor_size == 0; }
};

// --tensor-parallel-size (x --expert-parallel-size) against the launch: InputError naming the
// flag(s) unless it equals the number of ranks (data-parallel generation without experts to
// split, several independent engines, is not offered).
InferenceRanks inference_ranks(int tensor_parallel_size, int expert_parallel_size = 1);
// The --device value of this rank: "auto" and "cuda" take the GPU of the launcher's local rank;
// "cuda:N" with several ranks is refused (they would share GPU N).
train::ComputeDevice inference_device(const std::string& device, const InferenceRanks& ranks);
// load_inference_model's shard_of: the layout checked against the model (a size that does not
// divide the heads, KV groups, Mamba groups, vocabulary or routed experts is one line naming the
// flag and the model's key, before any weight is read), the groups made on `backend`, this rank's part.
train::ShardOf inference_shard_of(InferenceRanks& ranks, Backend& backend, const std::string& source);
// Under expert parallelism (a collective of every rank): rank 0 gets every data rank's results in
// request order (request i ran on data rank i % E; `total` requests, known on rank 0), the others
// their own back; and the engines' counts summed over the data ranks, their times the slowest's.
std::vector<engine::Result> gather_results(const InferenceRanks& ranks, std::vector<engine::Result> mine, size_t total);
engine::EngineStats summed_stats(const InferenceRanks& ranks, const engine::EngineStats& mine);
// The whole model's parameter count, split parameters counted whole and a rank's routed experts
// once per expert rank (ParamStore::numel is this rank's part): what the start lines print.
int64_t whole_parameter_count(const model::ParamStore& params, int expert_size = 1);

}  // namespace nemotron::cli
