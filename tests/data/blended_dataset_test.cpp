#include <gtest/gtest.h>

#include <map>

#include "data/blended_dataset.h"
#include "data/dataset_builder.h"
#include "data/indexed_dataset_builder.h"
#include "data_test_util.h"

namespace nemotron::data {
namespace {

using testing::input_error;

// A dataset of `n` samples whose sample i is [tag, i].
class TaggedDataset : public SampleDataset {
 public:
  TaggedDataset(int64_t tag, int64_t n) : tag_(tag), n_(n) {}
  int64_t size() const override { return n_; }
  int64_t sequence_length() const override { return 1; }
  int64_t sample_length() const override { return 2; }
  void sample(int64_t i, int64_t* out) const override { out[0] = tag_, out[1] = i; }
  std::string description() const override { return "tagged" + std::to_string(tag_); }

 private:
  int64_t tag_, n_;
};

TEST(BlendingIndices, greedy_error_minimising_by_hand) {
  // Step s picks argmax_k(w_k * max(s, 1) - count_k):
  // s=0 (.5 .3 .2)->0, s=1 (-.5 .3 .2)->1, s=2 (0 -.4 .4)->2, s=3 (.5 -.1 -.4)->0, s=4 (0 .2 -.2)->1,
  // s=5 (.5 -.5 0)->0, s=6 (0 -.2 .2)->2, s=7 (.5 .1 -.6)->0, s=8 (0 .4 -.4)->1, s=9 (.5 -.3 -.2)->0.
  const std::vector<double> w = {0.5, 0.3, 0.2};
  BlendingIndices ix = build_blending_indices(w, 10);
  EXPECT_EQ(ix.dataset_index, (std::vector<int16_t>{0, 1, 2, 0, 1, 0, 2, 0, 1, 0}));
  EXPECT_EQ(ix.dataset_sample_index, (std::vector<int64_t>{0, 0, 0, 1, 1, 2, 1, 3, 2, 4}));
}

TEST(BlendingIndices, ties_go_to_the_lowest_index_and_counts_follow_weights) {
  const std::vector<double> half = {0.5, 0.5};
  EXPECT_EQ(build_blending_indices(half, 6).dataset_index, (std::vector<int16_t>{0, 1, 0, 1, 0, 1}));
  const std::vector<double> w = normalize_weights(std::vector<double>{2.2, 2.2, 1.0, 4.6});
  BlendingIndices ix = build_blending_indices(w, 10000);
  std::map<int, int64_t> counts;
  for (int16_t k : ix.dataset_index) ++counts[k];
  for (int k = 0; k < 4; ++k) EXPECT_NEAR(static_cast<double>(counts[k]), 10000 * w[k], 1.0) << k;
}

TEST(BlendingIndices, exhaustive_draws_every_sample_once) {
  // sizes 3 and 1: weights .75 .25; s=0 -> 0, s=1 (-.25 .25) -> 1 (now used up), then 0, 0.
  const std::vector<int64_t> sizes = {3, 1};
  BlendingIndices ix = build_exhaustive_blending_indices(sizes);
  EXPECT_EQ(ix.dataset_index, (std::vector<int16_t>{0, 1, 0, 0}));
  EXPECT_EQ(ix.dataset_sample_index, (std::vector<int64_t>{0, 0, 1, 2}));
  const std::vector<int64_t> with_empty = {0, 2};  // an empty dataset never takes part
  EXPECT_EQ(build_exhaustive_blending_indices(with_empty).dataset_index, (std::vector<int16_t>{1, 1}));
}

TEST(BlendingIndices, per_dataset_sample_counts_with_surplus) {
  // Values from Python: int(math.ceil(math.ceil(N * w) * (1 + surplus))).
  const std::vector<double> a = normalize_weights(std::vector<double>{0.3, 0.7});
  EXPECT_EQ(samples_per_dataset(a, 1000, 0.005), (std::vector<int64_t>{302, 704}));
  EXPECT_EQ(samples_per_dataset(a, 1000, 0.0), (std::vector<int64_t>{300, 700}));
  const std::vector<double> b = normalize_weights(std::vector<double>{0.2, 0.5, 0.3});
  EXPECT_EQ(samples_per_dataset(b, 777, 0.005), (std::vector<int64_t>{157, 391, 236}));
  const std::vector<double> c = normalize_weights(std::vector<double>{1, 1, 1});
  EXPECT_EQ(samples_per_dataset(c, 10, 0.005), (std::vector<int64_t>{5, 5, 5}));
}

TEST(BlendedDataset, routes_samples_and_refuses_to_oversample) {
  std::vector<std::shared_ptr<const SampleDataset>> ds = {std::make_shared<TaggedDataset>(7, 100),
                                                          std::make_shared<TaggedDataset>(8, 100)};
  BlendedDataset blend(ds, {3.0, 1.0}, 8);
  int64_t out[2];
  std::vector<std::pair<int64_t, int64_t>> got;
  for (int64_t i = 0; i < blend.size(); ++i) {
    blend.sample(i, out);
    got.emplace_back(out[0], out[1]);
  }
  const std::vector<std::pair<int64_t, int64_t>> want = {{7, 0}, {8, 0}, {7, 1}, {7, 2},
                                                          {7, 3}, {8, 1}, {7, 4}, {7, 5}};
  EXPECT_EQ(got, want);
  std::vector<std::shared_ptr<const SampleDataset>> small = {std::make_shared<TaggedDataset>(7, 2),
                                                             std::make_shared<TaggedDataset>(8, 100)};
  EXPECT_EQ(input_error([&] { BlendedDataset(small, {3.0, 1.0}, 8); }),
            "blend: dataset 0 (tagged7) holds 2 samples, the blend draws 6 from it; raise mid_level_dataset_surplus");
  EXPECT_EQ(input_error([&] { BlendedDataset(small, {0.0, 1.0}, 8); }),
            "blend: dataset 0 (tagged7) has weight 0; every weight must be positive (a dataset weighted by its size "
            "must hold at least one sample)");
}

// ---- The builder over real .bin/.idx files. ----

class BuildDatasets : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::temp_dir();
    for (int f = 0; f < 3; ++f) {
      IndexedDatasetBuilder b(prefix(f), TokenDType::u16);
      for (int d = 0; d < 40 + 10 * f; ++d) {
        std::vector<int32_t> doc(5 + (d * 7 + f) % 13, 100 * f + d % 100);
        b.add_document(doc);
      }
      b.finalize();
    }
    cfg_.gpt.sequence_length = 16;
    cfg_.gpt.seed = 1234;
  }
  std::string prefix(int f) const { return dir_ + "/shard_" + std::to_string(f); }
  std::string dir_;
  GptBuildConfig cfg_;
};

