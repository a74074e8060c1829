// Packed Parquet shards against pyarrow, through committed fixtures (no pyarrow here):
// - tests/fixtures/parquet/ours/: shards our writer makes from fixed rows, with rows.json. The test
//   fails when the writer's bytes change, so a format change is re-checked with pyarrow before it
//   lands (NEMOTRON_REGENERATE_PARQUET_FIXTURE=1 rewrites them; then run
//   `python3 tools/check_packed_parquet.py --ours tests/fixtures/parquet/ours
//    --json tests/fixtures/parquet/ours/rows.json --write-fixtures tests/fixtures/parquet`).
// - tests/fixtures/parquet/*.parquet: shards pyarrow wrote (that tool's --write-fixtures), each
//   with its rows in a .json beside it; our reader must return exactly those rows.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/packed_parquet.h"
#include "test_util.h"

namespace nemotron::io {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path fixture_dir() { return nemotron::testing::source_root() / "tests/fixtures/parquet"; }

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

json row_json(const PackedRow& r) {
  return {{"input_ids", r.input_ids}, {"loss_mask", r.loss_mask}, {"seq_start_id", r.seq_start_id}};
}

PackedRow row_from_json(const json& j) {
  PackedRow r;
  r.input_ids = j.at("input_ids").get<std::vector<int32_t>>();
  r.loss_mask = j.at("loss_mask").get<std::vector<uint8_t>>();
  r.seq_start_id = j.at("seq_start_id").get<std::vector<int32_t>>();
  return r;
}

// Fixed rows covering single tokens, a long bin, ids near the int32 limits and several sequences.
std::vector<PackedRow> fixture_rows() {
  std::vector<PackedRow> rows;
  rows.push_back({{7}, {0}, {0}});
  rows.push_back({{1, 2, 3, 4, 5}, {0, 1, 1, 1, 0}, {0}});
  rows.push_back({{131071, 0, 2147483647, 65535, 256, 11, 12}, {1, 1, 0, 0, 1, 1, 0}, {0, 2, 5}});
  PackedRow long_row;
  for (int i = 0; i < 700; ++i) {
    long_row.input_ids.push_back((i * 7919) % 131072);
    long_row.loss_mask.push_back(static_cast<uint8_t>((i / 13) % 2));
  }
  long_row.seq_start_id = {0, 100, 101, 350, 699};
  rows.push_back(long_row);
  rows.push_back({{-1, 2}, {1, 0}, {0, 1}});
  rows.push_back({{9, 9, 9, 9}, {1, 1, 1, 0}, {0, 3}});
  rows.push_back({{42, 43, 44}, {0, 0, 0}, {0, 1, 2}});
  return rows;
}

struct OurFixture {
  const char* name;
  PackedParquetOptions opts;
};
const OurFixture kOurs[] = {{"ours_zstd.parquet", {.zstd = true, .rows_per_row_group = 3}},
                            {"ours_none.parquet", {.zstd = false, .rows_per_row_group = 3}}};

TEST(PackedParquetFixtures, our_committed_shards_are_what_the_writer_writes_today) {
  const fs::path dir = fixture_dir() / "ours";
  const auto rows = fixture_rows();
  const bool regenerate = std::getenv("NEMOTRON_REGENERATE_PARQUET_FIXTURE") != nullptr;
  const fs::path scratch = fs::temp_directory_path() / fmt::format("nm_pq_fixture_{}", ::getpid());
  fs::create_directories(scratch);
  json dump = json::object();
  for (const auto& f : kOurs) {
    const fs::path out = (regenerate ? dir : scratch) / f.name;
    if (regenerate) fs::create_directories(dir);
    PackedParquetWriter w(out.string(), f.opts);
    for (const auto& r : rows) w.add(r);
    w.close();
    json list = json::array();
    for (const auto& r : rows) list.push_back(row_json(r));
    dump[f.name] = list;
    if (!regenerate) {
      EXPECT_EQ(read_bytes(out), read_bytes(dir / f.name))
          << f.name << ": the writer's bytes changed; regenerate the fixture and re-check it with pyarrow";
    }
  }
  if (regenerate) std::ofstream(dir / "rows.json") << dump.dump() << "\n";
  fs::remove_all(scratch);
  // The committed rows.json is the dump of these rows (the pyarrow check compares against it).
  EXPECT_EQ(json::parse(read_bytes(dir / "rows.json")), dump);
}

TEST(PackedParquetFixtures, pyarrow_written_shards_read_back_exactly) {
  std::vector<fs::path> files;
  if (fs::is_directory(fixture_dir()))
    for (const auto& e : fs::directory_iterator(fixture_dir()))
      if (e.path().extension() == ".parquet" && fs::exists(fs::path(e.path()).replace_extension(".json")))
        files.push_back(e.path());
  if (files.empty())
    GTEST_SKIP() << "no pyarrow-written shards in " << fixture_dir()
                 << " (make them on a machine with pyarrow: python3 tools/check_packed_parquet.py --ours "
                    "tests/fixtures/parquet/ours --json tests/fixtures/parquet/ours/rows.json --write-fixtures "
                    "tests/fixtures/parquet)";
  std::sort(files.begin(), files.end());
  for (const auto& p : files) {
    SCOPED_TRACE(p.filename().string());
    const json want = json::parse(read_bytes(fs::path(p).replace_extension(".json")));
    const auto got = read_packed_parquet(p.string());
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      const PackedRow w = row_from_json(want[i]);
      ASSERT_EQ(got[i].input_ids, w.input_ids) << "row " << i;
      ASSERT_EQ(got[i].loss_mask, w.loss_mask) << "row " << i;
      ASSERT_EQ(got[i].seq_start_id, w.seq_start_id) << "row " << i;
    }
    EXPECT_EQ(packed_parquet_num_rows(p.string()), static_cast<int64_t>(want.size()));
  }
}

}  // namespace
}  // namespace nemotron::io
