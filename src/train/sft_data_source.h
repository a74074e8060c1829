// The SFT stage's batch sources: packed Parquet rows (data::PackedSftDataset) as micro-batches
// with their sequence layout (seq_idx, position_ids), so attention and the Mamba state restart at
// every packed-sequence boundary, and the loss mask of the assistant tokens. Rows are read in
// Bridge's order (PackedSftDataset::sample_order: seeded shuffled epochs over as many samples as
// the run consumes); the cursor into that order is the checkpointed state.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/packed_sft_dataset.h"
#include "train/batch_source.h"
#include "train/sft_config.h"

namespace nemotron::train {

class PackedSftBatchSource : public BatchSource {
 public:
  // `num_samples` rows in the order above; token ids must lie in [0, vocab_size) (InputError naming
  // the split directory and the row otherwise).
  PackedSftBatchSource(std::shared_ptr<const data::PackedSftDataset> dataset, std::string split,
                       int64_t micro_batch_size, int64_t num_samples, uint64_t seed, int64_t vocab_size);
  model::Batch next() override;
  nlohmann::json state() const override;
  void restore(const nlohmann::json& state) override;
  std::string describe() const override;

 private:
  std::shared_ptr<const data::PackedSftDataset> dataset_;
  std::string split_;
  int64_t B_;
  uint64_t seed_;
  int64_t vocab_size_;
  std::vector<int64_t> order_;
  int64_t next_sample_ = 0;
};

// The micro-batch of collated packed rows, on the host (tokens, labels, seq_idx, position_ids
// int32; loss_mask float32).
model::Batch packed_batch(const data::PackedSftMicroBatch& mb);

struct SftDataSources {
  std::unique_ptr<BatchSource> train;
  std::unique_ptr<BatchSource> valid;  // null without eval_iters
  int32_t pad_id = 0;
};

// Reads dataset_root/metadata.json (pad id = its eos_token_id; its pack_size and vocab_size
// checked against dataset.seq_length and model.vocab_size) and opens the splits. A missing or
// inconsistent dataset is an InputError naming the path and the key, before training starts.
SftDataSources make_sft_data_sources(const SftConfig& cfg);

}  // namespace nemotron::train
