#include "cli/inference_ranks.h"

#include <fmt/format.h>

#include "cli/distributed.h"
#include "core/error.h"
#include "model/shard_sizes.h"
#include "parallel/mpi_communicator.h"

namespace nemotron::cli {

InferenceRanks inference_ranks(int tensor_parallel_size) {
  const LaunchInfo& l = launch_info();
  if (tensor_parallel_size < 1)
    throw InputError(fmt::format("--tensor-parallel-size: expected a positive integer, got {}", tensor_parallel_size));
  if (tensor_parallel_size != l.size)
    throw InputError(fmt::format(
        "--tensor-parallel-size {}: the model is split over every rank of the launch, and this one has {} (start "
        "it with `mpirun -np {}` or `srun --ntasks {}`, or pass --tensor-parallel-size {})",
        tensor_parallel_size, l.size, tensor_parallel_size, tensor_parallel_size, l.size));
  InferenceRanks r;
  r.tensor_size = tensor_parallel_size;
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
                                 device, ranks.tensor_size));
  return train::open_inference_device(device, "--device", ranks.local_rank);
}

train::ShardOf inference_shard_of(InferenceRanks& ranks, Backend& backend, const std::string& source) {
  return [&ranks, &backend, source](const model::ModelConfig& cfg) {
    parallel::ParallelSizes sizes;
    sizes.tensor = ranks.tensor_size;
    parallel::RankLayout layout;
    try {
      layout = parallel::RankLayout(sizes, ranks.tensor_size, model::layout_facts(cfg), source);
    } catch (const InputError& e) {
      throw InputError(fmt::format("--tensor-parallel-size {}: {}", ranks.tensor_size, e.what()));
    }
    ranks.groups = make_process_groups(layout, &backend);
    return model_shard(*ranks.groups);
  };
}

int64_t whole_parameter_count(const model::ParamStore& params) {
  int64_t n = 0;
  for (const model::Param* p : params.all()) n += p->global_shape().numel();
  return n;
}

}  // namespace nemotron::cli
