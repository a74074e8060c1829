#include "data/sft_packing.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "data/python_random.h"

namespace nemotron::data {

namespace {

// First fit over bins opened on demand: a max tree of free space, leaves = bins (-1 = not open).
class FirstFit {
 public:
  FirstFit(size_t max_bins, int64_t capacity) : capacity_(capacity) {
    while (leaves_ < std::max<size_t>(max_bins, 1)) leaves_ *= 2;
    tree_.assign(2 * leaves_, -1);
  }
  // Index of the bin the item goes to (a new one when none has room).
  size_t place(int64_t length) {
    size_t bin;
    if (tree_[1] >= length) {
      size_t node = 1;
      while (node < leaves_) node = tree_[2 * node] >= length ? 2 * node : 2 * node + 1;
      bin = node - leaves_;
    } else {
      bin = open_++;
      set(bin, capacity_);
    }
    set(bin, tree_[leaves_ + bin] - length);
    return bin;
  }

 private:
  void set(size_t bin, int64_t free) {
    size_t node = leaves_ + bin;
    tree_[node] = free;
    for (node /= 2; node >= 1; node /= 2) tree_[node] = std::max(tree_[2 * node], tree_[2 * node + 1]);
  }
  int64_t capacity_;
  size_t leaves_ = 1, open_ = 0;
  std::vector<int64_t> tree_;
};

std::vector<std::vector<int64_t>> first_fit(std::span<const std::pair<int64_t, int64_t>> order, int64_t pack_size) {
  FirstFit ff(order.size(), pack_size);
  std::vector<std::vector<int64_t>> bins;
  for (const auto& [length, index] : order) {
    const size_t b = ff.place(std::min(length, pack_size));
    if (b == bins.size()) bins.emplace_back();
    bins[b].push_back(index);
  }
  return bins;
}

}  // namespace

std::optional<PackingAlgorithm> packing_algorithm_from_name(std::string_view name) {
  if (name == "first_fit_shuffle") return PackingAlgorithm::first_fit_shuffle;
  if (name == "first_fit_decreasing") return PackingAlgorithm::first_fit_decreasing;
  if (name == "concatenative") return PackingAlgorithm::concatenative;
  return std::nullopt;
}

const char* packing_algorithm_name(PackingAlgorithm a) {
  switch (a) {
    case PackingAlgorithm::first_fit_shuffle: return "first_fit_shuffle";
    case PackingAlgorithm::first_fit_decreasing: return "first_fit_decreasing";
    case PackingAlgorithm::concatenative: return "concatenative";
  }
  return "?";
}

std::vector<std::vector<int64_t>> pack_sequences(std::span<const int64_t> lengths, int64_t pack_size,
                                                 PackingAlgorithm algorithm, uint64_t seed) {
  NM_CHECK(pack_size > 0, "pack_size must be positive");
  std::vector<std::pair<int64_t, int64_t>> order;
  for (size_t i = 0; i < lengths.size(); ++i) order.emplace_back(lengths[i], static_cast<int64_t>(i));
  switch (algorithm) {
    case PackingAlgorithm::first_fit_shuffle:
      PythonRandom(seed).shuffle(std::span<std::pair<int64_t, int64_t>>(order));
      return first_fit(order, pack_size);
    case PackingAlgorithm::first_fit_decreasing:
      std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
      return first_fit(order, pack_size);
    case PackingAlgorithm::concatenative: {
      std::vector<std::vector<int64_t>> bins;
      int64_t used = 0;
      for (const auto& [length, index] : order) {
        const int64_t l = std::min(length, pack_size);
        if (bins.empty() || used + l > pack_size) bins.emplace_back(), used = 0;
        bins.back().push_back(index);
        used += l;
      }
      return bins;
    }
  }
  return {};
}

io::PackedRow materialize_bin(std::span<const MaskedSequence> sequences, std::span<const int64_t> bin, int64_t pack_size) {
  io::PackedRow row;
  for (int64_t index : bin) {
    const MaskedSequence& s = sequences[static_cast<size_t>(index)];
    const size_t n = std::min(s.input_ids.size(), static_cast<size_t>(pack_size));
    if (n == 0) continue;
    row.seq_start_id.push_back(static_cast<int32_t>(row.input_ids.size()));
    row.input_ids.insert(row.input_ids.end(), s.input_ids.begin(), s.input_ids.begin() + static_cast<std::ptrdiff_t>(n));
    // aligned[j] = mask[j + 1] inside the sequence; its last token trains nothing.
    for (size_t j = 0; j + 1 < n; ++j) row.loss_mask.push_back(s.loss_mask[j + 1]);
    row.loss_mask.push_back(0);
  }
  return row;
}

}  // namespace nemotron::data
