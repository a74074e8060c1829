#include "cli/distributed.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

#include "core/config_tree.h"
#include "core/error.h"
#include "model/layer_spec.h"
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

namespace {
int64_t routed_experts(const model::ModelConfig& model) {
  const bool moe = model.hybrid_override_pattern.find('E') != std::string::npos ||
                   model.mtp_hybrid_override_pattern.find('E') != std::string::npos;
  return moe ? model.n_routed_experts : 0;
}

// What tensor parallelism splits, for the layers this model has (trunk and MTP blocks).
std::vector<std::pair<std::string, int64_t>> tensor_split_sizes(const model::ModelConfig& m) {
  std::vector<std::pair<std::string, int64_t>> out;
  auto add = [&](std::string key, int64_t v) {
    for (const auto& [k, x] : out)
      if (k == key && x == v) return;
    out.emplace_back(std::move(key), v);
  };
  add("model.vocab_size", m.vocab_size);  // the embedding and the head split by vocabulary rows
  std::vector<model::LayerSpec> specs = model::layer_specs(m);
  for (int64_t b = 0; b < m.num_nextn_predict_layers; ++b)
    for (model::LayerSpec& s : model::mtp_layer_specs(m, b)) specs.push_back(s);
  for (const model::LayerSpec& s : specs) {
    switch (s.kind) {
      case model::LayerKind::attention:
        add("model.num_attention_heads", m.num_attention_heads);
        if (s.num_key_value_heads > 0 && s.num_key_value_heads != m.num_key_value_heads)
          add(fmt::format("the KV heads of layer {} (block_configs)", s.block), s.num_key_value_heads);
        else
          add("model.num_key_value_heads", m.num_key_value_heads);
        break;
      case model::LayerKind::mamba:
        add("model.mamba_num_heads", m.mamba_num_heads);
        add("model.n_groups", m.n_groups);
        break;
      case model::LayerKind::mlp:
        if (s.intermediate_size != m.intermediate_size)
          add(fmt::format("the FFN width of layer {} (block_configs)", s.block), s.intermediate_size);
        else
          add("model.intermediate_size", m.intermediate_size);
        break;
      case model::LayerKind::moe:
        add("model.moe_intermediate_size", m.moe_intermediate_size);
        if (m.n_shared_experts > 0 && m.moe_shared_expert_intermediate_size > 0)
          add("model.moe_shared_expert_intermediate_size x model.n_shared_experts",
              m.moe_shared_expert_intermediate_size * m.n_shared_experts);
        break;
      case model::LayerKind::linear: break;  // whole on every rank
    }
  }
  return out;
}

parallel::LayoutModelFacts layout_facts(const model::ModelConfig& m) {
  return {routed_experts(m), tensor_split_sizes(m)};
}

}  // namespace

std::string layout_text(const parallel::RankLayout& layout, const model::ModelConfig& model) {
  std::string s = "rank layout: " + layout.describe() + "\n";
  for (const std::string& line : layout.rank_table(routed_experts(model))) s += "  " + line + "\n";
  return s;
}

parallel::RankLayout run_layout(const model::ModelConfig& model, const std::string& source, int world) {
  return parallel::RankLayout(model.parallel, world > 0 ? world : launch_info().size, layout_facts(model), source);
}

void refuse_expert_parallel(const parallel::RankLayout& layout, const std::string& source, const std::string& why) {
  if (layout.expert() > 1)
    throw_config_error(source, "model.expert_model_parallel_size",
                       fmt::format("{}: {} (set 1: data parallelism is)", layout.expert(), why));
}

model::ModelShard model_shard(const parallel::ProcessGroups& groups) {
  const parallel::RankCoords c = groups.coords();
  return {c.expert, groups.layout.expert(), c.tensor, groups.layout.tensor()};
}

void refuse_tensor_parallel(const parallel::RankLayout& layout, const std::string& source, const std::string& why) {
  if (layout.tensor() > 1)
    throw_config_error(source, "model.tensor_model_parallel_size",
                       fmt::format("{}: {} (set 1: data and expert parallelism are)", layout.tensor(), why));
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
