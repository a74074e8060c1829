#include "parallel/rank_layout.h"

#include <fmt/format.h>

#include "core/config_tree.h"
#include "core/error.h"

namespace nemotron::parallel {

RankLayout::RankLayout(const ParallelSizes& sizes, int world, const LayoutModelFacts& model, const std::string& source)
    : sizes_(sizes), world_(world) {
  auto fail = [&](const char* key, const std::string& problem) {
    throw_config_error(source, fmt::format("model.{}", key), problem);
  };
  NM_CHECK(world >= 1, "world size {}", world);
  for (auto [key, v] : {std::pair{"tensor_model_parallel_size", sizes.tensor},
                        std::pair{"context_parallel_size", sizes.context},
                        std::pair{"expert_model_parallel_size", sizes.expert}})
    if (v < 1) fail(key, fmt::format("expected a positive integer, got {}", v));
  if (sizes.sequence_parallel && sizes.tensor == 1)
    fail("sequence_parallel", "true needs model.tensor_model_parallel_size > 1 (sequence parallelism splits the "
                              "tensor-parallel group's activations)");
  if (sizes.tensor > 1)
    for (const auto& [key, size] : model.tensor_split)
      if (size % sizes.tensor != 0)
        throw_config_error(source, "model.tensor_model_parallel_size",
                           fmt::format("{} does not divide {} = {} (tensor parallelism splits it)", sizes.tensor, key,
                                       size));
  if (sizes.tensor > 1)
    for (const auto& [key, size] : model.tensor_split_or_shared)
      if (size % sizes.tensor != 0 && sizes.tensor % size != 0)
        throw_config_error(source, "model.tensor_model_parallel_size",
                           fmt::format("{} neither divides {} = {} nor is a multiple of it (tensor parallelism "
                                       "splits the KV groups, or gives each rank one of them)",
                                       sizes.tensor, key, size));
  const int64_t tc = sizes.tensor * sizes.context;
  if (world % tc != 0)
    fail("tensor_model_parallel_size",
         fmt::format("{} x model.context_parallel_size {} = {} does not divide the world size {} (ranks "
                     "started by the launcher)",
                     sizes.tensor, sizes.context, tc, world));
  data_ = static_cast<int>(world / tc);
  const int64_t dc = static_cast<int64_t>(data_) * sizes.context;
  if (sizes.expert > 1) {
    if (model.routed_experts == 0)
      fail("expert_model_parallel_size",
           fmt::format("{}: the model has no routed experts (no E layer in hybrid_override_pattern)", sizes.expert));
    if (model.routed_experts % sizes.expert != 0)
      fail("expert_model_parallel_size",
           fmt::format("{} does not divide model.n_routed_experts {}", sizes.expert, model.routed_experts));
    if (dc % sizes.expert != 0)
      fail("expert_model_parallel_size",
           fmt::format("{} does not divide the {} data x context parallel ranks (world size {} / tensor {}); "
                       "experts are split within them",
                       sizes.expert, dc, world, sizes.tensor));
  }
}

RankCoords RankLayout::coords(int rank) const {
  NM_CHECK(rank >= 0 && rank < world_, "rank {} of {}", rank, world_);
  RankCoords c;
  c.tensor = rank % tensor();
  const int k = rank / tensor();  // cp + CP * dp
  c.context = k % context();
  c.data = k / context();
  c.expert = k % expert();
  c.expert_data = k / expert();
  return c;
}

std::vector<int> RankLayout::group_where(int rank, bool (*same)(const RankCoords&, const RankCoords&)) const {
  const RankCoords me = coords(rank);
  std::vector<int> members;
  for (int r = 0; r < world_; ++r)
    if (same(coords(r), me)) members.push_back(r);
  return members;
}

// Members of a group agree on every coordinate but the group's own (in ascending rank order,
// which is the order of the group's coordinate).
std::vector<int> RankLayout::data_group(int rank) const {
  return group_where(rank, [](const RankCoords& a, const RankCoords& b) {
    return a.tensor == b.tensor && a.context == b.context;
  });
}
std::vector<int> RankLayout::data_context_group(int rank) const {
  return group_where(rank, [](const RankCoords& a, const RankCoords& b) { return a.tensor == b.tensor; });
}
std::vector<int> RankLayout::tensor_group(int rank) const {
  return group_where(rank, [](const RankCoords& a, const RankCoords& b) {
    return a.context == b.context && a.data == b.data;
  });
}
std::vector<int> RankLayout::context_group(int rank) const {
  return group_where(rank, [](const RankCoords& a, const RankCoords& b) {
    return a.tensor == b.tensor && a.data == b.data;
  });
}
std::vector<int> RankLayout::expert_group(int rank) const {
  return group_where(rank, [](const RankCoords& a, const RankCoords& b) {
    return a.tensor == b.tensor && a.expert_data == b.expert_data;
  });
}
std::vector<int> RankLayout::expert_data_group(int rank) const {
  return group_where(rank, [](const RankCoords& a, const RankCoords& b) {
    return a.tensor == b.tensor && a.expert == b.expert;
  });
}

std::string RankLayout::describe() const {
  return fmt::format("DP {} x EP {} x TP {} x CP {} over {} rank{}", data_, expert(), tensor(), context(), world_,
                     world_ == 1 ? "" : "s");
}

std::vector<std::string> RankLayout::rank_table(int64_t routed_experts) const {
  std::vector<std::string> lines;
  for (int r = 0; r < world_; ++r) {
    const RankCoords c = coords(r);
    std::string experts;
    if (routed_experts > 0) {
      const int64_t per = routed_experts / expert();
      experts = per == 1 ? fmt::format(" (expert {})", c.expert * per)
                         : fmt::format(" (experts {}-{})", c.expert * per, (c.expert + 1) * per - 1);
    }
    lines.push_back(fmt::format("rank {}: dp {}, ep {}{}, edp {}, tp {}, cp {}", r, c.data, c.expert, experts,
                                c.expert_data, c.tensor, c.context));
  }
  return lines;
}

}  // namespace nemotron::parallel
