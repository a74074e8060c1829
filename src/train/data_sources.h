// The trainer's batch sources from the config's dataset section: the built-in mock
// (dataset.mock, MockBatchSource) or the data layer's GPT datasets over Megatron `.bin/.idx`
// files (dataset.blend cut by dataset.split, or dataset.per_split_data_args_path, a blend.json
// with one blend per split), read in Megatron's sample order by data::DataLoader, whose cursor
// is the source's checkpointed state.
#pragma once
#include <memory>
#include <string>

#include "data/data_loader.h"
#include "train/batch_source.h"
#include "train/train_config.h"

namespace nemotron::train {

// BatchSource over a data::DataLoader (one split of a GPT/Blended dataset).
class LoaderBatchSource : public BatchSource {
 public:
  // Token ids must lie in [0, vocab_size): a batch holding another id is an InputError naming the
  // split and the sample.
  LoaderBatchSource(std::shared_ptr<const data::SampleDataset> dataset, int64_t micro_batch_size, std::string split,
                    int64_t vocab_size);
  model::Batch next() override;
  nlohmann::json state() const override;
  void restore(const nlohmann::json& state) override;
  std::string describe() const override;

 private:
  std::shared_ptr<const data::SampleDataset> dataset_;
  data::DataLoader loader_;
  std::string split_;
  int64_t vocab_size_;
};

struct DataSources {
  std::unique_ptr<BatchSource> train;
  std::unique_ptr<BatchSource> valid;  // null without a validation split or eval_iters
};

// Train: train_iters x global_batch_size samples; validation: eval_iters x global_batch_size
// (every evaluation reads the same batches). Files are opened and indices built here, so a
// missing or inconsistent dataset is an InputError before training starts.
DataSources make_data_sources(const PretrainConfig& cfg);

}  // namespace nemotron::train
