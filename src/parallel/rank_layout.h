// Which coordinates each rank holds, in Megatron-Core's order: tensor-parallel ranks are
// adjacent (they exchange the most), then context, then data:
//   rank = tp + TP * (cp + CP * dp)
// Experts fold into the data x context ranks (Megatron's "tp-ep-dp" expert order, expert tensor
// parallel = TP): with k = cp + CP * dp, ep = k % EP and the expert-data coordinate edp = k / EP.
// So an EP group is EP consecutive data/context ranks, and the experts' own data-parallel group
// (whose gradients of one expert are averaged) has DP * CP / EP members.
// Built once per run from the recipe's sizes and the launcher's world size, and validated there:
// every bad layout is one line naming the key, before anything starts.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "parallel/parallel_sizes.h"

namespace nemotron::parallel {

struct RankCoords {
  int tensor = 0, context = 0, data = 0, expert = 0, expert_data = 0;
};

// Facts of the model the layout must divide (0 = the model has none of that kind).
struct LayoutModelFacts {
  int64_t routed_experts = 0;
  // The sizes tensor parallelism splits, by the config key that sets each (heads, KV groups,
  // Mamba heads and groups, MLP and expert widths, the vocabulary), as "model.<key>" or, for a
  // layer's own size (DeciLM), "model.<key> of layer <i>".
  std::vector<std::pair<std::string, int64_t>> tensor_split;
  // Sizes tensor parallelism splits when it divides them and shares when they divide it: the KV
  // groups (Megatron-Core's num_query_groups < tensor size: each rank then computes the one KV
  // group its query heads read, e.g. Nemotron 3 Super's 2 at TP 8).
  std::vector<std::pair<std::string, int64_t>> tensor_split_or_shared;
};

class RankLayout {
 public:
  RankLayout() = default;  // one process: every size 1
  // Throws InputError naming `source` and the key when the sizes do not fit `world` ranks or the
  // model, or ask for a kind of parallelism this build cannot run yet.
  RankLayout(const ParallelSizes& sizes, int world, const LayoutModelFacts& model, const std::string& source);

  int world() const { return world_; }
  const ParallelSizes& sizes() const { return sizes_; }
  int tensor() const { return static_cast<int>(sizes_.tensor); }
  int context() const { return static_cast<int>(sizes_.context); }
  int expert() const { return static_cast<int>(sizes_.expert); }
  int data() const { return data_; }
  int expert_data() const { return data_ * context() / expert(); }

  RankCoords coords(int rank) const;
  // The world ranks of `rank`'s group of each kind, in group-rank order (the group rank of a
  // member is its index here).
  std::vector<int> data_group(int rank) const;
  // The data x context ranks of one tensor coordinate (Megatron's dp-cp group): the replicas of
  // every whole parameter, whose gradients are summed over both (a context rank's tokens are a
  // part of the global batch as a data rank's are).
  std::vector<int> data_context_group(int rank) const;
  std::vector<int> tensor_group(int rank) const;
  std::vector<int> context_group(int rank) const;
  std::vector<int> expert_group(int rank) const;
  std::vector<int> expert_data_group(int rank) const;

  // "DP 2 x EP 2 x TP 1 x CP 1 over 4 ranks"
  std::string describe() const;
  // One line per rank: "rank 3: dp 1, ep 1 (experts 4-7), tp 0, cp 0" (experts shown when known).
  std::vector<std::string> rank_table(int64_t routed_experts = 0) const;

 private:
  std::vector<int> group_where(int rank, bool (*same)(const RankCoords&, const RankCoords&)) const;
  ParallelSizes sizes_;
  int world_ = 1, data_ = 1;
};

}  // namespace nemotron::parallel
