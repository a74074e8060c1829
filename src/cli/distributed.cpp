#include "cli/distributed.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "core/config_tree.h"
#include "core/error.h"
#include "model/shard_sizes.h"
#include "parallel/mpi_communicator.h"
#include "parallel/rank_layout.h"

namespace nemotron::cli {

namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

struct Launch {
  LaunchInfo info;
  std::unique_ptr<parallel::MpiRuntime> mpi;
  std::unique_ptr<parallel::MpiCommunicator> world;

  Launch() {
    // Open MPI's mpirun sets OMPI_COMM_WORLD_*; srun --mpi=pmix sets PMIX_RANK and SLURM_*.
    if (std::getenv("OMPI_COMM_WORLD_SIZE")) {
      info.launcher = "mpirun";
      info.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0);
    } else if (std::getenv("PMIX_RANK")) {
      info.launcher = std::getenv("SLURM_PROCID") ? "srun" : "pmix";
      info.local_rank = env_int("SLURM_LOCALID", env_int("PMIX_LOCAL_RANK", 0));
    } else {
      return;
    }
    mpi = std::make_unique<parallel::MpiRuntime>();
    info.rank = mpi->world_rank();
    info.size = mpi->world_size();
    if (info.size > 1) world = std::make_unique<parallel::MpiCommunicator>(MPI_COMM_WORLD);
    const char* all = std::getenv("NEMOTRON_LOG_ALL_RANKS");
    info.log_all_ranks = all && std::string(all) == "1";
    if (info.rank != 0 && !info.log_all_ranks) {
      std::fflush(stdout);
      if (!std::freopen("/dev/null", "w", stdout)) std::fprintf(stderr, "rank %d: cannot quiet stdout\n", info.rank);
    }
  }
};

Launch& launch() {
  static Launch l;
  return l;
}

}  // namespace

const LaunchInfo& launch_info() { return launch().info; }

const parallel::MpiCommunicator* world_communicator() { return launch().world.get(); }

std::string rank_device(const std::string& device, const std::string& source) {
  const LaunchInfo& l = launch_info();
  if (device.rfind("cuda", 0) != 0 || l.size == 1) return device;
  if (device != "cuda")
    throw_config_error(source, "device",
                       fmt::format("{} pins all {} ranks to one GPU; set device: cuda (rank i of a node takes GPU i)",
                                   device, l.size));
  return fmt::format("cuda:{}", l.local_rank);
}


std::string layout_text(const parallel::RankLayout& layout, const model::ModelConfig& model, int64_t ranks_per_node) {
  std::string s = "rank layout: " + layout.describe() + "\n";
  const std::vector<std::string> table = layout.rank_table(model::routed_experts(model));
  // A big world shows its first ranks, the rule that gives every other rank, and its last.
  const int shown = layout.world() <= kFullRankTable ? layout.world() : std::max(8, std::min(16, layout.tensor() * 2));
  auto row = [&](int r) {
    const std::string where =
        ranks_per_node > 0 ? fmt::format(" (node {}, GPU {})", r / ranks_per_node, r % ranks_per_node) : "";
    const std::string& t = table[static_cast<size_t>(r)];
    const size_t colon = t.find(':');
    s += "  " + t.substr(0, colon) + where + t.substr(colon) + "\n";
  };
  for (int r = 0; r < shown; ++r) row(r);
  if (shown < layout.world()) {
    s += fmt::format("  ... rank = tp + {} x (cp + {} x dp); ep = (cp + {} x dp) mod {}, edp = (cp + {} x dp) / {}{}\n",
                     layout.tensor(), layout.context(), layout.context(), layout.expert(), layout.context(),
                     layout.expert(),
                     ranks_per_node > 0 ? fmt::format("; node = rank / {}, GPU = rank mod {}", ranks_per_node,
                                                      ranks_per_node)
                                        : std::string());
    row(layout.world() - 1);
  }
  return s;
}

parallel::RankLayout run_layout(const model::ModelConfig& model, const std::string& source, int world) {
  return parallel::RankLayout(model.parallel, world > 0 ? world : launch_info().size, model::layout_facts(model), source);
}

model::ModelShard model_shard(const parallel::ProcessGroups& groups) {
  const parallel::RankCoords c = groups.coords();
  return {c.expert, groups.layout.expert(), c.tensor, groups.layout.tensor(), groups.layout.sizes().sequence_parallel};
}

void check_sequence_split(const parallel::RankLayout& layout, int64_t seq_length, const std::string& source) {
  if (!layout.sizes().sequence_parallel || seq_length % layout.tensor() == 0) return;
  throw_config_error(source, "model.sequence_parallel",
                     fmt::format("true splits each sequence's {} tokens (dataset.seq_length) over the {} tensor-parallel "
                                 "ranks, which must divide it",
                                 seq_length, layout.tensor()));
}

void check_context_split(const parallel::RankLayout& layout, const model::ModelConfig& model, int64_t seq_length,
                         const std::string& source) {
  const int64_t C = layout.context();
  if (C == 1) return;
  auto fail = [&](const std::string& why) { throw_config_error(source, "model.context_parallel_size", why); };
  if (seq_length % (2 * C) != 0)
    fail(fmt::format("{} cuts each sequence into 2 x {} = {} equal chunks (two per rank, for causal load balance), "
                     "which must divide dataset.seq_length {}",
                     C, C, 2 * C, seq_length));
  const bool mamba = model.hybrid_override_pattern.find('M') != std::string::npos;
  if (mamba && seq_length / (2 * C) < model.conv_kernel - 1)
    fail(fmt::format("{} cuts each sequence into chunks of {} tokens, fewer than the {} before a token that Mamba's "
                     "conv1d reads (model.conv_kernel - 1)",
                     C, seq_length / (2 * C), model.conv_kernel - 1));
  if (model.mtp_depths() > seq_length / (2 * C))
    fail(fmt::format("{} cuts each sequence into chunks of {} tokens, fewer than the {} multi-token prediction "
                     "depths (model.mtp_num_layers) read ahead of a token",
                     C, seq_length / (2 * C), model.mtp_depths()));
}

std::shared_ptr<const parallel::ProcessGroups> make_process_groups(const parallel::RankLayout& layout,
                                                                   Backend* backend) {
  return parallel::ProcessGroups::create(layout, world_communicator(), backend);
}

void abort_ranks(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace nemotron::cli
