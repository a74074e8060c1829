#include "cli/inference_ranks.h"

#include <fmt/format.h>

#include "cli/distributed.h"
#include "core/error.h"
#include "engine/request_codec.h"
#include "model/shard_sizes.h"
#include "parallel/mpi_communicator.h"

namespace nemotron::cli {

InferenceRanks inference_ranks(int tensor_parallel_size, int expert_parallel_size) {
  const LaunchInfo& l = launch_info();
  if (tensor_parallel_size < 1)
    throw InputError(fmt::format("--tensor-parallel-size: expected a positive integer, got {}", tensor_parallel_size));
  if (expert_parallel_size < 1)
    throw InputError(fmt::format("--expert-parallel-size: expected a positive integer, got {}", expert_parallel_size));
  const int world = tensor_parallel_size * expert_parallel_size;
  if (expert_parallel_size > 1 && world != l.size)
    throw InputError(fmt::format(
        "--tensor-parallel-size {} x --expert-parallel-size {} = {} ranks: the model is split over every rank of "
        "the launch, and this one has {} (start it with `mpirun -np {}` or `srun --ntasks {}`)",
        tensor_parallel_size, expert_parallel_size, world, l.size, world, world));
  if (tensor_parallel_size != l.size && expert_parallel_size == 1)
    throw InputError(fmt::format(
        "--tensor-parallel-size {}: the model is split over every rank of the launch, and this one has {} (start "
        "it with `mpirun -np {}` or `srun --ntasks {}`, or pass --tensor-parallel-size {})",
        tensor_parallel_size, l.size, tensor_parallel_size, tensor_parallel_size, l.size));
  InferenceRanks r;
  r.tensor_size = tensor_parallel_size;
  r.expert_size = expert_parallel_size;
  r.rank = l.rank;
  r.local_rank = l.local_rank;
  if (l.size > 1) {
    // The launcher's world object is not const; world_communicator() only hands it out read-only.
    r.host = const_cast<parallel::MpiCommunicator*>(world_communicator());
  }
  return r;
}

train::ComputeDevice inference_device(const std::string& device, const InferenceRanks& ranks) {
  if (ranks.distributed() && device.rfind("cuda:", 0) == 0)
    throw InputError(fmt::format("--device {} pins all {} ranks to one GPU; use --device cuda (rank i of a node "
                                 "takes GPU i)",
                                 device, ranks.tensor_size * ranks.expert_size));
  return train::open_inference_device(device, "--device", ranks.local_rank);
}

train::ShardOf inference_shard_of(InferenceRanks& ranks, Backend& backend, const std::string& source) {
  return [&ranks, &backend, source](const model::ModelConfig& cfg) {
    parallel::ParallelSizes sizes;
    sizes.tensor = ranks.tensor_size;
    sizes.expert = ranks.expert_size;
    parallel::RankLayout layout;
    try {
      layout = parallel::RankLayout(sizes, ranks.tensor_size * ranks.expert_size, model::layout_facts(cfg), source);
    } catch (const InputError& e) {
      throw InputError(ranks.expert_size > 1 ? fmt::format("--tensor-parallel-size {} x --expert-parallel-size {}: {}",
                                                           ranks.tensor_size, ranks.expert_size, e.what())
                                             : fmt::format("--tensor-parallel-size {}: {}", ranks.tensor_size, e.what()));
    }
    ranks.groups = make_process_groups(layout, &backend);
    return model_shard(*ranks.groups);
  };
}

std::vector<engine::Result> gather_results(const InferenceRanks& ranks, std::vector<engine::Result> mine, size_t total) {
  const int E = ranks.expert_size;
  std::vector<engine::Result> out(ranks.leader() ? total : 0);
  if (ranks.leader())
    for (size_t k = 0; k < mine.size(); ++k) out[k * static_cast<size_t>(E)] = std::move(mine[k]);
  for (int d = 1; d < E; ++d) {
    const int root = d * ranks.tensor_size;  // the first rank of data rank d's tensor group
    std::string message;
    if (ranks.rank == root) {
      nlohmann::json j = nlohmann::json::array();
      for (const engine::Result& r : mine) j.push_back(engine::result_to_json(r));
      message = j.dump();
    }
    parallel::broadcast_text(*ranks.host, message, root);
    if (!ranks.leader()) continue;
    const nlohmann::json j = nlohmann::json::parse(message);
    for (size_t k = 0; k < j.size(); ++k) {
      const size_t i = static_cast<size_t>(d) + k * static_cast<size_t>(E);
      NM_CHECK(i < total, "data rank {} returned result {} of {}", d, i, total);
      out[i] = engine::result_from_json(j[k]);
    }
  }
  return ranks.leader() ? out : mine;
}

engine::EngineStats summed_stats(const InferenceRanks& ranks, const engine::EngineStats& mine) {
  const double lead = ranks.tensor_leader() ? 1.0 : 0.0;  // one engine per data rank counts
  std::vector<double> sums{lead * static_cast<double>(mine.requests), lead * static_cast<double>(mine.prefill_tokens),
                           lead * static_cast<double>(mine.decode_tokens),
                           lead * static_cast<double>(mine.shared_prefill_tokens)};
  ranks.host->all_reduce_host(sums);
  std::vector<double> maxes{static_cast<double>(mine.steps), static_cast<double>(mine.peak_running), mine.seconds};
  ranks.host->all_reduce_host(maxes, parallel::ReduceOp::max);
  engine::EngineStats s = mine;
  s.requests = static_cast<int64_t>(sums[0]), s.prefill_tokens = static_cast<int64_t>(sums[1]);
  s.decode_tokens = static_cast<int64_t>(sums[2]), s.shared_prefill_tokens = static_cast<int64_t>(sums[3]);
  s.steps = static_cast<int64_t>(maxes[0]), s.peak_running = static_cast<int64_t>(maxes[1]), s.seconds = maxes[2];
  return s;
}

int64_t whole_parameter_count(const model::ParamStore& params, int expert_size) {
  int64_t n = 0;
  for (const model::Param* p : params.all())
    n += p->global_shape().numel() * (p->is_expert() ? expert_size : 1);  // expert ranks hold equal shares
  return n;
}

}  // namespace nemotron::cli