TEST_F(BuildDatasets, single_prefix_with_split_is_plain_gpt_datasets) {
  GptDataSource src;
  src.blend = Blend{{prefix(0)}, std::nullopt};
  src.split = "90,10,0";
  SplitDatasets out = build_gpt_datasets(src, cfg_, {100, 5, 0}, "cfg");
  ASSERT_TRUE(out[0] && out[1]);
  EXPECT_FALSE(out[2]);  // an empty split has no dataset
  auto train = std::dynamic_pointer_cast<const GptDataset>(out[0]);
  ASSERT_TRUE(train);
  EXPECT_GE(train->size(), 100);
  // Sequences [0, round(0.9 * 40)) only.
  for (int32_t id : train->indices().document_index) EXPECT_LT(id, 36);
  auto valid = std::dynamic_pointer_cast<const GptDataset>(out[1]);
  for (int32_t id : valid->indices().document_index) EXPECT_GE(id, 36);
}

TEST_F(BuildDatasets, weighted_blend_builds_members_with_surplus_and_blends_the_target) {
  GptDataSource src;
  src.blend = Blend{{prefix(0), prefix(1), prefix(2)}, std::vector<double>{0.2, 0.5, 0.3}};
  src.split = "98,2,0";
  SplitDatasets out = build_gpt_datasets(src, cfg_, {777, 20, 0}, "cfg");
  auto train = std::dynamic_pointer_cast<const BlendedDataset>(out[0]);
  ASSERT_TRUE(train);
  EXPECT_EQ(train->size(), 156 + 389 + 234);  // sum of ceil(N * w)
  ASSERT_EQ(train->datasets().size(), 3u);
  const int64_t buffered[3] = {157, 391, 236};
  for (int k = 0; k < 3; ++k) {
    auto member = std::dynamic_pointer_cast<const GptDataset>(train->datasets()[k]);
    ASSERT_TRUE(member);
    EXPECT_GE(member->size(), buffered[k]);
  }
  std::vector<int64_t> text(17);
  train->sample(0, text.data());  // readable end to end
}

