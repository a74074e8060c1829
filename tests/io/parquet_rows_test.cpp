// Nested Parquet rows against pyarrow, through committed fixtures (tools/make_parquet_chat_fixtures.py):
// each tests/fixtures/parquet/chat_<variant>.parquet must read to exactly chat_rows.jsonl, the rows
// as pyarrow's to_pylist() gives them (keys in schema order, a missing struct field null); and a
// truncated or corrupted file is an InputError naming the file, never a crash or a wrong row count.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/parquet_rows.h"
#include "test_util.h"

namespace nemotron::io {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using nemotron::testing::input_error;
using ::testing::HasSubstr;

fs::path fixture(const std::string& name) { return nemotron::testing::source_root() / "tests/fixtures/parquet" / name; }

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<Json> expected_rows() {
  std::ifstream in(fixture("chat_rows.jsonl"));
  std::vector<Json> rows;
  for (std::string line; std::getline(in, line);) rows.push_back(Json::parse(line));
  return rows;
}

std::vector<Json> read_all(const std::string& path) {
  ParquetRowReader r(path);
  std::vector<Json> rows;
  Json row;
  while (r.next_row(row)) rows.push_back(row);
  return rows;
}

std::string write_bytes(const std::string& name, const std::string& bytes) {
  const fs::path p = fs::temp_directory_path() / ("parquet_rows_test_" + std::to_string(::getpid())) / name;
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << bytes;
  return p.string();
}

class ParquetChatFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(ParquetChatFixture, reads_to_pyarrows_to_pylist) {
  const std::vector<Json> want = expected_rows();
  ASSERT_EQ(want.size(), 206u);
  const std::string path = fixture(std::string("chat_") + GetParam() + ".parquet").string();
  ParquetRowReader r(path);
  EXPECT_EQ(r.num_rows(), 206);
  Json row;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_TRUE(r.next_row(row)) << "row " << i;
    // Key order too: the dump is what a chat template sees.
    ASSERT_EQ(row.dump(), want[i].dump()) << "row " << i;
    EXPECT_EQ(r.where(), path + ": row " + std::to_string(i));
  }
  EXPECT_FALSE(r.next_row(row));
}

INSTANTIATE_TEST_SUITE_P(Variants, ParquetChatFixture, ::testing::Values("default", "zstd_v2_plain", "small_pages"));

TEST(ParquetRows, a_truncated_file_is_an_input_error_naming_it) {
  const std::string good = read_bytes(fixture("chat_default.parquet"));
  for (size_t n : {size_t{0}, size_t{7}, size_t{100}, good.size() / 2, good.size() - 1}) {
    const std::string p = write_bytes("cut.parquet", good.substr(0, n));
    EXPECT_THAT(input_error([&] { read_all(p); }), HasSubstr("cut.parquet: invalid Parquet file:")) << n;
  }
}

TEST(ParquetRows, a_corrupted_page_names_the_row_group_and_column) {
  std::string bytes = read_bytes(fixture("chat_zstd_v2_plain.parquet"));
  // The first page header starts at byte 4: make its type unknown (the Thrift field 1 value).
  ASSERT_EQ(static_cast<uint8_t>(bytes[4]), 0x15);  // field 1, i32
  bytes[5] = 0x7e;
  const std::string e = input_error([&] { read_all(write_bytes("bad.parquet", bytes)); });
  EXPECT_THAT(e, HasSubstr("bad.parquet: row group 0, column 'messages.list.element.role', page at byte 4"));
}

// A sample of single-byte changes (tests/io/packed_parquet_fuzz.cpp tries many more) (all three encodings) either reads or fails with
// an InputError that names the file: never a crash, another exception, or a silent short read.
TEST(ParquetRows, any_flipped_byte_is_read_or_an_input_error) {
  for (const char* v : {"default", "zstd_v2_plain", "small_pages"}) {
    const std::string good = read_bytes(fixture(std::string("chat_") + v + ".parquet"));
    uint32_t footer_len;
    std::memcpy(&footer_len, good.data() + good.size() - 8, 4);
    const size_t data_end = good.size() - 8 - footer_len;
    int errors = 0, reads = 0;
    for (size_t at = 4; at < good.size() - 8; at += at < data_end ? 97 : 13) {
      std::string bytes = good;
      bytes[at] = static_cast<char>(bytes[at] ^ 0x5a);
      const std::string p = write_bytes("flip.parquet", bytes);
      try {
        const std::vector<Json> rows = read_all(p);
        EXPECT_EQ(rows.size(), 206u) << v << " byte " << at;
        ++reads;
      } catch (const InputError& e) {
        EXPECT_THAT(e.what(), HasSubstr("flip.parquet")) << v << " byte " << at;
        ++errors;
      }
    }
    EXPECT_GT(errors, 5) << v;
    EXPECT_GT(reads, 5) << v;
  }
}

}  // namespace
}  // namespace nemotron::io
