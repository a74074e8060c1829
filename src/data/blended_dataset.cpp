#include "data/blended_dataset.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "data/numpy_random.h"

namespace nemotron::data {

std::vector<double> normalize_weights(std::span<const double> weights) {
  const double sum = numpy_sum(weights);
  std::vector<double> out(weights.size());
  for (size_t i = 0; i < weights.size(); ++i) out[i] = weights[i] / sum;
  return out;
}

BlendingIndices build_blending_indices(std::span<const double> weights, int64_t size) {
  NM_CHECK(!weights.empty() && weights.size() < 32767, "{} datasets", weights.size());
  BlendingIndices out;
  out.dataset_index.resize(static_cast<size_t>(size));
  out.dataset_sample_index.resize(static_cast<size_t>(size));
  std::vector<int64_t> current(weights.size(), 0);
  for (int64_t s = 0; s < size; ++s) {
    const double s_double = std::max(static_cast<double>(s), 1.0);
    size_t best = 0;
    double best_error = weights[0] * s_double - static_cast<double>(current[0]);
    for (size_t k = 1; k < weights.size(); ++k) {
      const double error = weights[k] * s_double - static_cast<double>(current[k]);
      if (error > best_error) {
        best_error = error;
        best = k;
      }
    }
    out.dataset_index[s] = static_cast<int16_t>(best);
    out.dataset_sample_index[s] = current[best]++;
  }
  return out;
}

BlendingIndices build_exhaustive_blending_indices(std::span<const int64_t> sizes) {
  NM_CHECK(!sizes.empty() && sizes.size() < 32767, "{} datasets", sizes.size());
  int64_t total = 0;
  for (int64_t n : sizes) total += n;
  std::vector<double> weights(sizes.size());
  std::vector<size_t> unspent;
  for (size_t k = 0; k < sizes.size(); ++k) {
    weights[k] = static_cast<double>(sizes[k]) / static_cast<double>(total);
    if (sizes[k] > 0) unspent.push_back(k);
  }
  BlendingIndices out;
  out.dataset_index.reserve(static_cast<size_t>(total));
  out.dataset_sample_index.reserve(static_cast<size_t>(total));
  std::vector<int64_t> counts(sizes.size(), 0);
  for (int64_t s = 0; !unspent.empty(); ++s) {
    const double s_double = std::max(static_cast<double>(s), 1.0);
    size_t best_at = 0;
    double best_error = std::numeric_limits<double>::lowest();
    for (size_t u = 0; u < unspent.size(); ++u) {
      const size_t k = unspent[u];
      const double error = weights[k] * s_double - static_cast<double>(counts[k]);
      if (error > best_error) {
        best_error = error;
        best_at = u;
      }
    }
    const size_t best = unspent[best_at];
    out.dataset_index.push_back(static_cast<int16_t>(best));
    out.dataset_sample_index.push_back(counts[best]++);
    if (counts[best] == sizes[best]) unspent.erase(unspent.begin() + static_cast<long>(best_at));
  }
  return out;
}

std::vector<int64_t> samples_per_dataset(std::span<const double> normalized_weights, int64_t size, double surplus) {
  std::vector<int64_t> out;
  for (double w : normalized_weights)
    out.push_back(static_cast<int64_t>(std::ceil(std::ceil(static_cast<double>(size) * w) * (1.0 + surplus))));
  return out;
}

BlendedDataset::BlendedDataset(std::vector<std::shared_ptr<const SampleDataset>> datasets,
                               std::vector<double> weights, std::optional<int64_t> size)
    : datasets_(std::move(datasets)) {
  NM_CHECK(!datasets_.empty() && datasets_.size() == weights.size(), "{} datasets, {} weights", datasets_.size(),
           weights.size());
  for (const auto& d : datasets_)
    NM_CHECK(d->sample_length() == datasets_[0]->sample_length(), "blend of sample lengths {} and {}",
             d->sample_length(), datasets_[0]->sample_length());
  for (size_t k = 0; k < weights.size(); ++k)
    if (!(weights[k] > 0) || !std::isfinite(weights[k]))
      throw InputError(fmt::format("blend: dataset {} ({}) has weight {}; every weight must be positive (a dataset "
                                   "weighted by its size must hold at least one sample)",
                                   k, datasets_[k]->description(), weights[k]));
  weights_ = normalize_weights(weights);
  if (size) {
    indices_ = build_blending_indices(weights_, *size);
  } else {
    std::vector<int64_t> sizes;
    for (const auto& d : datasets_) sizes.push_back(d->size());
    indices_ = build_exhaustive_blending_indices(sizes);
  }
  std::vector<int64_t> needed(datasets_.size(), 0);
  for (size_t s = 0; s < indices_.dataset_index.size(); ++s) {
    auto k = static_cast<size_t>(indices_.dataset_index[s]);
    needed[k] = std::max(needed[k], indices_.dataset_sample_index[s] + 1);
  }
  description_ = fmt::format("BlendedDataset(size={}, weights=[", this->size());
  for (size_t k = 0; k < datasets_.size(); ++k) {
    if (needed[k] > datasets_[k]->size())
      throw InputError(fmt::format("blend: dataset {} ({}) holds {} samples, the blend draws {} from it; raise "
                                   "mid_level_dataset_surplus",
                                   k, datasets_[k]->description(), datasets_[k]->size(), needed[k]));
    description_ += fmt::format("{}{}", k ? ", " : "", weights_[k]);
  }
  description_ += "], datasets=[";
  for (size_t k = 0; k < datasets_.size(); ++k) description_ += (k ? ", " : "") + datasets_[k]->description();
  description_ += "])";
}

void BlendedDataset::sample(int64_t i, int64_t* out) const {
  NM_CHECK(i >= 0 && i < size(), "sample {} of {}", i, size());
  datasets_[static_cast<size_t>(indices_.dataset_index[i])]->sample(indices_.dataset_sample_index[i], out);
}

}  // namespace nemotron::data
