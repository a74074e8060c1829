// Packed SFT shards in Parquet: our writer's files read back exactly (both compressions, tiny and
// long rows, many row groups), the §6.5 row rules, the shapes pyarrow writes that ours does not
// (dictionary pages, snappy, v2 pages, rows cut across pages, INT64, non-nullable lists, extra
// columns), and clear InputErrors for broken files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "io/packed_parquet.h"
#include "packed_parquet_builder.h"
#include "test_util.h"

namespace nemotron::io {
namespace {

namespace fs = std::filesystem;
using nemotron::testing::input_error;
using pqtest::BuildOptions;
using pqtest::ColumnData;
using pqtest::ColumnSpec;
using pqtest::ShardBuilder;
using ::testing::HasSubstr;

class PackedParquetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("nm_pq_{}_{}", ::getpid(), ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::string write(const std::string& name, const std::vector<PackedRow>& rows, PackedParquetOptions o = {}) {
    const std::string p = path(name);
    PackedParquetWriter w(p, o);
    for (const auto& r : rows) w.add(r);
    EXPECT_EQ(w.rows_written(), static_cast<int64_t>(rows.size()));
    w.close();
    return p;
  }
  std::string write_bytes(const std::string& name, const std::string& bytes) {
    const std::string p = path(name);
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  std::string read_bytes(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  fs::path dir_;
};

// Rows of 1..max_len tokens (ids over the whole int32 range now and then), 0/1 masks, and
// 1..8 sequence starts.
std::vector<PackedRow> random_rows(uint64_t seed, size_t n, size_t max_len) {
  std::mt19937_64 rng(seed);
  std::vector<PackedRow> rows(n);
  for (auto& r : rows) {
    const size_t len = 1 + rng() % max_len;
    r.input_ids.resize(len);
    r.loss_mask.resize(len);
    for (size_t i = 0; i < len; ++i) {
      r.input_ids[i] = rng() % 16 == 0 ? static_cast<int32_t>(rng()) : static_cast<int32_t>(rng() % 131072);
      r.loss_mask[i] = static_cast<uint8_t>(rng() % 2);
    }
    r.seq_start_id = {0};
    const size_t k = rng() % 8;
    for (size_t j = 0; j < k; ++j) r.seq_start_id.push_back(static_cast<int32_t>(rng() % len));
    std::sort(r.seq_start_id.begin(), r.seq_start_id.end());
    r.seq_start_id.erase(std::unique(r.seq_start_id.begin(), r.seq_start_id.end()), r.seq_start_id.end());
  }
  return rows;
}

void expect_rows_eq(const std::vector<PackedRow>& got, const std::vector<PackedRow>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].input_ids, want[i].input_ids) << "row " << i;
    ASSERT_EQ(got[i].loss_mask, want[i].loss_mask) << "row " << i;
    ASSERT_EQ(got[i].seq_start_id, want[i].seq_start_id) << "row " << i;
  }
}

// ---- our writer, our reader ----

TEST_F(PackedParquetTest, round_trips_random_rows_with_zstd_and_uncompressed) {
  const auto rows = random_rows(1, 60, 5000);
  for (bool zstd : {true, false}) {
    const std::string p = write(zstd ? "z.parquet" : "u.parquet", rows, {.zstd = zstd, .rows_per_row_group = 7});
    expect_rows_eq(read_packed_parquet(p), rows);
    EXPECT_EQ(packed_parquet_num_rows(p), 60);
  }
  // Compression is real: token ids below 2^17 in 4-byte words must shrink.
  EXPECT_LT(fs::file_size(path("z.parquet")), fs::file_size(path("u.parquet")) * 8 / 10);
}

TEST_F(PackedParquetTest, round_trips_single_token_rows) {
  std::vector<PackedRow> rows(5, PackedRow{{42}, {0}, {0}});
  rows[3] = PackedRow{{-7}, {1}, {0}};
  for (bool zstd : {true, false}) expect_rows_eq(read_packed_parquet(write("one.parquet", rows, {.zstd = zstd})), rows);
}

TEST_F(PackedParquetTest, round_trips_rows_longer_than_a_page) {
  // 300k tokens = 1.2 MB of values per row: each row gets its own page past the 1 MiB target.
  const auto rows = random_rows(2, 3, 300000);
  for (bool zstd : {true, false})
    expect_rows_eq(read_packed_parquet(write("long.parquet", rows, {.zstd = zstd, .rows_per_row_group = 2})), rows);
}

TEST_F(PackedParquetTest, round_trips_many_row_groups_and_many_pages) {
  // 400 rows of up to 4096 tokens in row groups of 150: several pages per column chunk.
  const auto rows = random_rows(3, 400, 4096);
  const std::string p = write("many.parquet", rows, {.zstd = true, .rows_per_row_group = 150});
  expect_rows_eq(read_packed_parquet(p), rows);
  const auto one = random_rows(4, 9, 10);
  expect_rows_eq(read_packed_parquet(write("groups_of_one.parquet", one, {.zstd = false, .rows_per_row_group = 1})), one);
}

TEST_F(PackedParquetTest, a_shard_without_rows_reads_as_empty) {
  const std::string p = write("empty.parquet", {});
  EXPECT_TRUE(read_packed_parquet(p).empty());
  EXPECT_EQ(packed_parquet_num_rows(p), 0);
}

TEST_F(PackedParquetTest, writing_is_deterministic) {
  const auto rows = random_rows(5, 20, 300);
  EXPECT_EQ(read_bytes(write("a.parquet", rows)), read_bytes(write("b.parquet", rows)));
}

// ---- atomic writes ----

TEST_F(PackedParquetTest, an_unclosed_writer_leaves_no_file_and_no_temporary) {
  {
    PackedParquetWriter w(path("x.parquet"));
    w.add(PackedRow{{1, 2}, {0, 1}, {0}});
  }
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(PackedParquetTest, close_replaces_an_existing_file_whole) {
  write_bytes("x.parquet", "old contents");
  const auto rows = random_rows(6, 4, 50);
  {
    PackedParquetWriter w(path("x.parquet"));
    for (const auto& r : rows) w.add(r);
    EXPECT_EQ(read_bytes(path("x.parquet")), "old contents");  // untouched until close()
    w.close();
  }
  expect_rows_eq(read_packed_parquet(path("x.parquet")), rows);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(PackedParquetTest, a_bad_row_group_size_is_an_input_error) {
  EXPECT_THAT(input_error([&] { PackedParquetWriter(path("x.parquet"), {.rows_per_row_group = 0}); }),
              HasSubstr("rows_per_row_group must be at least 1, got 0"));
}

// ---- §6.5 row rules ----

TEST(PackedRowValidation, names_the_source_the_row_and_the_rule) {
  auto err = [](PackedRow r) { return input_error([&] { validate_packed_row(r, "shard.parquet", 17); }); };
  EXPECT_EQ(err({{1, 2, 3}, {0, 1, 1}, {0, 2}}), "(no InputError)");
  EXPECT_THAT(err({{1, 2, 3}, {0, 1}, {0}}), HasSubstr("shard.parquet: packed row 17: loss_mask has 2 values, input_ids has 3"));
  EXPECT_THAT(err({{}, {}, {0}}), HasSubstr("input_ids is empty"));
  EXPECT_THAT(err({{1}, {0}, {}}), HasSubstr("seq_start_id is empty"));
  EXPECT_THAT(err({{1, 2}, {0, 0}, {1}}), HasSubstr("seq_start_id[0] is 1, expected 0"));
  EXPECT_THAT(err({{1, 2, 3}, {0, 0, 0}, {0, 2, 2}}), HasSubstr("seq_start_id[2] = 2 is not above seq_start_id[1] = 2"));
  EXPECT_THAT(err({{1, 2, 3}, {0, 0, 0}, {0, 3}}), HasSubstr("seq_start_id[1] = 3 is not below the 3 tokens"));
}

TEST_F(PackedParquetTest, the_writer_rejects_an_invalid_row_and_writes_nothing) {
  EXPECT_THAT(input_error([&] {
                PackedParquetWriter w(path("x.parquet"));
                w.add(PackedRow{{1, 2}, {0, 1}, {0}});
                w.add(PackedRow{{1, 2}, {0}, {0}});
              }),
              HasSubstr("x.parquet: packed row 1: loss_mask has 1 values, input_ids has 2"));
  EXPECT_TRUE(fs::is_empty(dir_));
}

// ---- pyarrow's shapes (hand-built) ----

const std::vector<ColumnSpec> kNemotronColumns = {{"input_ids"}, {"loss_mask", parquet::kInt32, true, true, true}, {"seq_start_id"}};

std::vector<ColumnData> as_columns(const std::vector<PackedRow>& rows) {
  std::vector<ColumnData> cols(3);
  for (const auto& r : rows) {
    cols[0].emplace_back(std::vector<int64_t>(r.input_ids.begin(), r.input_ids.end()));
    cols[1].emplace_back(std::vector<int64_t>(r.loss_mask.begin(), r.loss_mask.end()));
    cols[2].emplace_back(std::vector<int64_t>(r.seq_start_id.begin(), r.seq_start_id.end()));
  }
  return cols;
}

TEST_F(PackedParquetTest, reads_the_encodings_pyarrow_writes) {
  const auto rows = random_rows(7, 40, 300);
  struct Case {
    const char* name;
    BuildOptions o;
  };
  const Case cases[] = {
      {"plain", {}},
      {"dictionary_zstd", {.codec = parquet::kZstd, .dictionary = true}},
      {"dictionary_snappy", {.codec = parquet::kSnappy, .dictionary = true, .rows_per_group = 9}},
      {"snappy_bitpacked_levels", {.codec = parquet::kSnappy, .bitpacked_levels = true}},
      {"rows_cut_across_pages", {.codec = parquet::kZstd, .dictionary = true, .levels_per_page = 37, .rows_per_group = 13}},
      {"v2_pages", {.codec = parquet::kZstd, .v2 = true, .levels_per_page = 100}},
      {"v2_dictionary_bitpacked", {.codec = parquet::kSnappy, .dictionary = true, .v2 = true, .bitpacked_levels = true}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string p = write_bytes(std::string(c.name) + ".parquet", ShardBuilder(kNemotronColumns, c.o).build(as_columns(rows)));
    expect_rows_eq(read_packed_parquet(p), rows);
  }
}

TEST_F(PackedParquetTest, reads_int64_lists_non_nullable_lists_and_skips_extra_columns) {
  const auto rows = random_rows(8, 12, 100);
  auto cols = as_columns(rows);
  ColumnData extra;
  for (size_t r = 0; r < rows.size(); ++r) extra.emplace_back(std::vector<int64_t>{static_cast<int64_t>(r)});
  cols.insert(cols.begin(), extra);  // the extra column comes first: leaf indices shift
  const std::vector<ColumnSpec> spec = {{"num_tokens", parquet::kInt64, false, false, false, true},
                                        {"input_ids", parquet::kInt64, false, false},
                                        {"loss_mask", parquet::kInt32, true, false, false},
                                        {"seq_start_id", parquet::kInt32, false, true}};
  const std::string p = write_bytes("shapes.parquet", ShardBuilder(spec, {.dictionary = true}).build(cols));
  expect_rows_eq(read_packed_parquet(p), rows);
}

// ---- broken files ----

TEST_F(PackedParquetTest, a_missing_file_is_an_input_error) {
  EXPECT_THAT(input_error([&] { read_packed_parquet(path("nope.parquet")); }), HasSubstr("nope.parquet: cannot open"));
}

TEST_F(PackedParquetTest, a_truncated_file_is_an_input_error) {
  const std::string good = read_bytes(write("good.parquet", random_rows(9, 5, 40), {.rows_per_row_group = 2}));
  for (size_t n = 0; n < good.size(); n += n < 40 || n + 40 > good.size() ? 1 : 13) {
    const std::string p = write_bytes("cut.parquet", good.substr(0, n));
    const std::string e = input_error([&] { read_packed_parquet(p); });
    ASSERT_THAT(e, HasSubstr("cut.parquet")) << "cut at " << n;
    if (n < 12) ASSERT_THAT(e, HasSubstr("too short")) << n;
    else ASSERT_THAT(e, HasSubstr("does not end with the Parquet magic")) << n;
  }
}

TEST_F(PackedParquetTest, a_wrong_magic_is_an_input_error) {
  std::string bytes = read_bytes(write("good.parquet", random_rows(10, 3, 40)));
  bytes[0] = 'X';
  EXPECT_THAT(input_error([&] { read_packed_parquet(write_bytes("x.parquet", bytes)); }),
              HasSubstr("x.parquet: invalid packed Parquet shard: does not start with the Parquet magic 'PAR1'"));
  const std::string not_parquet = write_bytes("y.parquet", "{\"input_ids\": [1, 2, 3]}\n");
  EXPECT_THAT(input_error([&] { read_packed_parquet(not_parquet); }), HasSubstr("Parquet magic"));
}

TEST_F(PackedParquetTest, a_corrupted_footer_is_an_input_error) {
  const std::string good = read_bytes(write("good.parquet", random_rows(11, 3, 40)));
  uint32_t footer_len;
  std::memcpy(&footer_len, good.data() + good.size() - 8, 4);
  const size_t footer = good.size() - 8 - footer_len;

  std::string lying_length = good;
  const uint32_t huge = static_cast<uint32_t>(good.size());
  std::memcpy(lying_length.data() + good.size() - 8, &huge, 4);
  EXPECT_THAT(input_error([&] { read_packed_parquet(write_bytes("a.parquet", lying_length)); }),
              HasSubstr("footer length"));

  std::string garbage = good;
  for (size_t i = footer; i < footer + 8; ++i) garbage[i] = '\xff';
  EXPECT_THAT(input_error([&] { read_packed_parquet(write_bytes("b.parquet", garbage)); }),
              HasSubstr("b.parquet: Parquet footer:"));

  // The footer cut short by one byte (the length adjusted to match): a truncated Thrift struct.
  std::string cut = good.substr(0, good.size() - 9);
  const uint32_t shorter = footer_len - 1;
  cut.append(reinterpret_cast<const char*>(&shorter), 4);
  cut += "PAR1";
  EXPECT_THAT(input_error([&] { read_packed_parquet(write_bytes("c.parquet", cut)); }), HasSubstr("truncated"));
}

TEST_F(PackedParquetTest, a_corrupted_page_names_the_row_group_and_column) {
  // Column chunks follow one another: input_ids, loss_mask, seq_start_id of row group 0 first.
  const auto rows = random_rows(12, 4, 40);
  std::string bytes = read_bytes(write("good.parquet", rows, {.zstd = true}));
  const std::string zstd_magic = "\x28\xb5\x2f\xfd";
  const size_t first = bytes.find(zstd_magic);
  const size_t second = bytes.find(zstd_magic, first + 4);
  ASSERT_NE(second, std::string::npos);
  bytes[second + 4] ^= 0x40;  // the loss_mask page's frame header
  bytes[second + 9] ^= 0x55;
  EXPECT_THAT(input_error([&] { read_packed_parquet(write_bytes("x.parquet", bytes)); }),
              HasSubstr("x.parquet: row group 0, column 'loss_mask', page at byte"));
}

TEST_F(PackedParquetTest, columns_of_different_row_lengths_are_an_input_error) {
  auto cols = as_columns(random_rows(13, 5, 30));
  cols[1][3]->pop_back();  // row 3's loss_mask one value short
  const std::string p = write_bytes("x.parquet", ShardBuilder(kNemotronColumns, {}).build(cols));
  EXPECT_THAT(input_error([&] { read_packed_parquet(p); }),
              HasSubstr("x.parquet: packed row 3: loss_mask has"));
}

TEST_F(PackedParquetTest, columns_with_different_row_counts_are_an_input_error) {
  auto cols = as_columns(random_rows(14, 5, 30));
  cols[2].pop_back();  // seq_start_id has 4 rows
  const std::string p = write_bytes("x.parquet", ShardBuilder(kNemotronColumns, {}).build(cols));
  EXPECT_THAT(input_error([&] { read_packed_parquet(p); }),
              HasSubstr("x.parquet: row group 0, column 'seq_start_id': holds 4 rows, the row group says 5"));
}

TEST_F(PackedParquetTest, nulls_are_an_input_error) {
  auto cols = as_columns(random_rows(15, 5, 30));
  cols[0][2] = std::nullopt;
  EXPECT_THAT(input_error([&] { read_packed_parquet(write_bytes("a.parquet", ShardBuilder(kNemotronColumns, {}).build(cols))); }),
              HasSubstr("column 'input_ids', page at byte 4: row 2 is null"));
  cols = as_columns(random_rows(15, 5, 30));
  (*cols[1][1])[0] = pqtest::kNullElement;
  EXPECT_THAT(input_error([&] { read_packed_parquet(write_bytes("b.parquet", ShardBuilder(kNemotronColumns, {}).build(cols))); }),
              HasSubstr("row 1 has a null element"));
}

TEST_F(PackedParquetTest, out_of_range_values_are_an_input_error) {
  auto cols = as_columns(random_rows(16, 5, 30));
  (*cols[1][4])[0] = 300;
  EXPECT_THAT(input_error([&] { read_packed_parquet(write_bytes("a.parquet", ShardBuilder(kNemotronColumns, {}).build(cols))); }),
              HasSubstr("column 'loss_mask', page at byte"));
  cols = as_columns(random_rows(16, 5, 30));
  (*cols[0][0])[0] = int64_t{1} << 40;
  std::vector<ColumnSpec> wide = kNemotronColumns;
  wide[0].physical = parquet::kInt64;
  EXPECT_THAT(input_error([&] { read_packed_parquet(write_bytes("b.parquet", ShardBuilder(wide, {}).build(cols))); }),
              HasSubstr("row 0: value 1099511627776 does not fit int32"));
}

TEST_F(PackedParquetTest, a_missing_column_or_a_wrong_shape_is_an_input_error) {
  const auto cols = as_columns(random_rows(17, 3, 10));
  std::vector<ColumnSpec> renamed = kNemotronColumns;
  renamed[2].name = "seq_starts";
  EXPECT_THAT(input_error([&] { read_packed_parquet(write_bytes("a.parquet", ShardBuilder(renamed, {}).build(cols))); }),
              HasSubstr("a.parquet: invalid packed Parquet shard: no column 'seq_start_id'"));
  std::vector<ColumnSpec> floats = kNemotronColumns;
  floats[0].physical = parquet::kDouble;
  EXPECT_THAT(input_error([&] { read_packed_parquet(write_bytes("b.parquet", ShardBuilder(floats, {}).build(cols))); }),
              HasSubstr("column 'input_ids' is not a list of integers in the 3-level LIST layout: element type DOUBLE"));
}

TEST_F(PackedParquetTest, a_lying_row_count_is_an_input_error) {
  const auto cols = as_columns(random_rows(18, 3, 10));
  EXPECT_THAT(input_error([&] { read_packed_parquet(write_bytes("a.parquet", ShardBuilder(kNemotronColumns, {.claim_num_rows = 4}).build(cols))); }),
              HasSubstr("the footer says 4 rows, its row groups hold 3"));
}

TEST_F(PackedParquetTest, an_unsupported_codec_is_named) {
  // A GZIP-flagged chunk: the reader names the codec and what it does read.
  std::string bytes = ShardBuilder(kNemotronColumns, {.codec = parquet::kGzip}).build(as_columns(random_rows(19, 2, 10)));
  EXPECT_THAT(input_error([&] { read_packed_parquet(write_bytes("a.parquet", bytes)); }),
              HasSubstr("compression GZIP is not supported (ZSTD, SNAPPY or UNCOMPRESSED)"));
}

}  // namespace
}  // namespace nemotron::io
