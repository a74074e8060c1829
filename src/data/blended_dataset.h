// Weighted mixture of sample datasets (shared/reference/data-formats.md §4), as Megatron's
// BlendedDataset: sample s comes from dataset dataset_index[s], as that dataset's sample
// dataset_sample_index[s]. The indices come from the deterministic greedy scheme of
// helpers.cpp (each step picks the dataset furthest behind its weight, ties to the lowest
// index); all randomness is inside the member datasets' own shuffles.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "data/sample_dataset.h"

namespace nemotron::data {

struct BlendingIndices {
  std::vector<int16_t> dataset_index;
  std::vector<int64_t> dataset_sample_index;
};

// Megatron's utils.normalize: w / numpy.sum(w) in float64.
std::vector<double> normalize_weights(std::span<const double> weights);

// build_blending_indices: `size` draws for normalized `weights`.
BlendingIndices build_blending_indices(std::span<const double> weights, int64_t size);

// build_exhaustive_blending_indices: exactly sizes[k] draws from dataset k, weights
// sizes[k] / sum(sizes), the same greedy rule over the datasets not yet used up. Datasets of
// size 0 never take part (Megatron would pick them and never finish).
BlendingIndices build_exhaustive_blending_indices(std::span<const int64_t> sizes);

// _get_size_per_split_per_dataset for one split: ceil(ceil(size * w_k) * (1 + surplus)).
std::vector<int64_t> samples_per_dataset(std::span<const double> normalized_weights, int64_t size,
                                         double surplus);

class BlendedDataset : public SampleDataset {
 public:
  // `weights` are normalized here (again, as Megatron does). `size` nullopt = exhaustive: every
  // sample of every dataset once, in proportion to the weights (Megatron passes the dataset
  // sizes as weights in that case). Throws InputError when a dataset is asked for more samples
  // than it holds (raise mid_level_dataset_surplus).
  BlendedDataset(std::vector<std::shared_ptr<const SampleDataset>> datasets, std::vector<double> weights,
                 std::optional<int64_t> size);

  int64_t size() const override { return static_cast<int64_t>(indices_.dataset_index.size()); }
  int64_t sequence_length() const override { return datasets_[0]->sequence_length(); }
  int64_t sample_length() const override { return datasets_[0]->sample_length(); }
  void sample(int64_t i, int64_t* out) const override;
  std::string description() const override { return description_; }

  const BlendingIndices& indices() const { return indices_; }
  const std::vector<double>& weights() const { return weights_; }
  const std::vector<std::shared_ptr<const SampleDataset>>& datasets() const { return datasets_; }

 private:
  std::vector<std::shared_ptr<const SampleDataset>> datasets_;
  std::vector<double> weights_;
  BlendingIndices indices_;
  std::string description_;
};

}  // namespace nemotron::data
