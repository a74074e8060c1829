#include "data/data_loader.h"

#include <limits>
#include <vector>

#include "core/config_tree.h"
#include "core/error.h"

namespace nemotron::data {

namespace {
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}
}  // namespace

void LoaderConfig::validate(const std::string& where) const {
  if (micro_batch_size < 1)
    throw InputError(fmt::format("{}.micro_batch_size: expected a positive integer, got {}", where, micro_batch_size));
  if (data_parallel_size < 1)
    throw InputError(fmt::format("{}.data_parallel_size: expected a positive integer, got {}", where,
                                 data_parallel_size));
  if (data_parallel_rank < 0 || data_parallel_rank >= data_parallel_size)
    throw InputError(fmt::format("{}.data_parallel_rank: expected an integer in [0, {}), got {}", where,
                                 data_parallel_size, data_parallel_rank));
  if (eod_mask_loss && eod_id < 0)
    throw InputError(fmt::format("{}.eod_id: eod_mask_loss needs the EOD token id, got {}", where, eod_id));
}

DataLoader::DataLoader(std::shared_ptr<const SampleDataset> dataset, const LoaderConfig& cfg)
    : dataset_(std::move(dataset)), cfg_(cfg) {
  cfg_.validate("loader");
  NM_CHECK(dataset_ != nullptr, "no dataset");
}

std::string DataLoader::fingerprint() const { return fmt::format("{:016x}", fnv1a(dataset_->description())); }

bool DataLoader::has_next() const {
  return consumed_ + cfg_.micro_batch_size * cfg_.data_parallel_size <= dataset_->size();
}

Batch DataLoader::next() {
  const int64_t step = cfg_.micro_batch_size * cfg_.data_parallel_size;
  if (!has_next())
    throw InputError(fmt::format("data: the dataset has {} samples and {} are consumed; the next step needs {} more. "
                                 "Build the dataset with more samples (train_iters x global_batch_size)",
                                 dataset_->size(), consumed_, step));
  Batch b = batch_at(consumed_ + cfg_.data_parallel_rank * cfg_.micro_batch_size);
  consumed_ += step;
  return b;
}

Batch DataLoader::batch_at(int64_t first) const {
  const int64_t B = cfg_.micro_batch_size, T = dataset_->sequence_length(), n = dataset_->sample_length();
  NM_CHECK(first >= 0 && first + B <= dataset_->size(), "batch [{}, {}) of {}", first, first + B, dataset_->size());
  NM_CHECK(n == T || n == T + 1, "sample length {} for sequence length {}", n, T);
  Batch b;
  b.first_sample = first;
  b.input_ids = Tensor::empty(Shape({B, T}), DType::i32);
  b.labels = Tensor::empty(Shape({B, T}), DType::i32);
  b.loss_mask = Tensor::empty(Shape({B, T}), DType::f32);
  int32_t* ids = b.input_ids.data<int32_t>();
  int32_t* labels = b.labels.data<int32_t>();
  float* mask = b.loss_mask.data<float>();
  std::vector<int64_t> text(static_cast<size_t>(n));
  auto to_id = [&](int64_t v, int64_t row) {
    if (v > std::numeric_limits<int32_t>::max() || v < kPadTokenId)
      throw InputError(fmt::format("data: sample {} holds token id {}, outside the int32 ids the model takes",
                                   first + row, v));
    return static_cast<int32_t>(v);
  };
  for (int64_t r = 0; r < B; ++r) {
    dataset_->sample(first + r, text.data());
    for (int64_t t = 0; t < T; ++t) {
      const int64_t token = text[t];
      // Without the extra token the last label is padding (Megatron rolls the sample left).
      const int64_t label = t + 1 < n ? text[t + 1] : kPadTokenId;
      bool trained = label != kPadTokenId;
      if (cfg_.eod_mask_loss && token == cfg_.eod_id) trained = false;
      ids[r * T + t] = token == kPadTokenId ? 0 : to_id(token, r);
      labels[r * T + t] = trained ? to_id(label, r) : kIgnoreLabel;
      mask[r * T + t] = trained ? 1.0f : 0.0f;
    }
  }
  return b;
}

nlohmann::json DataLoader::state() const {
  return {{"consumed_samples", consumed_},
          {"micro_batch_size", cfg_.micro_batch_size},
          {"data_parallel_size", cfg_.data_parallel_size},
          {"dataset", {{"size", dataset_->size()}, {"fingerprint", fingerprint()}}}};
}

void DataLoader::load_state(const nlohmann::json& state, const std::string& source) {
  if (!state.is_object())
    throw InputError(fmt::format("{}: expected a data loader state object, got {}", source, describe_value(state)));
  const auto& ds = state.contains("dataset") ? state.at("dataset") : nlohmann::json();
  if (!ds.is_object() || !ds.contains("fingerprint") || !ds.at("fingerprint").is_string())
    throw InputError(fmt::format("{}: dataset.fingerprint: missing", source));
  if (ds.at("fingerprint").get<std::string>() != fingerprint())
    throw InputError(fmt::format("{}: dataset.fingerprint: the state was saved for another dataset (expected {}, got "
                                 "{}); resume with the same data, sequence length, seed and sample counts",
                                 source, fingerprint(), ds.at("fingerprint").get<std::string>()));
  if (!ds.contains("size") || !ds.at("size").is_number_integer() || ds.at("size").get<int64_t>() != dataset_->size())
    throw InputError(fmt::format("{}: dataset.size: expected {}, got {}", source, dataset_->size(),
                                 ds.contains("size") ? describe_value(ds.at("size")) : "nothing"));
  const auto& c = state.contains("consumed_samples") ? state.at("consumed_samples") : nlohmann::json();
  if (!c.is_number_integer() || c.get<int64_t>() < 0 || c.get<int64_t>() > dataset_->size())
    throw InputError(fmt::format("{}: consumed_samples: expected an integer in [0, {}], got {}", source,
                                 dataset_->size(), c.is_null() ? "nothing" : describe_value(c)));
  consumed_ = c.get<int64_t>();
}

}  // namespace nemotron::data
