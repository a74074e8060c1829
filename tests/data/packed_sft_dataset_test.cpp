// A packed row becomes a micro-batch as Megatron-Bridge's GPTSFTPackedDataset.collate_fn builds it
// (reference/data-formats.md §6.8), plus seq_idx; split directories are read in name order; the
// sample order is numpy's (the first epoch of 50 rows is numpy 2.5.2's RandomState(1234).shuffle of
// arange(50), from tests/fixtures/megatron/numpy_vectors.json "sequential_shuffles").
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "data/packed_sft_dataset.h"
#include "data_test_util.h"

namespace nemotron::data {
namespace {

namespace fs = std::filesystem;

io::PackedRow two_sequences() {
  // [10 11 12] and [20 21 22 23]; mask already shifted (label 11 and 12 trained; 22 and 23 trained).
  return {{10, 11, 12, 20, 21, 22, 23}, {1, 1, 0, 0, 1, 1, 0}, {0, 3}};
}

void write_shard(const std::string& path, const std::vector<io::PackedRow>& rows) {
  io::PackedParquetWriter w(path);
  for (const auto& r : rows) w.add(r);
  w.close();
}

TEST(PackedSftDataset, collate_follows_bridge_and_numbers_segments) {
  PackedSftMicroBatch mb;
  mb.B = 1, mb.T = 8;
  mb.tokens.assign(8, -7), mb.labels.assign(8, -7), mb.position_ids.assign(8, -7), mb.seq_idx.assign(8, -7);
  mb.loss_mask.assign(8, -7.0f);
  mb.cu_seqlens.resize(1);
  collate_packed_row(two_sequences(), 99, 0, mb);
  EXPECT_EQ(mb.tokens, (std::vector<int32_t>{10, 11, 20, 21, 22, 99, 99, 99}));
  EXPECT_EQ(mb.labels, (std::vector<int32_t>{11, 12, 21, 22, 23, 99, 99, 99}));
  EXPECT_EQ(mb.loss_mask, (std::vector<float>{1, 1, 0, 1, 1, 0, 0, 0}));
  EXPECT_EQ(mb.position_ids, (std::vector<int32_t>{0, 1, 0, 1, 2, 0, 0, 0}));
  EXPECT_EQ(mb.seq_idx, (std::vector<int32_t>{0, 0, 1, 1, 1, 2, 2, 2}));
  EXPECT_EQ(mb.cu_seqlens[0], (std::vector<int32_t>{0, 2, 5, 8}));
}

TEST(PackedSftDataset, reads_a_split_directory_in_name_order_and_batches_rows) {
  const std::string dir = testing::temp_dir();
  io::PackedRow one = {{1, 2, 3}, {1, 1, 0}, {0}};
  write_shard(dir + "/000001__a__shard_000000.parquet", {one});
  write_shard(dir + "/000000__a__shard_000001.parquet", {two_sequences(), two_sequences()});
  testing::write_text(dir + "/notes.txt", "not a shard");
  PackedSftDataset ds(dir, 8, 0);
  ASSERT_EQ(ds.num_rows(), 3);
  EXPECT_EQ(ds.row(0).input_ids, two_sequences().input_ids);
  EXPECT_EQ(ds.row(2).input_ids, one.input_ids);
  const std::vector<int64_t> rows = {2, 0};
  PackedSftMicroBatch mb = ds.collate(rows);
  EXPECT_EQ(mb.B, 2);
  EXPECT_EQ(mb.T, 8);
  EXPECT_EQ(std::vector<int32_t>(mb.tokens.begin(), mb.tokens.begin() + 8), (std::vector<int32_t>{1, 2, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(std::vector<int32_t>(mb.seq_idx.begin(), mb.seq_idx.begin() + 8), (std::vector<int32_t>{0, 0, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(std::vector<int32_t>(mb.tokens.begin() + 8, mb.tokens.end()), (std::vector<int32_t>{10, 11, 20, 21, 22, 0, 0, 0}));
  EXPECT_EQ(mb.cu_seqlens[0], (std::vector<int32_t>{0, 2, 8}));
}

TEST(PackedSftDataset, sample_order_is_numpy_epoch_shuffles) {
  const std::string dir = testing::temp_dir();
  std::vector<io::PackedRow> rows(50, io::PackedRow{{1, 2}, {1, 0}, {0}});
  write_shard(dir + "/shard.parquet", rows);
  PackedSftDataset ds(dir, 4, 0);
  const std::vector<int64_t> order = ds.sample_order(120);
  ASSERT_EQ(order.size(), 120u);
  EXPECT_EQ(std::vector<int64_t>(order.begin(), order.begin() + 50),
            (std::vector<int64_t>{37, 45, 6,  44, 13, 36, 8,  29, 4,  49, 21, 18, 10, 22, 31, 25, 14,
                                  17, 20, 43, 27, 1,  33, 48, 2,  32, 35, 39, 34, 0,  11, 7,  3,  46,
                                  9,  16, 5,  28, 42, 40, 30, 26, 41, 23, 15, 24, 12, 38, 19, 47}));
  // Each epoch is a permutation: sampling without replacement inside an epoch.
  const std::set<int64_t> second(order.begin() + 50, order.begin() + 100);
  EXPECT_EQ(second.size(), 50u);
}

TEST(PackedSftDataset, bad_directories_are_input_errors) {
  const std::string dir = testing::temp_dir();
  EXPECT_NE(testing::input_error([&] { PackedSftDataset(dir, 8, 0); }).find("no *.parquet shards"), std::string::npos);
  EXPECT_NE(testing::input_error([&] { PackedSftDataset(dir + "/missing", 8, 0); }).find("no such directory"), std::string::npos);
  write_shard(dir + "/shard.parquet", {two_sequences()});
  EXPECT_NE(testing::input_error([&] { PackedSftDataset(dir, 4, 0); }).find("more than pack_size 4"), std::string::npos);
}

}  // namespace
}  // namespace nemotron::data
