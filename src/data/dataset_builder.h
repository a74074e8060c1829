// Builds the train/valid/test sample datasets from a data source, as Megatron's
// BlendedMegatronDatasetBuilder does (shared/reference/data-formats.md §2.5, §4): one blend cut
// by a split string, one blend per split (blend.json), or mock data. Weighted blends build
// each member with its share of the samples plus a surplus and mix them with BlendedDataset;
// unweighted ones build one epoch per member and weight by size.
// Not supported: Megatron's multiple_validation_sets (a list of valid datasets).
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "data/blend.h"
#include "data/gpt_dataset.h"
#include "data/mock_dataset.h"

namespace nemotron::data {

struct GptDataSource {
  // Exactly one of these three.
  std::optional<Blend> blend;                   // one distribution, cut by `split`
  std::optional<BlendPerSplit> blend_per_split; // a blend per split; `split` must be unset
  std::optional<MockConfig> mock;               // synthetic tokens, cut by `split` ("1,1,1" if unset)
  std::optional<std::string> split;             // "99,1,0"; required with `blend`
};

struct GptBuildConfig {
  GptDatasetConfig gpt;
  double mid_level_dataset_surplus = 0.005;  // extra samples built per blended member
};

using SplitSizes = std::array<std::optional<int64_t>, 3>;  // samples wanted per split; nullopt = one epoch
using SplitDatasets = std::array<std::shared_ptr<const SampleDataset>, 3>;  // null = no data for the split

// `where` names the config section in errors ("pretrain.yaml: data").
SplitDatasets build_gpt_datasets(const GptDataSource& source, const GptBuildConfig& cfg, const SplitSizes& sizes,
                                 const std::string& where);

}  // namespace nemotron::data
