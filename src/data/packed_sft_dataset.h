// The packed SFT rows of one split directory (splits/train, splits/valid: every *.parquet / *.pq,
// sorted by name, links followed) and how a row becomes a training micro-batch, as
// Megatron-Bridge's GPTSFTPackedDataset does it (reference/data-formats.md §6.8):
//  * sub-sequence [s, e) of a row gives inputs ids[s, e-1), labels ids[s+1, e), loss mask
//    loss_mask[s, e-1) (already shifted by data prep), positions 0 .. e-s-2;
//  * the row is padded to T = pack_size with the pad id (EOS) for tokens and labels, mask 0 and
//    position 0; the padding is one more segment;
//  * seq_idx [B, T] numbers the segments of each row from 0, so attention and the Mamba state
//    (conv1d, SSD scan) can be reset at every boundary; cu_seqlens gives the same boundaries.
// Sample order: max_num_samples rows from ceil(max_num_samples / rows) epochs, each epoch a
// permutation by numpy's legacy RandomState(seed) shuffle, epochs concatenated and truncated.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "io/packed_parquet.h"

namespace nemotron::data {

struct PackedSftMicroBatch {
  int64_t B = 0, T = 0;
  std::vector<int32_t> tokens, labels;  // [B, T]
  std::vector<float> loss_mask;         // [B, T], 1 = the label at this position is trained
  std::vector<int32_t> position_ids;    // [B, T], from 0 in every segment; 0 on padding
  std::vector<int32_t> seq_idx;         // [B, T], segment id within the row (padding = the last id)
  std::vector<std::vector<int32_t>> cu_seqlens;  // per row: 0, L1-1, L1-1+L2-1, ..., T
};

class PackedSftDataset {
 public:
  // InputError naming the directory when it holds no shard, or a shard when it is malformed or a
  // row is longer than pack_size.
  PackedSftDataset(const std::string& dir, int64_t pack_size, int32_t pad_id);

  int64_t num_rows() const { return static_cast<int64_t>(rows_.size()); }
  int64_t pack_size() const { return pack_size_; }
  const io::PackedRow& row(int64_t i) const { return rows_.at(static_cast<size_t>(i)); }
  const std::vector<std::string>& files() const { return files_; }

  // Row indices in training order (see above); seed as Bridge's default, 1234.
  std::vector<int64_t> sample_order(int64_t max_num_samples, uint32_t seed = 1234) const;

  // The micro-batch of the given rows, B = rows.size(), T = pack_size.
  PackedSftMicroBatch collate(std::span<const int64_t> rows) const;

 private:
  int64_t pack_size_;
  int32_t pad_id_;
  std::vector<std::string> files_;
  std::vector<io::PackedRow> rows_;
};

// collate() of one row, written at row b of `mb` (which must be sized B x T already).
void collate_packed_row(const io::PackedRow& row, int32_t pad_id, int64_t b, PackedSftMicroBatch& mb);

}  // namespace nemotron::data
