// The rank layout: Megatron's order (tp fastest, then cp, then dp; experts folded into dp x cp),
// each group's members, and one line naming the key for every bad layout.
#include "parallel/rank_layout.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace nemotron::parallel {
namespace {

ParallelSizes sizes(int64_t tp, int64_t cp, int64_t ep) { return ParallelSizes{tp, cp, ep, false}; }

std::string error_of(const ParallelSizes& s, int world, const LayoutModelFacts& model) {
  try {
    RankLayout l(s, world, model, "run.yaml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}
std::string error_of(const ParallelSizes& s, int world, int64_t experts = 8) {
  return error_of(s, world, LayoutModelFacts{experts, {}});
}

TEST(RankLayout, OneProcessIsEverySizeOne) {
  const RankLayout l;
  EXPECT_EQ(l.world(), 1);
  EXPECT_EQ(l.data(), 1);
  EXPECT_EQ(l.data_group(0), std::vector<int>{0});
  EXPECT_EQ(l.expert_group(0), std::vector<int>{0});
  EXPECT_EQ(l.describe(), "DP 1 x EP 1 x TP 1 x CP 1 over 1 rank");
}

TEST(RankLayout, DataParallelIsTheWorldOverTheOtherSizes) {
  const RankLayout l(sizes(1, 1, 1), 4, {0}, "run.yaml");
  EXPECT_EQ(l.data(), 4);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(l.coords(r).data, r);
    EXPECT_EQ(l.data_group(r), (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(l.expert_group(r), std::vector<int>{r});
    EXPECT_EQ(l.expert_data_group(r), (std::vector<int>{0, 1, 2, 3}));
  }
}

TEST(RankLayout, ContextRanksSitBetweenTensorAndData) {
  // TP 2 x CP 2 x DP 2 on 8 ranks: rank = tp + 2 (cp + 2 dp).
  const RankLayout l(sizes(2, 2, 1), 8, {0}, "run.yaml");
  EXPECT_EQ(l.data(), 2);
  EXPECT_EQ(l.coords(6).context, 1);
  EXPECT_EQ(l.coords(6).data, 1);
  EXPECT_EQ(l.context_group(0), (std::vector<int>{0, 2}));
  EXPECT_EQ(l.context_group(5), (std::vector<int>{5, 7}));
  EXPECT_EQ(l.data_group(1), (std::vector<int>{1, 5}));
  // A whole parameter's replicas: every data and context rank of one tensor coordinate.
  EXPECT_EQ(l.data_context_group(0), (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(l.data_context_group(7), (std::vector<int>{1, 3, 5, 7}));
}

TEST(RankLayout, ExpertsFoldIntoDataRanks) {
  // EP 2 x DP 4 on 4 ranks: EP groups {0,1}, {2,3}; an expert's replicas {0,2}, {1,3}.
  const RankLayout l(sizes(1, 1, 2), 4, {8}, "run.yaml");
  EXPECT_EQ(l.data(), 4);
  EXPECT_EQ(l.expert_data(), 2);
  EXPECT_EQ(l.expert_group(0), (std::vector<int>{0, 1}));
  EXPECT_EQ(l.expert_group(3), (std::vector<int>{2, 3}));
  EXPECT_EQ(l.expert_data_group(0), (std::vector<int>{0, 2}));
  EXPECT_EQ(l.expert_data_group(3), (std::vector<int>{1, 3}));
  EXPECT_EQ(l.coords(3).expert, 1);
  EXPECT_EQ(l.coords(3).expert_data, 1);
  const std::vector<std::string> table = l.rank_table(8);
  ASSERT_EQ(table.size(), 4u);
  EXPECT_EQ(table[1], "rank 1: dp 1, ep 1 (experts 4-7), edp 0, tp 0, cp 0");
  EXPECT_EQ(l.describe(), "DP 4 x EP 2 x TP 1 x CP 1 over 4 ranks");
}

TEST(RankLayout, BadLayoutsNameTheirKey) {
  EXPECT_EQ(error_of(sizes(1, 1, 3), 3, 8), "run.yaml: model.expert_model_parallel_size: 3 does not divide "
                                            "model.n_routed_experts 8");
  EXPECT_EQ(error_of(sizes(1, 1, 4), 2, 8),
            "run.yaml: model.expert_model_parallel_size: 4 does not divide the 2 data x context parallel ranks "
            "(world size 2 / tensor 1); experts are split within them");
  EXPECT_EQ(error_of(sizes(1, 1, 2), 2, 0),
            "run.yaml: model.expert_model_parallel_size: 2: the model has no routed experts (no E layer in "
            "hybrid_override_pattern)");
  // Tensor parallelism runs (issue 23) where it divides every size it splits.
  EXPECT_EQ(error_of(sizes(2, 1, 1), 4), "");
  const LayoutModelFacts heads{8, {{"model.num_attention_heads", 8}}, {{"model.num_key_value_heads", 2}}};
  EXPECT_EQ(error_of(sizes(2, 1, 1), 4, heads), "");
  // Fewer KV groups than tensor ranks: each rank computes one (Megatron-Core's num_query_groups < TP).
  EXPECT_EQ(error_of(sizes(4, 1, 1), 4, heads), "");
  EXPECT_EQ(error_of(sizes(8, 1, 1), 8, heads), "");
  EXPECT_EQ(error_of(sizes(16, 1, 1), 16, heads),
            "run.yaml: model.tensor_model_parallel_size: 16 does not divide model.num_attention_heads = 8 (tensor "
            "parallelism splits it)");
  const LayoutModelFacts three{8, {{"model.num_attention_heads", 12}}, {{"model.num_key_value_heads", 3}}};
  EXPECT_EQ(error_of(sizes(4, 1, 1), 4, three),
            "run.yaml: model.tensor_model_parallel_size: 4 neither divides model.num_key_value_heads = 3 nor is a "
            "multiple of it (tensor parallelism splits the KV groups, or gives each rank one of them)");
  ParallelSizes tsp = sizes(2, 1, 1);
  tsp.sequence_parallel = true;  // sequence parallelism runs with tensor parallelism
  EXPECT_EQ(error_of(tsp, 2), "");
  EXPECT_EQ(error_of(sizes(1, 2, 1), 4), "");  // context parallelism runs (issue 23)
  EXPECT_EQ(error_of(sizes(2, 2, 1), 2),
            "run.yaml: model.tensor_model_parallel_size: 2 x model.context_parallel_size 2 = 4 does not divide the "
            "world size 2 (ranks started by the launcher)");
  EXPECT_NE(error_of(sizes(0, 1, 1), 4).find("model.tensor_model_parallel_size: expected a positive integer"),
            std::string::npos);
  ParallelSizes sp = sizes(1, 1, 1);
  sp.sequence_parallel = true;
  EXPECT_NE(error_of(sp, 2).find("model.sequence_parallel: true needs model.tensor_model_parallel_size > 1"),
            std::string::npos);
  EXPECT_EQ(error_of(sizes(1, 1, 2), 4, 8), "");
}

}  // namespace
}  // namespace nemotron::parallel
