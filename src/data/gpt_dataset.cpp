#include "data/gpt_dataset.h"

#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "data/numpy_random.h"

namespace nemotron::data {

void GptDatasetConfig::validate(const std::string& where) const {
  if (sequence_length < 2)
    throw InputError(fmt::format("{}: sequence_length: expected an integer >= 2, got {}", where, sequence_length));
}

std::vector<int64_t> build_sample_index(std::span<const int32_t> lengths, std::span<const int32_t> document_index,
                                        int64_t L, int64_t num_epochs, int64_t tokens_per_epoch,
                                        bool drop_last_partial_sequence, int64_t x) {
  NM_CHECK(L > 1 && num_epochs > 0 && tokens_per_epoch > 1 && !document_index.empty(),
           "L={} epochs={} tokens_per_epoch={}", L, num_epochs, tokens_per_epoch);
  const int64_t total = num_epochs * tokens_per_epoch - x;
  // helpers.cpp computes the rounded-up count in single precision; kept for identical results.
  const int64_t num_samples = drop_last_partial_sequence
                                  ? total / L
                                  : static_cast<int64_t>(std::ceil(static_cast<float>(total) / static_cast<float>(L)));
  std::vector<int64_t> out(static_cast<size_t>(2 * (num_samples + 1)));
  const int64_t last = static_cast<int64_t>(document_index.size()) - 1;
  int64_t d = 0, offset = 0;
  out[0] = 0;
  out[1] = 0;
  for (int64_t s = 1; s <= num_samples; ++s) {
    int64_t remaining = L + x;
    while (remaining != 0) {
      const int64_t available = lengths[document_index[d]] - offset;
      remaining -= available;
      if (remaining <= 0) {
        // This sequence completes the sample; the next one starts x tokens before its end.
        offset += remaining + available - x;
        remaining = 0;
      } else {
        if (d == last) {  // the data ran out: only the final, partial sample gets here
          NM_CHECK(s == num_samples, "sample index ran out of data at sample {} of {}", s, num_samples);
          offset = lengths[document_index[d]] - x;
          break;
        }
        ++d;
        offset = 0;
      }
    }
    out[2 * s] = d;
    out[2 * s + 1] = offset;
  }
  return out;
}

GptIndices build_gpt_indices(std::span<const int32_t> lengths, int64_t begin, int64_t end,
                             std::optional<int64_t> num_samples, Split split, const GptDatasetConfig& cfg,
                             const std::string& what) {
  NM_CHECK(0 <= begin && begin <= end && end <= static_cast<int64_t>(lengths.size()), "range [{}, {}) of {}",
           begin, end, lengths.size());
  NM_CHECK(!num_samples || *num_samples >= 0, "num_samples {}", *num_samples);
  if (lengths.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    throw InputError(fmt::format("{}: {} sequences; Megatron's document index is int32, so at most {} are supported",
                                 what, lengths.size(), std::numeric_limits<int32_t>::max()));
  const int64_t L = cfg.sequence_length, x = cfg.add_extra_token ? 1 : 0;
  GptIndices ix;
  for (int64_t i = begin; i < end; ++i) ix.tokens_per_epoch += lengths[i];
  const int64_t T = ix.tokens_per_epoch;
  if (T < 2)
    throw InputError(fmt::format("{}: the {} split (sequences [{}, {})) holds {} token{}; at least 2 are needed to "
                                 "build samples",
                                 what, split_name(split), begin, end, T, T == 1 ? "" : "s"));

  // Epochs: the smallest E >= 1 with E * T >= N * L + x.
  ix.num_epochs = 1;
  if (num_samples) {
    const int64_t requested = *num_samples * L + x;
    ix.num_epochs = std::max<int64_t>(1, (requested + T - 1) / T);
  }
  const int64_t E = ix.num_epochs;
  int64_t samples_sans_final_epoch = 0;
  if (E > 1) {
    samples_sans_final_epoch = ((E - 1) * T - x) / L;
    const int64_t from_final_epoch = *num_samples - samples_sans_final_epoch;
    const int64_t per_epoch = (T - x) / L;
    NM_CHECK(from_final_epoch >= 0 && from_final_epoch <= per_epoch + 1, "final epoch {} per epoch {}",
             from_final_epoch, per_epoch);
    ix.separate_final_epoch = from_final_epoch < static_cast<int64_t>(0.80 * static_cast<double>(per_epoch));
  }

  // One RandomState for everything, drawn in Megatron's order: document index(es), shuffle index(es).
  NumpyRandomState rng(cfg.seed);
  const int64_t n = end - begin;
  ix.document_index.resize(static_cast<size_t>(E * n));
  for (int64_t e = 0; e < E; ++e)
    for (int64_t i = 0; i < n; ++i) ix.document_index[e * n + i] = static_cast<int32_t>(begin + i);
  std::span<int32_t> docs(ix.document_index);
  if (ix.separate_final_epoch) {
    rng.shuffle(docs.subspan(0, static_cast<size_t>((E - 1) * n)));
    rng.shuffle(docs.subspan(static_cast<size_t>((E - 1) * n)));
  } else {
    rng.shuffle(docs);
  }

  const bool drop_last = split == Split::valid ? cfg.drop_last_partial_validation_sequence : true;
  ix.sample_index = build_sample_index(lengths, ix.document_index, L, E, T, drop_last, x);

  const int64_t S = static_cast<int64_t>(ix.sample_index.size()) / 2 - 1;
  ix.shuffle_index.resize(static_cast<size_t>(S));
  std::iota(ix.shuffle_index.begin(), ix.shuffle_index.end(), int64_t{0});
  std::span<int64_t> shuffle(ix.shuffle_index);
  if (ix.separate_final_epoch) {
    rng.shuffle(shuffle.subspan(0, static_cast<size_t>(samples_sans_final_epoch)));
    rng.shuffle(shuffle.subspan(static_cast<size_t>(samples_sans_final_epoch)));
  } else {
    rng.shuffle(shuffle);
  }
  return ix;
}

GptDataset::GptDataset(std::shared_ptr<const TokenSource> source, int64_t begin, int64_t end,
                       std::optional<int64_t> num_samples, Split split, const GptDatasetConfig& cfg)
    : source_(std::move(source)), cfg_(cfg) {
  cfg_.validate("GptDataset");
  const std::vector<int32_t> lengths = source_->sequence_lengths();
  indices_ = build_gpt_indices(lengths, begin, end, num_samples, split, cfg_, source_->description());
  description_ = fmt::format(
      "GPTDataset(source={}, split={}, sequences=[{}, {}), num_samples={}, sequence_length={}, seed={}, "
      "add_extra_token={}, drop_last_partial_validation_sequence={}, size={})",
      source_->description(), split_name(split), begin, end, num_samples ? std::to_string(*num_samples) : "None",
      cfg_.sequence_length, cfg_.seed, cfg_.add_extra_token, cfg_.drop_last_partial_validation_sequence, size());
}

void GptDataset::sample(int64_t i, int64_t* out) const {
  NM_CHECK(i >= 0 && i < size(), "sample {} of {}", i, size());
  const int64_t x = cfg_.add_extra_token ? 1 : 0;
  const int64_t j = indices_.shuffle_index[i];
  const int64_t d0 = indices_.sample_index[2 * j], o0 = indices_.sample_index[2 * j + 1];
  const int64_t d1 = indices_.sample_index[2 * j + 2], o1 = indices_.sample_index[2 * j + 3];
  const int64_t want = sample_length();
  int64_t n = 0;
  for (int64_t d = d0; d <= d1; ++d) {
    const int64_t seq = indices_.document_index[d];
    const int64_t offset = d == d0 ? o0 : 0;
    const int64_t length = d == d1 ? o1 + x - offset : source_->sequence_length(seq) - offset;
    NM_CHECK(length >= 0 && n + length <= want, "sample {} part of {} tokens at {}", i, length, n);
    source_->read(seq, offset, length, out + n);
    n += length;
  }
  for (; n < want; ++n) out[n] = kPadTokenId;
}

}  // namespace nemotron::data
