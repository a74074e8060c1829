#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "data/gpt_dataset.h"
#include "data/mock_dataset.h"
#include "data/numpy_random.h"
#include "data_test_util.h"

namespace nemotron::data {
namespace {

using testing::input_error;

// Sequences held in memory; token j of sequence i is 1000 * i + j, so any token names its origin.
class VectorSource : public TokenSource {
 public:
  explicit VectorSource(std::vector<int32_t> lengths) : lengths_(std::move(lengths)) {}
  int64_t num_sequences() const override { return static_cast<int64_t>(lengths_.size()); }
  int64_t sequence_length(int64_t i) const override { return lengths_[i]; }
  std::vector<int32_t> sequence_lengths() const override { return lengths_; }
  void read(int64_t i, int64_t offset, int64_t length, int64_t* out) const override {
    ASSERT_LE(offset + length, lengths_[i]);
    for (int64_t j = 0; j < length; ++j) out[j] = 1000 * i + offset + j;
  }
  std::string description() const override { return "vector"; }

 private:
  std::vector<int32_t> lengths_;
};

GptDatasetConfig config(int64_t L, uint32_t seed = 1234) {
  GptDatasetConfig c;
  c.sequence_length = L;
  c.seed = seed;
  return c;
}

// The property that defines the sample index: unshuffled sample s is the token stream of the
// document index (sequences concatenated in that order), from s * L, L + x tokens long.
void expect_samples_tile_the_stream(const GptDataset& ds, const VectorSource& src, const GptDatasetConfig& cfg) {
  std::vector<int64_t> stream;
  for (int32_t id : ds.indices().document_index)
    for (int64_t j = 0; j < src.sequence_length(id); ++j) stream.push_back(1000 * id + j);
  const int64_t L = cfg.sequence_length, n = ds.sample_length();
  std::vector<int64_t> text(n);
  std::vector<int64_t> seen(ds.size(), 0);
  for (int64_t i = 0; i < ds.size(); ++i) {
    ds.sample(i, text.data());
    const int64_t s = ds.indices().shuffle_index[i];
    ++seen[s];
    for (int64_t t = 0; t < n; ++t) {
      const int64_t at = s * L + t;
      const int64_t expect = at < static_cast<int64_t>(stream.size()) ? stream[at] : kPadTokenId;
      ASSERT_EQ(text[t], expect) << "sample " << i << " (unshuffled " << s << ") token " << t;
    }
  }
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int64_t c) { return c == 1; })) << "shuffle is a permutation";
}

TEST(GptIndices, one_epoch_document_order_is_numpy_permutation_of_the_split) {
  // Megatron's first draw from RandomState(seed) shuffles the split's sequence ids; for ten ids
  // and seed 0 that is numpy.random.RandomState(0).permutation(10) = [2 8 4 9 1 6 7 3 0 5].
  std::vector<int32_t> lengths(15, 7);
  GptIndices ix = build_gpt_indices(lengths, 5, 15, std::nullopt, Split::train, config(4, 0), "t");
  EXPECT_EQ(ix.num_epochs, 1);
  EXPECT_EQ(ix.document_index, (std::vector<int32_t>{7, 13, 9, 14, 6, 11, 12, 8, 5, 10}));
  EXPECT_EQ(ix.tokens_per_epoch, 70);
  EXPECT_EQ(ix.num_samples(), (70 - 1) / 4);
}

