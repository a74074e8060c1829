// Packing against Nemotron's packing/algorithms.py (the expected bins were printed by its
// get_packer(algo, 50, seed=42).pack(lengths)), and the §6.5 shift rule of a materialized bin.
#include <gtest/gtest.h>

#include <vector>

#include "data/python_format.h"
#include "data/sft_packing.h"
#include "data/sft_prep.h"

namespace nemotron::data {
namespace {

using Bins = std::vector<std::vector<int64_t>>;

const std::vector<int64_t> kLengths = {21, 10, 26, 4,  5,  35, 7,  24, 38, 4, 33, 14, 3,  6,  28, 27,
                                       5,  16, 6,  36, 28, 4,  37, 8,  15, 38, 4, 37, 38, 26, 55};

TEST(SftPacking, first_fit_shuffle_matches_nemotron) {
  EXPECT_EQ(pack_sequences(kLengths, 50, PackingAlgorithm::first_fit_shuffle, 42),
            (Bins{{19, 6, 12, 9}, {14, 24, 26}, {10, 11}, {27, 16, 13}, {5, 1, 21}, {15, 18, 17}, {30}, {22, 4, 23},
                  {28, 3}, {2, 7}, {29, 0}, {25}, {8}, {20}}));
}

TEST(SftPacking, first_fit_decreasing_matches_nemotron) {
  EXPECT_EQ(pack_sequences(kLengths, 50, PackingAlgorithm::first_fit_decreasing, 42),
            (Bins{{30}, {8, 1}, {25, 23, 3}, {28, 6, 4}, {22, 13, 18}, {27, 16, 9, 21}, {19, 11}, {5, 24}, {10, 17},
                  {14, 0}, {20, 26, 12}, {15}, {2, 7}, {29}}));
}

TEST(SftPacking, concatenative_matches_nemotron) {
  EXPECT_EQ(pack_sequences(kLengths, 50, PackingAlgorithm::concatenative, 42),
            (Bins{{0, 1}, {2, 3, 4}, {5, 6}, {7}, {8, 9}, {10, 11, 12}, {13, 14}, {15, 16, 17}, {18, 19}, {20, 21},
                  {22, 23}, {24}, {25, 26}, {27}, {28}, {29}, {30}}));
}

TEST(SftPacking, bins_never_overflow_and_hold_every_sequence_once) {
  std::vector<int64_t> lengths;
  for (int i = 0; i < 5000; ++i) lengths.push_back(1 + (i * 7919) % 300);
  for (PackingAlgorithm a : {PackingAlgorithm::first_fit_shuffle, PackingAlgorithm::first_fit_decreasing,
                             PackingAlgorithm::concatenative}) {
    const Bins bins = pack_sequences(lengths, 256, a, 3);
    std::vector<int> seen(lengths.size(), 0);
    for (const auto& b : bins) {
      int64_t used = 0;
      for (int64_t i : b) used += std::min<int64_t>(lengths[static_cast<size_t>(i)], 256), ++seen[static_cast<size_t>(i)];
      EXPECT_LE(used, 256) << packing_algorithm_name(a);
    }
    for (int s : seen) ASSERT_EQ(s, 1) << packing_algorithm_name(a);
  }
}

TEST(SftPacking, materialized_bin_shifts_the_mask_inside_each_sequence) {
  std::vector<MaskedSequence> seqs = {
      {{10, 11, 12, 13}, {0, 0, 1, 1}},
      {{20, 21, 22}, {0, 1, 1}},
      {{30, 31, 32, 33, 34, 35}, {0, 0, 0, 1, 1, 1}},  // truncated to pack_size 5
  };
  const std::vector<int64_t> bin = {1, 0};
  io::PackedRow row = materialize_bin(seqs, bin, 8);
  EXPECT_EQ(row.input_ids, (std::vector<int32_t>{20, 21, 22, 10, 11, 12, 13}));
  // Sequence [20 21 22] mask 0 1 1 -> 1 1 0; [10 11 12 13] mask 0 0 1 1 -> 0 1 1 0: no bleed.
  EXPECT_EQ(row.loss_mask, (std::vector<uint8_t>{1, 1, 0, 0, 1, 1, 0}));
  EXPECT_EQ(row.seq_start_id, (std::vector<int32_t>{0, 3}));
  const std::vector<int64_t> big = {2};
  io::PackedRow t = materialize_bin(seqs, big, 5);
  EXPECT_EQ(t.input_ids, (std::vector<int32_t>{30, 31, 32, 33, 34}));
  EXPECT_EQ(t.loss_mask, (std::vector<uint8_t>{0, 0, 1, 1, 0}));
}

TEST(SftPacking, split_counts_follow_the_ratios) {
  EXPECT_EQ(sft_split_counts(2, 0.01, 0.01), (std::array<int64_t, 3>{2, 0, 0}));
  EXPECT_EQ(sft_split_counts(8, 0.01, 0.01), (std::array<int64_t, 3>{6, 1, 1}));
  EXPECT_EQ(sft_split_counts(100, 0.05, 0.0), (std::array<int64_t, 3>{95, 5, 0}));
  EXPECT_EQ(sft_split_counts(3, 0.5, 0.5), (std::array<int64_t, 3>{1, 1, 1}));
  // Python rounds half to even: round(2.5) = 2.
  EXPECT_EQ(sft_split_counts(10, 0.25, 0.0), (std::array<int64_t, 3>{8, 2, 0}));
}

TEST(PythonFormat, str_repr_and_dumps_match_python) {
  EXPECT_EQ(python_float_repr(1.0), "1.0");
  EXPECT_EQ(python_float_repr(2.5), "2.5");
  EXPECT_EQ(python_float_repr(1e16), "1e+16");
  EXPECT_EQ(python_float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(python_float_repr(0.00001), "1e-05");
  EXPECT_EQ(python_float_repr(-123.456), "-123.456");
  EXPECT_EQ(python_float_repr(1.5e-7), "1.5e-07");
  EXPECT_EQ(python_float_repr(0.1 + 0.2), "0.30000000000000004");
  const OrderedJson v = OrderedJson::parse(R"({"b": [1, 2.0, true, null, "x'y"], "a": "it's \"q\"\n"})");
  EXPECT_EQ(python_json_dumps(v), R"({"b": [1, 2.0, true, null, "x'y"], "a": "it's \"q\"\n"})");
  EXPECT_EQ(python_str(v), R"({'b': [1, 2.0, True, None, "x'y"], 'a': 'it\'s "q"\n'})");
  EXPECT_EQ(python_str(OrderedJson(nullptr)), "None");
  EXPECT_EQ(python_strip(" \t\n a b \xc2\xa0\xe3\x80\x80"), "a b");
  EXPECT_EQ(python_strip("\xe2\x80\x8b"), "\xe2\x80\x8b");  // U+200B is not whitespace in Python
}

}  // namespace
}  // namespace nemotron::data
