// The process's place in a multi-process run, as the launcher set it up: `mpirun -np N nemotron
// ...` (Open MPI) or `srun --mpi=pmix nemotron ...` inside a Slurm allocation. MPI is initialised
// only when a launcher started this process (its environment says so); a plain `nemotron ...`
// is one rank of one and never touches MPI.
// Ranks other than 0 keep their standard output quiet (the log is rank 0's, as Megatron's
// print_rank_0) unless NEMOTRON_LOG_ALL_RANKS=1; errors go to standard error on every rank.
#pragma once
#include <memory>
#include <string>

#include "core/backend.h"
#include "model/model_config.h"
#include "model/model_shard.h"
#include "parallel/process_groups.h"

namespace nemotron::parallel {
class MpiCommunicator;
}

namespace nemotron::cli {

struct LaunchInfo {
  int rank = 0, size = 1, local_rank = 0;
  std::string launcher;  // "mpirun", "srun" or "" (a single process)
  bool log_all_ranks = false;  // NEMOTRON_LOG_ALL_RANKS=1: every rank prints (logs and input errors)
};

// Reads the launcher's environment; initialises MPI on first call when launched. Never throws
// for a single process.
const LaunchInfo& launch_info();
// MPI_COMM_WORLD as a communicator (null for a single process).
const parallel::MpiCommunicator* world_communicator();

// `device` of a rank: "cuda" under a launcher is "cuda:<local rank>"; an explicit "cuda:N" with
// more than one rank is refused (every rank would share GPU N), naming `source` and the key.
std::string rank_device(const std::string& device, const std::string& source);

// The run's layout from the model section's parallel keys and the launcher's world, validated:
// one line naming the key, before anything starts. `world` > 0 plans for that many ranks instead
// (a --dry-run of `--run`/`--batch`, cli/launch.h).
parallel::RankLayout run_layout(const model::ModelConfig& model, const std::string& source, int world = 0);
// The part of the model this rank builds.
model::ModelShard model_shard(const parallel::ProcessGroups& groups);
// InputError naming model.sequence_parallel when it is on and the tensor-parallel size does not
// divide the sequence length (Megatron's rule: each rank holds seq_length / TP of every row).
void check_sequence_split(const parallel::RankLayout& layout, int64_t seq_length, const std::string& source);
// InputError naming model.context_parallel_size (model/context_split.h) when C > 1 and it cannot
// run: 2C must divide the sequence length (each rank holds 2 of 2C equal chunks of every row), a
// chunk must hold the conv1d's window of a Mamba model and the MTP depths' look-ahead.
void check_context_split(const parallel::RankLayout& layout, const model::ModelConfig& model, int64_t seq_length,
                         const std::string& source);
// Its rank table for a dry run: "DP 2 x EP 1 x TP 1 x CP 1 over 2 ranks" and one line per rank
// (with its node and GPU when `ranks_per_node` > 0); a world of more than kFullRankTable ranks
// shows its first ranks, the rule for the others and its last rank.
constexpr int kFullRankTable = 32;
std::string layout_text(const parallel::RankLayout& layout, const model::ModelConfig& model,
                        int64_t ranks_per_node = 0);
// Its groups over the world (NCCL on `backend` when it is a GPU; MPI on the host otherwise).
std::shared_ptr<const parallel::ProcessGroups> make_process_groups(const parallel::RankLayout& layout,
                                                                   Backend* backend);

// Errors in a multi-rank run: print (rank 0 always; other ranks unless the error is an
// InputError, which every rank of one command hits alike) and end every rank with `code`.
[[noreturn]] void abort_ranks(int code);

}  // namespace nemotron::cli