TEST(GptIndices, sample_index_by_hand) {
  // Sequences of 5, 3 and 4 tokens, L = 4, x = 1, in document order [0, 1, 2] (built directly).
  const std::vector<int32_t> lengths = {5, 3, 4};
  const std::vector<int32_t> order = {0, 1, 2};
  // Tokens 12 -> floor((12 - 1) / 4) = 2 samples: [0..5) from seq 0, then [4, 5) of seq 0 + seq 1 + 1 of seq 2.
  EXPECT_EQ(build_sample_index(lengths, order, 4, 1, 12, true, 1), (std::vector<int64_t>{0, 0, 0, 4, 2, 0}));
  // Keeping the partial last sample (valid split): ceil(11 / 4) = 3; the data runs out at seq 2, offset 4 - 1.
  EXPECT_EQ(build_sample_index(lengths, order, 4, 1, 12, false, 1), (std::vector<int64_t>{0, 0, 0, 4, 2, 0, 2, 3}));
  // Without the extra token samples do not overlap: 12 / 4 = 3 samples ending at seq 0 offset 4,
  // seq 1 offset 3 (its end) and seq 2 offset 4.
  EXPECT_EQ(build_sample_index(lengths, order, 4, 1, 12, true, 0), (std::vector<int64_t>{0, 0, 0, 4, 1, 3, 2, 4}));
}