TEST_F(BuildDatasets, per_split_blends_and_size_weighted_blends) {
  GptDataSource src;
  BlendPerSplit per_split;
  per_split[0] = Blend{{prefix(0), prefix(1)}, std::nullopt};   // weighted by size, capped at N
  per_split[1] = Blend{{prefix(2)}, std::vector<double>{2.2}};  // one prefix: a plain GPTDataset
  src.blend_per_split = per_split;
  SplitDatasets out = build_gpt_datasets(src, cfg_, {30, 7, std::nullopt}, "cfg");
  auto train = std::dynamic_pointer_cast<const BlendedDataset>(out[0]);
  ASSERT_TRUE(train);
  EXPECT_EQ(train->size(), 30);
  const double a = static_cast<double>(train->datasets()[0]->size());
  const double b = static_cast<double>(train->datasets()[1]->size());
  EXPECT_DOUBLE_EQ(train->weights()[0], a / (a + b));
  auto valid = std::dynamic_pointer_cast<const GptDataset>(out[1]);
  ASSERT_TRUE(valid);
  EXPECT_EQ(valid->indices().document_index.size(), 60u);  // the whole file, one epoch
  EXPECT_FALSE(out[2]);
  // Without a size, the size-weighted blend is exhaustive: every member sample once.
  SplitDatasets all = build_gpt_datasets(src, cfg_, {std::nullopt, 7, std::nullopt}, "cfg");
  EXPECT_EQ(all[0]->size(), static_cast<int64_t>(a + b));
}

TEST_F(BuildDatasets, mock_data_uses_split_1_1_1) {
  GptDataSource src;
  src.mock = MockConfig{};
  src.mock->vocab_size = 100;
  src.mock->num_sequences = 300;
  src.mock->max_sequence_length = 50;
  SplitDatasets out = build_gpt_datasets(src, cfg_, {64, 8, 8}, "cfg");
  for (int s = 0; s < 3; ++s) ASSERT_TRUE(out[s]);
  auto valid = std::dynamic_pointer_cast<const GptDataset>(out[1]);
  for (int32_t id : valid->indices().document_index) {
    EXPECT_GE(id, 100);
    EXPECT_LT(id, 200);
  }
}

TEST_F(BuildDatasets, a_split_that_rounds_to_no_sequences_is_an_error_not_a_hang) {
  // "969,30,1" over 40 sequences: test = [round(0.999 * 40), 40) = [40, 40). Megatron's
  // _get_num_epochs loops forever on such a split when it is given a sample count.
  GptDataSource src;
  src.blend = Blend{{prefix(0)}, std::nullopt};
  src.split = "969,30,1";
  EXPECT_EQ(testing::input_error([&] { build_gpt_datasets(src, cfg_, {10, 2, 1}, "cfg"); }),
            prefix(0) + ": the test split (sequences [40, 40)) holds 0 tokens; at least 2 are needed to build samples");
}

TEST_F(BuildDatasets, configuration_errors) {
  GptDataSource none;
  EXPECT_EQ(input_error([&] { build_gpt_datasets(none, cfg_, {1, 1, 1}, "p.yaml: data"); }),
            "p.yaml: data: give exactly one data source (a blend with a split, a blend per split, or mock data), "
            "got 0");
  GptDataSource no_split;
  no_split.blend = Blend{{prefix(0)}, std::nullopt};
  EXPECT_EQ(input_error([&] { build_gpt_datasets(no_split, cfg_, {1, 1, 1}, "p.yaml: data"); }),
            "p.yaml: data: split: required with a single blend (for example \"99,1,0\")");
  GptDataSource weighted = no_split;
  weighted.blend->weights = std::vector<double>{1.0};
  weighted.split = "1,1,1";
  EXPECT_EQ(input_error([&] { build_gpt_datasets(weighted, cfg_, {10, std::nullopt, 1}, "p.yaml: data"); }),
            "p.yaml: data: the blend has weights, so every split needs a sample count; the valid split has none");
  GptDataSource both;
  both.blend_per_split = BlendPerSplit{};
  both.split = "1,1,1";
  EXPECT_EQ(input_error([&] { build_gpt_datasets(both, cfg_, {1, 1, 1}, "p.yaml: data"); }),
            "p.yaml: data: split \"1,1,1\" cannot be combined with a blend per split (each split has its own blend); "
            "remove the split");
  GptDataSource missing;
  missing.blend = Blend{{dir_ + "/nope"}, std::nullopt};
  missing.split = "1";
  EXPECT_EQ(input_error([&] { build_gpt_datasets(missing, cfg_, {1, 0, 0}, "p.yaml: data"); }),
            dir_ + "/nope.idx: cannot open: No such file or directory");
}

}  // namespace
}  // namespace nemotron::data
