#include "train/sft_data_source.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/json_limits.h"

namespace nemotron::train {

namespace fs = std::filesystem;

PackedSftBatchSource::PackedSftBatchSource(std::shared_ptr<const data::PackedSftDataset> dataset, std::string split,
                                           int64_t micro_batch_size, int64_t num_samples, uint64_t seed,
                                           int64_t vocab_size)
    : dataset_(std::move(dataset)),
      split_(std::move(split)),
      B_(micro_batch_size),
      seed_(seed),
      vocab_size_(vocab_size),
      order_(dataset_->sample_order(num_samples, static_cast<uint32_t>(seed))) {}

model::Batch packed_batch(const data::PackedSftMicroBatch& mb) {
  const Shape s{mb.B, mb.T};
  model::Batch b{Tensor::from_vector<int32_t>(s, mb.tokens), Tensor::from_vector<int32_t>(s, mb.labels),
                 Tensor::from_vector<float>(s, mb.loss_mask)};
  b.seq_idx = Tensor::from_vector<int32_t>(s, mb.seq_idx);
  b.position_ids = Tensor::from_vector<int32_t>(s, mb.position_ids);
  return b;
}

model::Batch PackedSftBatchSource::next() {
  std::vector<int64_t> rows(static_cast<size_t>(B_));
  for (int64_t b = 0; b < B_; ++b, ++next_sample_) {
    // Past the planned samples (e.g. evaluations reading more than planned): wrap around.
    rows[static_cast<size_t>(b)] = order_[static_cast<size_t>(next_sample_ % static_cast<int64_t>(order_.size()))];
  }
  data::PackedSftMicroBatch mb = dataset_->collate(rows);
  for (size_t i = 0; i < mb.tokens.size(); ++i) {
    const int32_t a = mb.tokens[i], l = mb.labels[i];
    if (a < 0 || a >= vocab_size_ || l < 0 || l >= vocab_size_)
      throw InputError(fmt::format("{}: row {}: token id {} outside the model's vocabulary [0, {}) (model.vocab_size)",
                                   split_, rows[i / static_cast<size_t>(mb.T)], (a < 0 || a >= vocab_size_) ? a : l,
                                   vocab_size_));
  }
  return packed_batch(mb);
}

nlohmann::json PackedSftBatchSource::state() const {
  return {{"kind", "packed_sft"},
          {"split", split_},
          {"seed", seed_},
          {"rows", dataset_->num_rows()},
          {"pack_size", dataset_->pack_size()},
          {"next_sample", next_sample_}};
}

void PackedSftBatchSource::restore(const nlohmann::json& s) {
  auto mismatch = [&](const std::string& what) {
    throw InputError(fmt::format("data state {}: {} (this run: {})", s.dump(), what, state().dump()));
  };
  if (!s.is_object() || s.value("kind", "") != "packed_sft") mismatch("not the state of packed SFT data");
  if (s.value("seed", uint64_t{0}) != seed_ || s.value("rows", int64_t{-1}) != dataset_->num_rows() ||
      s.value("pack_size", int64_t{-1}) != dataset_->pack_size())
    mismatch("another seed, number of rows or pack size");
  const auto n = s.find("next_sample");
  if (n == s.end() || !n->is_number_integer() || n->get<int64_t>() < 0) mismatch("no valid next_sample");
  next_sample_ = n->get<int64_t>();
}

std::string PackedSftBatchSource::describe() const {
  return fmt::format("packed SFT rows of {} ({} rows of up to {} tokens, {} file(s), seed {})", split_,
                     dataset_->num_rows(), dataset_->pack_size(), dataset_->files().size(), seed_);
}

SftDataSources make_sft_data_sources(const SftConfig& cfg) {
  const SftDatasetSection& d = cfg.dataset;
  const std::string meta_path = d.metadata_path();
  std::error_code ec;
  if (!fs::is_directory(d.dataset_root, ec))
    throw InputError(fmt::format("{}: dataset.dataset_root: {} does not exist; write it with `nemotron <family> data "
                                 "prep sft`",
                                 cfg.source, d.dataset_root));
  std::ifstream in(meta_path);
  if (!in) throw InputError(fmt::format("{}: missing (dataset.dataset_root is not a `data prep sft` output)", meta_path));
  const nlohmann::json meta = parse_json_or_discarded<nlohmann::json>(in);
  if (meta.is_discarded() || !meta.is_object()) throw InputError(fmt::format("{}: not a JSON object", meta_path));
  auto int_field = [&](const char* key) {
    if (!meta.contains(key) || !meta[key].is_number_integer())
      throw InputError(fmt::format("{}: {}: missing or not an integer", meta_path, key));
    return meta[key].get<int64_t>();
  };
  SftDataSources out;
  const int64_t eos = int_field("eos_token_id"), vocab = int_field("vocab_size"), pack = int_field("pack_size");
  if (eos < 0) throw InputError(fmt::format("{}: eos_token_id: the tokenizer has none (needed as the pad id)", meta_path));
  if (vocab > cfg.model.vocab_size)
    throw InputError(fmt::format("{}: vocab_size {} exceeds the model's model.vocab_size {} ({})", meta_path, vocab,
                                 cfg.model.vocab_size, cfg.source));
  if (pack > d.seq_length)
    throw InputError(fmt::format("{}: pack_size {} exceeds dataset.seq_length {} ({}): set dataset.seq_length={}",
                                 meta_path, pack, d.seq_length, cfg.source, pack));
  out.pad_id = static_cast<int32_t>(eos);
  const TrainSection& t = cfg.train;
  auto train = std::make_shared<const data::PackedSftDataset>(d.train_dir(), d.seq_length, out.pad_id);
  out.train = std::make_unique<PackedSftBatchSource>(train, d.train_dir(), t.micro_batch_size,
                                                     t.train_iters * t.global_batch_size, d.seed, cfg.model.vocab_size);
  if (t.eval_iters > 0) {
    auto valid = std::make_shared<const data::PackedSftDataset>(d.valid_dir(), d.seq_length, out.pad_id);
    out.valid = std::make_unique<PackedSftBatchSource>(valid, d.valid_dir(), t.micro_batch_size,
                                                       t.eval_iters * t.global_batch_size, d.seed, cfg.model.vocab_size);
  }
  return out;
}

}  // namespace nemotron::train
