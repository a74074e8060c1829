// GPT-style samples from a token source (shared/reference/data-formats.md §3), as Megatron's
// GPTDataset builds them: a document index (the split's sequence ids repeated per epoch and
// shuffled), a sample index (where each fixed-length sample starts; samples run across sequence
// boundaries and overlap by the extra label token) and a shuffle index, all drawn from one numpy
// RandomState(seed) in Megatron's order, so the sample order equals Megatron's for the same data.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "data/sample_dataset.h"
#include "data/split.h"
#include "data/token_source.h"

namespace nemotron::data {

struct GptDatasetConfig {
  int64_t sequence_length = 0;  // L, > 1
  uint32_t seed = 1234;         // Megatron's random_seed (Bridge presets use 1234)
  bool add_extra_token = true;  // x = 1: samples hold L + 1 tokens (inputs and shifted labels)
  // Valid split only: false keeps a last, padded, partial sample (ceil instead of floor).
  bool drop_last_partial_validation_sequence = true;
  // `where` is the config section for errors ("pretrain.yaml: data").
  void validate(const std::string& where) const;
};

struct GptIndices {
  int64_t tokens_per_epoch = 0;
  int64_t num_epochs = 0;
  bool separate_final_epoch = false;
  std::vector<int32_t> document_index;  // sequence ids, num_epochs x split size, shuffled
  std::vector<int64_t> sample_index;    // (num_samples + 1) rows of (document_index position, offset)
  std::vector<int64_t> shuffle_index;   // a permutation of [0, num_samples)
  int64_t num_samples() const { return static_cast<int64_t>(shuffle_index.size()); }
};

// _build_document_sample_shuffle_indices for sequences [begin, end) of a source whose lengths
// are `lengths`, asked for `num_samples` samples (nullopt = exactly one epoch). `what` names the
// source in errors.
GptIndices build_gpt_indices(std::span<const int32_t> lengths, int64_t begin, int64_t end,
                             std::optional<int64_t> num_samples, Split split, const GptDatasetConfig& cfg,
                             const std::string& what);

// helpers.cpp build_sample_idx: the flattened [num_samples + 1, 2] sample index.
std::vector<int64_t> build_sample_index(std::span<const int32_t> lengths, std::span<const int32_t> document_index,
                                        int64_t sequence_length, int64_t num_epochs, int64_t tokens_per_epoch,
                                        bool drop_last_partial_sequence, int64_t add_extra_token);

class GptDataset : public SampleDataset {
 public:
  GptDataset(std::shared_ptr<const TokenSource> source, int64_t begin, int64_t end,
             std::optional<int64_t> num_samples, Split split, const GptDatasetConfig& cfg);

  int64_t size() const override { return indices_.num_samples(); }
  int64_t sequence_length() const override { return cfg_.sequence_length; }
  int64_t sample_length() const override { return cfg_.sequence_length + (cfg_.add_extra_token ? 1 : 0); }
  // Megatron's _query_document_sample_shuffle_indices; padded with kPadTokenId when short.
  void sample(int64_t i, int64_t* out) const override;
  std::string description() const override { return description_; }

  const GptIndices& indices() const { return indices_; }
  const TokenSource& source() const { return *source_; }

 private:
  std::shared_ptr<const TokenSource> source_;
  GptDatasetConfig cfg_;
  GptIndices indices_;
  std::string description_;
};

}  // namespace nemotron::data