TEST(GptIndices, epochs_and_separate_final_epoch_follow_the_80_percent_rule) {
  const std::vector<int32_t> lengths(10, 10);  // 100 tokens per epoch
  // N = 30, L = 8: 241 tokens -> 3 epochs; 24 samples before the last epoch, 6 from it, 6 < int(0.8 * 12).
  GptIndices a = build_gpt_indices(lengths, 0, 10, 30, Split::train, config(8), "t");
  EXPECT_EQ(a.num_epochs, 3);
  EXPECT_TRUE(a.separate_final_epoch);
  EXPECT_EQ(a.num_samples(), (300 - 1) / 8);
  // The last epoch's documents are shuffled on their own, and so are the samples after the first 24.
  std::vector<int32_t> last(a.document_index.begin() + 20, a.document_index.end());
  std::sort(last.begin(), last.end());
  EXPECT_EQ(last, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  std::vector<int64_t> first(a.shuffle_index.begin(), a.shuffle_index.begin() + 24);
  std::sort(first.begin(), first.end());
  for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(first[i], i);
  // N = 22: 177 tokens -> 2 epochs; 10 samples from the last epoch, not < 9: one shuffle.
  GptIndices b = build_gpt_indices(lengths, 0, 10, 22, Split::train, config(8), "t");
  EXPECT_EQ(b.num_epochs, 2);
  EXPECT_FALSE(b.separate_final_epoch);
  // Without separation the draws are: one shuffle of the 20 document slots, one of the samples.
  NumpyRandomState rs(1234);
  std::vector<int32_t> docs(20);
  for (int i = 0; i < 20; ++i) docs[i] = i % 10;
  rs.shuffle(std::span<int32_t>(docs));
  EXPECT_EQ(b.document_index, docs);
  std::vector<int64_t> shuffle(b.num_samples());
  std::iota(shuffle.begin(), shuffle.end(), 0);
  rs.shuffle(std::span<int64_t>(shuffle));
  EXPECT_EQ(b.shuffle_index, shuffle);
}

TEST(GptDataset, samples_tile_the_shuffled_stream_and_overlap_by_one_token) {
  Philox rng(3);
  std::vector<int32_t> lengths;
  for (int i = 0; i < 40; ++i) lengths.push_back(static_cast<int32_t>(rng.bits(i) % 30));  // includes empty ones
  auto src = std::make_shared<VectorSource>(lengths);
  for (int64_t L : {2, 7, 64}) {
    for (std::optional<int64_t> n : {std::optional<int64_t>(), std::optional<int64_t>(5),
                                     std::optional<int64_t>(200)}) {
      GptDatasetConfig cfg = config(L, 99);
      GptDataset ds(src, 3, 37, n, Split::train, cfg);
      if (n) {
        EXPECT_GE(ds.size(), *n);
      }
      expect_samples_tile_the_stream(ds, *src, cfg);
    }
  }
}

TEST(GptDataset, without_the_extra_token_samples_do_not_overlap) {
  auto src = std::make_shared<VectorSource>(std::vector<int32_t>{9, 4, 12, 1, 8});
  GptDatasetConfig cfg = config(5);
  cfg.add_extra_token = false;
  GptDataset ds(src, 0, 5, 9, Split::train, cfg);
  EXPECT_EQ(ds.sample_length(), 5);
  expect_samples_tile_the_stream(ds, *src, cfg);
}

TEST(GptDataset, valid_split_can_keep_a_padded_partial_last_sample) {
  auto src = std::make_shared<VectorSource>(std::vector<int32_t>{5, 3, 4});
  GptDatasetConfig cfg = config(4);
  EXPECT_EQ(GptDataset(src, 0, 3, std::nullopt, Split::valid, cfg).size(), 2);
  cfg.drop_last_partial_validation_sequence = false;
  GptDataset keep(src, 0, 3, std::nullopt, Split::valid, cfg);
  EXPECT_EQ(keep.size(), 3);
  expect_samples_tile_the_stream(keep, *src, cfg);  // the tail past the data is kPadTokenId
  // Only the valid split keeps it.
  EXPECT_EQ(GptDataset(src, 0, 3, std::nullopt, Split::train, cfg).size(), 2);
}

TEST(GptDataset, same_seed_same_order_other_seed_other_order) {
  auto src = std::make_shared<VectorSource>(std::vector<int32_t>(50, 9));
  GptDataset a(src, 0, 50, std::nullopt, Split::train, config(8, 1));
  GptDataset b(src, 0, 50, std::nullopt, Split::train, config(8, 1));
  GptDataset c(src, 0, 50, std::nullopt, Split::train, config(8, 2));
  EXPECT_EQ(a.indices().shuffle_index, b.indices().shuffle_index);
  EXPECT_EQ(a.indices().document_index, b.indices().document_index);
  EXPECT_NE(a.indices().shuffle_index, c.indices().shuffle_index);
}

TEST(GptDataset, a_split_without_tokens_is_an_input_error) {
  auto src = std::make_shared<VectorSource>(std::vector<int32_t>{5, 0, 0, 4});
  EXPECT_EQ(input_error([&] { GptDataset(src, 1, 3, 10, Split::valid, config(4)); }),
            "vector: the valid split (sequences [1, 3)) holds 0 tokens; at least 2 are needed to build samples");
  EXPECT_EQ(input_error([&] { GptDataset(src, 0, 4, 10, Split::train, config(1)); }),
            "GptDataset: sequence_length: expected an integer >= 2, got 1");
}

TEST(MockTokenSource, deterministic_counting_documents_ending_in_eod) {
  MockConfig m;
  m.vocab_size = 50;
  m.eod_id = 7;
  m.num_sequences = 200;
  m.max_sequence_length = 64;
  m.seed = 5;
  MockTokenSource a(m), b(m);
  EXPECT_EQ(a.sequence_lengths(), b.sequence_lengths());
  m.seed = 6;
  EXPECT_NE(a.sequence_lengths(), MockTokenSource(m).sequence_lengths());
  for (int64_t i = 0; i < a.num_sequences(); ++i) {
    const int64_t n = a.sequence_length(i);
    ASSERT_GE(n, 1);
    ASSERT_LE(n, 63);
    std::vector<int64_t> t(n);
    a.read(i, 0, n, t.data());
    EXPECT_EQ(t.back(), 7);
    for (int64_t j = 0; j + 1 < n; ++j) {
      ASSERT_NE(t[j], 7);
      ASSERT_GE(t[j], 0);
      ASSERT_LT(t[j], 50);
      if (j > 0) {  // counting upwards through the ids other than EOD
        const int64_t prev = t[j - 1] < 7 ? t[j - 1] : t[j - 1] - 1, cur = t[j] < 7 ? t[j] : t[j] - 1;
        ASSERT_EQ(cur, (prev + 1) % 49);
      }
    }
    if (n > 3) {  // partial reads agree with whole reads
      std::vector<int64_t> part(2);
      a.read(i, 1, 2, part.data());
      EXPECT_EQ(part[0], t[1]);
      EXPECT_EQ(part[1], t[2]);
    }
  }
  m.eod_id = 50;
  EXPECT_EQ(input_error([&] { MockTokenSource{m}; }),
            "mock.eod_id: expected an id in [0, 50) (vocab_size 50), got 50");
}

}  // namespace
}  // namespace nemotron::data
