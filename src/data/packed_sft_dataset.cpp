#include "data/packed_sft_dataset.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "data/numpy_random.h"

namespace nemotron::data {

namespace fs = std::filesystem;

PackedSftDataset::PackedSftDataset(const std::string& dir, int64_t pack_size, int32_t pad_id)
    : pack_size_(pack_size), pad_id_(pad_id) {
  if (pack_size <= 0) throw InputError(fmt::format("{}: pack_size must be positive, got {}", dir, pack_size));
  if (!fs::is_directory(dir)) throw InputError(fmt::format("{}: no such directory of packed shards", dir));
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string ext = e.path().extension().string();
    if ((ext == ".parquet" || ext == ".pq") && fs::is_regular_file(e.path())) files_.push_back(e.path().string());
  }
  std::sort(files_.begin(), files_.end());
  if (files_.empty()) throw InputError(fmt::format("{}: no *.parquet shards", dir));
  for (const std::string& f : files_) {
    std::vector<io::PackedRow> rows = io::read_packed_parquet(f);
    for (size_t i = 0; i < rows.size(); ++i) {
      if (static_cast<int64_t>(rows[i].input_ids.size()) > pack_size)
        throw InputError(fmt::format("{}: row {}: {} tokens, more than pack_size {}", f, i, rows[i].input_ids.size(), pack_size));
      rows_.push_back(std::move(rows[i]));
    }
  }
  if (rows_.empty()) throw InputError(fmt::format("{}: the shards hold no rows", dir));
}

std::vector<int64_t> PackedSftDataset::sample_order(int64_t max_num_samples, uint32_t seed) const {
  const int64_t n = num_rows();
  const int64_t epochs = (max_num_samples + n - 1) / n;
  NumpyRandomState rng(seed);
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(epochs * n));
  for (int64_t e = 0; e < epochs; ++e) {
    std::vector<int64_t> epoch(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) epoch[static_cast<size_t>(i)] = i;
    rng.shuffle(std::span<int64_t>(epoch));
    out.insert(out.end(), epoch.begin(), epoch.end());
  }
  out.resize(static_cast<size_t>(std::max<int64_t>(max_num_samples, 0)));
  return out;
}

void collate_packed_row(const io::PackedRow& row, int32_t pad_id, int64_t b, PackedSftMicroBatch& mb) {
  const int64_t T = mb.T;
  const size_t base = static_cast<size_t>(b * T);
  const int64_t len = static_cast<int64_t>(row.input_ids.size());
  std::vector<int32_t> bounds(row.seq_start_id.begin(), row.seq_start_id.end());
  bounds.push_back(static_cast<int32_t>(len));
  std::vector<int32_t> cu = {0};
  int64_t t = 0;
  for (size_t k = 0; k + 1 < bounds.size(); ++k) {
    const int64_t s = bounds[k], e = bounds[k + 1];
    NM_CHECK(e - s - 1 <= T - t, "packed row longer than the micro-batch");
    for (int64_t j = s; j + 1 < e; ++j, ++t) {
      mb.tokens[base + static_cast<size_t>(t)] = row.input_ids[static_cast<size_t>(j)];
      mb.labels[base + static_cast<size_t>(t)] = row.input_ids[static_cast<size_t>(j + 1)];
      mb.loss_mask[base + static_cast<size_t>(t)] = row.loss_mask[static_cast<size_t>(j)] ? 1.0f : 0.0f;
      mb.position_ids[base + static_cast<size_t>(t)] = static_cast<int32_t>(j - s);
      mb.seq_idx[base + static_cast<size_t>(t)] = static_cast<int32_t>(k);
    }
    cu.push_back(static_cast<int32_t>(t));
  }
  const int32_t pad_segment = static_cast<int32_t>(bounds.size() - 1);
  for (; t < T; ++t) {
    mb.tokens[base + static_cast<size_t>(t)] = pad_id;
    mb.labels[base + static_cast<size_t>(t)] = pad_id;
    mb.loss_mask[base + static_cast<size_t>(t)] = 0.0f;
    mb.position_ids[base + static_cast<size_t>(t)] = 0;
    mb.seq_idx[base + static_cast<size_t>(t)] = pad_segment;
  }
  if (cu.back() != T) cu.push_back(static_cast<int32_t>(T));
  mb.cu_seqlens[static_cast<size_t>(b)] = std::move(cu);
}

PackedSftMicroBatch PackedSftDataset::collate(std::span<const int64_t> rows) const {
  PackedSftMicroBatch mb;
  mb.B = static_cast<int64_t>(rows.size());
  mb.T = pack_size_;
  const size_t n = static_cast<size_t>(mb.B * mb.T);
  mb.tokens.assign(n, 0), mb.labels.assign(n, 0), mb.position_ids.assign(n, 0), mb.seq_idx.assign(n, 0);
  mb.loss_mask.assign(n, 0.0f);
  mb.cu_seqlens.resize(rows.size());
  for (size_t b = 0; b < rows.size(); ++b) collate_packed_row(row(rows[b]), pad_id_, static_cast<int64_t>(b), mb);
  return mb;
}

}  // namespace nemotron::data
