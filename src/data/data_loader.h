// Micro-batches for the trainer from a sample dataset, in Megatron's pretraining-sampler order:
// each step takes the next micro_batch_size x data_parallel_size samples, this rank its slice.
// The cursor (consumed_samples) is the whole state: saved as JSON with a fingerprint of the
// dataset and restored, a resumed run sees exactly the batches a continuous run would.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/tensor.h"
#include "data/sample_dataset.h"

namespace nemotron::data {

struct LoaderConfig {
  int64_t micro_batch_size = 1;   // B
  int64_t data_parallel_size = 1;
  int64_t data_parallel_rank = 0;
  // Megatron's eod_mask_loss: no loss on positions whose input token is eod_id.
  bool eod_mask_loss = false;
  int64_t eod_id = -1;
  void validate(const std::string& where) const;
};

// The fields of model::Batch (the trainer moves them across; data does not depend on model).
struct Batch {
  Tensor input_ids;  // [B, T] int32: sample[0:T], padding replaced by 0
  Tensor labels;     // [B, T] int32: sample[1:T+1]; kIgnoreLabel where loss_mask is 0
  Tensor loss_mask;  // [B, T] float32: 0 on padding (and on EOD inputs with eod_mask_loss), else 1
  int64_t first_sample = 0;  // dataset index of row 0
};

inline constexpr int32_t kIgnoreLabel = -100;

class DataLoader {
 public:
  DataLoader(std::shared_ptr<const SampleDataset> dataset, const LoaderConfig& cfg);

  // True while a whole step (B x data_parallel_size samples) is left.
  bool has_next() const;
  // This rank's next micro-batch. Throws InputError when the dataset is used up.
  Batch next();
  int64_t consumed_samples() const { return consumed_; }

  // {"consumed_samples", "micro_batch_size", "data_parallel_size", "dataset": {"size", "fingerprint"}}
  nlohmann::json state() const;
  // Restores the cursor; `source` names the state file in errors. The dataset must be the one the
  // state was saved with (same fingerprint and size); B and data_parallel_size may change.
  void load_state(const nlohmann::json& state, const std::string& source);

  // The batch made of samples [first, first + B) (no cursor involved).
  Batch batch_at(int64_t first) const;
  std::string fingerprint() const;

 private:
  std::shared_ptr<const SampleDataset> dataset_;
  LoaderConfig cfg_;
  int64_t consumed_ = 0;
};

}  // namespace nemotron::data
