#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "core/rng.h"
#include "data/indexed_dataset.h"
#include "data/indexed_dataset_builder.h"
#include "data_test_util.h"

namespace nemotron::data {
namespace {

using testing::input_error;
using testing::read_bytes;
using testing::temp_dir;
using testing::write_bytes;

// Three sequences in two documents plus an empty one:
//   doc 0 = seq 0 [5, 6, 7];  doc 1 = seq 1 [8] + seq 2 [];  doc 2 = (no sequences).
void write_small(const std::string& prefix, TokenDType dtype) {
  IndexedDatasetBuilder b(prefix, dtype);
  b.add_document(std::vector<int32_t>{5, 6, 7});
  b.add_item(std::vector<int32_t>{8});
  b.add_item(std::vector<int32_t>{});
  b.end_document();
  b.end_document();
  b.finalize();
}

std::vector<unsigned char> le(uint64_t v, int n) {
  std::vector<unsigned char> out;
  for (int i = 0; i < n; ++i) out.push_back(static_cast<unsigned char>(v >> (8 * i)));
  return out;
}

std::vector<unsigned char> cat(std::initializer_list<std::vector<unsigned char>> parts) {
  std::vector<unsigned char> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// The `.idx` of write_small, written out by hand from data-formats.md §1.2.
std::vector<unsigned char> hand_idx(uint8_t code, int item_bytes) {
  return cat({{'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0}, le(1, 8), {code}, le(3, 8), le(4, 8),
              le(3, 4), le(1, 4), le(0, 4),                                       // lengths
              le(0, 8), le(3 * item_bytes, 8), le(4 * item_bytes, 8),            // byte pointers
              le(0, 8), le(1, 8), le(3, 8), le(3, 8)});                           // document indices
}

TEST(IndexedDatasetBuilder, writes_megatron_layout_byte_for_byte_int32) {
  const std::string p = temp_dir() + "/small";
  write_small(p, TokenDType::i32);
  EXPECT_EQ(read_bytes(p + ".idx"), hand_idx(4, 4));
  EXPECT_EQ(read_bytes(p + ".bin"), cat({le(5, 4), le(6, 4), le(7, 4), le(8, 4)}));
  EXPECT_EQ(read_bytes(p + ".idx").size(), 34u + 12 * 3 + 8 * 4);
}

TEST(IndexedDatasetBuilder, writes_megatron_layout_byte_for_byte_uint16) {
  const std::string p = temp_dir() + "/small";
  write_small(p, TokenDType::u16);
  EXPECT_EQ(read_bytes(p + ".idx"), hand_idx(8, 2));
  EXPECT_EQ(read_bytes(p + ".bin"), cat({le(5, 2), le(6, 2), le(7, 2), le(8, 2)}));
}

TEST(IndexedDataset, reads_what_the_builder_wrote) {
  const std::string p = temp_dir() + "/small";
  write_small(p, TokenDType::u16);
  IndexedDataset ds = IndexedDataset::open(p);
  EXPECT_EQ(ds.dtype(), TokenDType::u16);
  EXPECT_EQ(ds.num_sequences(), 3);
  EXPECT_EQ(ds.num_documents(), 3);
  EXPECT_EQ(ds.num_tokens(), 4);
  EXPECT_EQ(ds.sequence_lengths(), (std::vector<int32_t>{3, 1, 0}));
  EXPECT_EQ(ds.document_indices(), (std::vector<int64_t>{0, 1, 3, 3}));
  EXPECT_EQ(ds.get(0), (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(ds.get(0, 1), (std::vector<int32_t>{6, 7}));
  EXPECT_EQ(ds.get(0, 1, 1), (std::vector<int32_t>{6}));
  EXPECT_EQ(ds.get(1), (std::vector<int32_t>{8}));
  EXPECT_TRUE(ds.get(2).empty());
  int64_t wide[2];
  ds.get(0, 1, 2, wide);
  EXPECT_EQ(wide[0], 6);
  EXPECT_EQ(wide[1], 7);
}

TEST(IndexedDataset, round_trips_random_documents_in_every_integer_dtype) {
  const std::string dir = temp_dir();
  Philox rng(7);
  for (TokenDType dt : {TokenDType::u8, TokenDType::i8, TokenDType::i16, TokenDType::u16, TokenDType::i32,
                        TokenDType::i64}) {
    const std::string p = dir + "/" + token_dtype_name(dt);
    const int64_t lo = std::max<int64_t>(token_dtype_min(dt), -100000);
    const int64_t hi = std::min<int64_t>(token_dtype_max(dt), 100000);
    std::vector<std::vector<int64_t>> docs;
    uint64_t k = 0;
    for (int d = 0; d < 50; ++d) {
      std::vector<int64_t> doc(rng.bits(k++) % 40);
      for (auto& t : doc) t = lo + static_cast<int64_t>(rng.bits(k++) % static_cast<uint64_t>(hi - lo + 1));
      docs.push_back(doc);
    }
    {
      IndexedDatasetBuilder b(p, dt);
      for (const auto& doc : docs) b.add_document(doc);
      b.finalize();
    }
    IndexedDataset ds = IndexedDataset::open(p);
    ASSERT_EQ(ds.num_sequences(), 50) << token_dtype_name(dt);
    for (int d = 0; d < 50; ++d) {
      std::vector<int64_t> got(docs[d].size());
      ds.get(d, 0, -1, got.data());
      EXPECT_EQ(got, docs[d]) << token_dtype_name(dt) << " document " << d;
      EXPECT_EQ(ds.document_index(d), d);
    }
  }
}

TEST(IndexedDatasetBuilder, add_index_concatenates_shards_exactly_like_one_writer) {
  const std::string dir = temp_dir();
  {
    IndexedDatasetBuilder a(dir + "/a", TokenDType::u16);
    a.add_document(std::vector<int32_t>{1, 2});
    a.end_document();  // an empty document in the middle
    a.add_document(std::vector<int32_t>{3, 4, 5}, std::vector<int32_t>{1, 2});
    a.finalize();
    IndexedDatasetBuilder b(dir + "/b", TokenDType::u16);
    b.add_document(std::vector<int32_t>{6});
    b.add_document(std::vector<int32_t>{});
    b.finalize();
    IndexedDatasetBuilder merged(dir + "/merged", TokenDType::u16);
    merged.add_index(dir + "/a");
    merged.add_index(dir + "/b");
    merged.finalize();
    IndexedDatasetBuilder direct(dir + "/direct", TokenDType::u16);
    direct.add_document(std::vector<int32_t>{1, 2});
    direct.end_document();
    direct.add_document(std::vector<int32_t>{3, 4, 5}, std::vector<int32_t>{1, 2});
    direct.add_document(std::vector<int32_t>{6});
    direct.add_document(std::vector<int32_t>{});
    direct.finalize();
  }
  EXPECT_EQ(read_bytes(dir + "/merged.idx"), read_bytes(dir + "/direct.idx"));
  EXPECT_EQ(read_bytes(dir + "/merged.bin"), read_bytes(dir + "/direct.bin"));
  IndexedDataset m = IndexedDataset::open(dir + "/merged");
  EXPECT_EQ(m.document_indices(), (std::vector<int64_t>{0, 1, 1, 3, 4, 5}));
  EXPECT_EQ(m.get(3), (std::vector<int32_t>{6}));
}

TEST(IndexedDatasetBuilder, add_index_refuses_another_dtype) {
  const std::string dir = temp_dir();
  write_small(dir + "/a", TokenDType::i32);
  IndexedDatasetBuilder b(dir + "/b", TokenDType::u16);
  EXPECT_EQ(input_error([&] { b.add_index(dir + "/a"); }),
            dir + "/a.idx: dtype int32 differs from the dtype uint16 of " + dir + "/b being built");
}

TEST(IndexedDatasetBuilder, unfinished_builder_leaves_no_file_under_any_name) {
  const std::string dir = temp_dir();
  {
    IndexedDatasetBuilder b(dir + "/x", TokenDType::i32);
    b.add_document(std::vector<int32_t>{1, 2, 3});
    EXPECT_TRUE(std::filesystem::exists(dir + "/x.bin.tmp"));
    EXPECT_FALSE(std::filesystem::exists(dir + "/x.bin"));
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

TEST(IndexedDatasetBuilder, finalize_replaces_existing_files_and_removes_temporaries) {
  const std::string dir = temp_dir();
  write_small(dir + "/x", TokenDType::i32);
  IndexedDatasetBuilder b(dir + "/x", TokenDType::i32);
  b.add_document(std::vector<int32_t>{42});
  b.finalize();
  EXPECT_EQ(IndexedDataset::open(dir + "/x").get(0), (std::vector<int32_t>{42}));
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.bin.tmp"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.idx.tmp"));
}

TEST(IndexedDatasetBuilder, token_that_does_not_fit_the_dtype_is_an_input_error) {
  const std::string p = temp_dir() + "/x";
  IndexedDatasetBuilder b(p, TokenDType::u16);
  b.add_document(std::vector<int32_t>{1});
  EXPECT_EQ(input_error([&] { b.add_document(std::vector<int32_t>{3, 70000}); }),
            p + ".bin: token 1 of sequence 1 is 70000, which uint16 cannot hold (0..65535); vocabularies of "
                "65500 or more need int32");
  EXPECT_NE(input_error([&] { b.add_document(std::vector<int32_t>{-1}); }).find("is -1, which uint16"),
            std::string::npos);
}

TEST(IndexedDataset, int64_file_read_as_int32_rejects_ids_beyond_int32) {
  const std::string p = temp_dir() + "/x";
  {
    IndexedDatasetBuilder b(p, TokenDType::i64);
    b.add_document(std::vector<int64_t>{1, int64_t{1} << 40});
    b.finalize();
  }
  IndexedDataset ds = IndexedDataset::open(p);
  EXPECT_EQ(input_error([&] { ds.get(0); }), p + ".bin: sequence 0 token 1: 1099511627776 does not fit int32");
  int64_t wide[2];
  ds.get(0, 0, 2, wide);
  EXPECT_EQ(wide[1], int64_t{1} << 40);
}

// ---- Corruption: every malformed file is an InputError naming the file and the field. ----

class CorruptIndex : public ::testing::Test {
 protected:
  void SetUp() override {
    prefix_ = temp_dir() + "/small";
    write_small(prefix_, TokenDType::i32);
    idx_ = read_bytes(prefix_ + ".idx");
    bin_ = read_bytes(prefix_ + ".bin");
  }
  std::string open_error(const std::vector<unsigned char>& idx) {
    write_bytes(prefix_ + ".idx", idx);
    return input_error([&] { IndexedDataset::open(prefix_); });
  }
  std::vector<unsigned char> with(size_t at, std::vector<unsigned char> bytes) const {
    auto out = idx_;
    std::copy(bytes.begin(), bytes.end(), out.begin() + static_cast<long>(at));
    return out;
  }
  std::string ipath() const { return prefix_ + ".idx"; }
  std::string prefix_;
  std::vector<unsigned char> idx_, bin_;
  // Offsets of write_small's arrays (S = 3, D1 = 4).
  static constexpr size_t kLengths = 34, kPointers = 34 + 12, kDocs = 34 + 36;
};

TEST_F(CorruptIndex, truncated_header_at_several_offsets) {
  for (size_t n : {0u, 1u, 9u, 17u, 25u, 33u}) {
    EXPECT_EQ(open_error(std::vector<unsigned char>(idx_.begin(), idx_.begin() + static_cast<long>(n))),
              ipath() + ": header: the file has " + std::to_string(n) + " bytes, expected at least 34 (truncated)");
  }
}

TEST_F(CorruptIndex, truncated_arrays_at_several_offsets) {
  for (size_t n : {size_t{34}, size_t{40}, size_t{57}, size_t{90}, idx_.size() - 1}) {
    EXPECT_EQ(open_error(std::vector<unsigned char>(idx_.begin(), idx_.begin() + static_cast<long>(n))),
              ipath() + ": sequence_count 3 and document_count 4 need 102 bytes, the file has " + std::to_string(n) +
                  " (truncated, or corrupt counts)");
  }
}

TEST_F(CorruptIndex, bad_magic) {
  EXPECT_EQ(open_error(with(0, {'X'})),
            ipath() + ": magic: expected 4d 4d 49 44 49 44 58 00 00 (\"MMIDIDX\\0\\0\"), got "
                      "58 4d 49 44 49 44 58 00 00");
}

TEST_F(CorruptIndex, bad_version) {
  EXPECT_EQ(open_error(with(9, le(2, 8))), ipath() + ": version: expected 1, got 2");
}

TEST_F(CorruptIndex, unknown_and_non_token_dtype_codes) {
  EXPECT_EQ(open_error(with(17, {9})), ipath() + ": dtype code: expected 1..8, got 9");
  EXPECT_EQ(open_error(with(17, {0})), ipath() + ": dtype code: expected 1..8, got 0");
  EXPECT_EQ(open_error(with(17, {7})), ipath() +
                                           ": dtype code: 7 (float32) cannot hold token ids; expected an integer "
                                           "dtype (4 = int32, 8 = uint16, ...)");
}

TEST_F(CorruptIndex, counts_that_overflow_the_file) {
  EXPECT_EQ(open_error(with(18, le(uint64_t{1} << 40, 8))),
            ipath() + ": sequence_count 1099511627776 and document_count 4 need 13194139533378 bytes, the file has "
                      "102 (truncated, or corrupt counts)");
  EXPECT_EQ(open_error(with(26, le(uint64_t{1} << 62, 8))),
            ipath() + ": sequence_count 3 and document_count 4611686018427387904 need more than 2^64 bytes, the "
                      "file has 102 (truncated, or corrupt counts)");
  EXPECT_EQ(open_error(with(26, le(0, 8))),
            ipath() + ": document_count: expected at least 1 (the leading 0 of document_indices), got 0");
}

TEST_F(CorruptIndex, negative_length) {
  EXPECT_EQ(open_error(with(kLengths + 4, le(0xFFFFFFFF, 4))),
            ipath() + ": sequence_lengths[1]: expected >= 0, got -1");
}

TEST_F(CorruptIndex, non_monotonic_or_overlapping_pointers) {
  EXPECT_EQ(open_error(with(kPointers + 16, le(4, 8))),
            ipath() + ": sequence_pointers[2]: expected >= 16 (the end of sequence 1), got 4 (pointers must "
                      "increase and sequences must not overlap)");
  EXPECT_EQ(open_error(with(kPointers + 8, le(8, 8))),
            ipath() + ": sequence_pointers[1]: expected >= 12 (the end of sequence 0), got 8 (pointers must "
                      "increase and sequences must not overlap)");
  EXPECT_EQ(open_error(with(kPointers, le(uint64_t(-8), 8))),
            ipath() + ": sequence_pointers[0]: expected >= 0, got -8");
}

TEST_F(CorruptIndex, pointer_or_length_beyond_the_bin) {
  EXPECT_EQ(open_error(with(kPointers + 8, le(1000, 8))),
            prefix_ + ".bin: the file has 16 bytes, but sequence 1 (sequence_pointers[1] = 1000, length 1 x 4 "
                      "bytes) ends at byte 1004 (.bin truncated?)");
  EXPECT_EQ(open_error(with(kLengths + 4, le(2, 4))),
            prefix_ + ".bin: the file has 16 bytes, but sequence 1 (sequence_pointers[1] = 12, length 2 x 4 "
                      "bytes) ends at byte 20 (.bin truncated?)");
}

TEST_F(CorruptIndex, bin_shorter_than_the_index_says) {
  write_bytes(prefix_ + ".bin", std::vector<unsigned char>(bin_.begin(), bin_.begin() + 10));
  EXPECT_EQ(input_error([&] { IndexedDataset::open(prefix_); }),
            prefix_ + ".bin: the file has 10 bytes, but sequence 0 (sequence_pointers[0] = 0, length 3 x 4 bytes) "
                      "ends at byte 12 (.bin truncated?)");
  write_bytes(prefix_ + ".bin", {});
  EXPECT_NE(input_error([&] { IndexedDataset::open(prefix_); }).find(".bin: the file has 0 bytes"), std::string::npos);
}

TEST_F(CorruptIndex, bad_document_indices) {
  EXPECT_EQ(open_error(with(kDocs, le(1, 8))), ipath() + ": document_indices[0]: expected 0, got 1");
  EXPECT_EQ(open_error(with(kDocs + 16, le(0, 8))),
            ipath() + ": document_indices[2]: expected >= 1 (non-decreasing), got 0");
  auto short_last = with(kDocs + 16, le(2, 8));
  std::copy_n(le(2, 8).begin(), 8, short_last.begin() + kDocs + 24);  // [0, 1, 2, 2]
  EXPECT_EQ(open_error(short_last),
            ipath() + ": document_indices[3]: expected 3 (= sequence_count), got 2");
  EXPECT_EQ(open_error(with(kDocs + 16, le(9, 8))),
            ipath() + ": document_indices[2]: expected <= 3 (sequence_count), got 9");
}

TEST_F(CorruptIndex, missing_files) {
  std::filesystem::remove(prefix_ + ".bin");
  EXPECT_EQ(input_error([&] { IndexedDataset::open(prefix_); }),
            prefix_ + ".bin: cannot open: No such file or directory");
  EXPECT_EQ(input_error([&] { IndexedDataset::open(prefix_ + "_nope"); }),
            prefix_ + "_nope.idx: cannot open: No such file or directory");
}

TEST_F(CorruptIndex, trailing_bytes_are_ignored_as_megatron_does) {
  auto idx = idx_;
  idx.insert(idx.end(), {0, 0, 0});  // a multimodal mode array, one i8 per sequence
  write_bytes(prefix_ + ".idx", idx);
  EXPECT_EQ(IndexedDataset::open(prefix_).get(0), (std::vector<int32_t>{5, 6, 7}));
}

}  // namespace
}  // namespace nemotron::data
