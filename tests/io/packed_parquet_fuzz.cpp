// Property/fuzz test of the packed Parquet reader (and the nested-row reader on the chat fixtures): valid shards (ours, and hand-built ones in
// pyarrow's shapes: dictionary pages, snappy, v2 pages, rows cut across pages) made invalid by
// byte flips (mostly in the footer and page headers, where the structure is), truncation,
// insertions, lying footer lengths and random footers; plus the Thrift, RLE/bit-packed and snappy
// decoders fed random bytes directly. Every input must either read (and then every row obeys the
// §6.5 rules) or fail with InputError: any other exception fails the test, and a crash or an
// out-of-bounds read fails it under AddressSanitizer (scripts/test.sh runs test_fuzz in build-asan/).
// Bounds as in safetensors_fuzz.cpp: NEMOTRON_FUZZ_SECONDS (default 2), NEMOTRON_FUZZ_ITERATIONS,
// NEMOTRON_FUZZ_SEED (default 1); the failing iteration is printed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "core/error.h"
#include "io/packed_parquet.h"
#include "io/parquet_rows.h"
#include "io/thrift_compact.h"
#include "packed_parquet_builder.h"

namespace nemotron::io {
namespace {

namespace fs = std::filesystem;
namespace pq = parquet;

double env_number(const char* name, double fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtod(v, nullptr) : fallback;
}

struct Bounds {
  double seconds = env_number("NEMOTRON_FUZZ_SECONDS", 2.0);
  double iterations = env_number("NEMOTRON_FUZZ_ITERATIONS", 1e18);
  uint64_t seed = static_cast<uint64_t>(env_number("NEMOTRON_FUZZ_SEED", 1));
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  bool more(uint64_t i) const {
    return static_cast<double>(i) < iterations &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds;
  }
};

class Fuzzer {
 public:
  explicit Fuzzer(uint64_t seed) : rng_(seed) {}
  uint64_t u(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  bool coin(int one_in) { return u(static_cast<uint64_t>(one_in)) == 0; }

  std::vector<PackedRow> rows() {
    std::vector<PackedRow> out(1 + u(6));
    for (auto& r : out) {
      const size_t len = 1 + u(coin(8) ? 400 : 12);
      for (size_t i = 0; i < len; ++i) {
        r.input_ids.push_back(static_cast<int32_t>(coin(10) ? rng_() : u(300)));
        r.loss_mask.push_back(static_cast<uint8_t>(u(2)));
      }
      r.seq_start_id = {0};
      for (size_t s = 1 + u(4); s < len; s += 1 + u(6)) r.seq_start_id.push_back(static_cast<int32_t>(s));
    }
    return out;
  }

  // A valid shard: ours (either codec) or a hand-built one in one of pyarrow's shapes.
  std::string valid_shard(const fs::path& scratch) {
    const auto rs = rows();
    if (coin(2)) {
      {
        PackedParquetWriter w(scratch.string(), {.zstd = coin(2), .rows_per_row_group = static_cast<int64_t>(1 + u(4))});
        for (const auto& r : rs) w.add(r);
        w.close();
      }
      std::ifstream in(scratch, std::ios::binary);
      return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    }
    std::vector<pqtest::ColumnData> cols(3);
    for (const auto& r : rs) {
      cols[0].emplace_back(std::vector<int64_t>(r.input_ids.begin(), r.input_ids.end()));
      cols[1].emplace_back(std::vector<int64_t>(r.loss_mask.begin(), r.loss_mask.end()));
      cols[2].emplace_back(std::vector<int64_t>(r.seq_start_id.begin(), r.seq_start_id.end()));
    }
    pqtest::BuildOptions o;
    const int32_t codecs[] = {pq::kUncompressed, pq::kZstd, pq::kSnappy};
    o.codec = codecs[u(3)];
    o.dictionary = coin(2);
    o.v2 = coin(3);
    o.bitpacked_levels = coin(2);
    o.levels_per_page = coin(2) ? 1 + u(20) : SIZE_MAX;
    o.rows_per_group = 1 + u(4);
    std::vector<pqtest::ColumnSpec> spec = {{"input_ids"}, {"loss_mask", pq::kInt32, true, true, true}, {"seq_start_id"}};
    if (coin(4)) spec[0].physical = pq::kInt64;
    return pqtest::ShardBuilder(spec, o).build(cols);
  }

  void mutate(std::string& f) {
    if (f.size() < 12) return;
    uint32_t footer_len;
    std::memcpy(&footer_len, f.data() + f.size() - 8, 4);
    const size_t footer = footer_len <= f.size() - 8 ? f.size() - 8 - footer_len : 0;
    switch (u(8)) {
      case 0:
      case 1:  // flips in the footer, where lengths, offsets and types are
        for (int k = 1 + static_cast<int>(u(3)); k > 0; --k) f[footer + u(f.size() - 8 - footer)] ^= static_cast<char>(1 + u(255));
        break;
      case 2:  // flips anywhere (page headers, levels, compressed data)
        for (int k = 1 + static_cast<int>(u(4)); k > 0; --k) f[u(f.size())] ^= static_cast<char>(1 + u(255));
        break;
      case 3: {  // a lying footer length
        const uint32_t n = coin(2) ? static_cast<uint32_t>(u(f.size() + 16)) : static_cast<uint32_t>(rng_());
        std::memcpy(f.data() + f.size() - 8, &n, 4);
        break;
      }
      case 4: f.resize(u(f.size() + 1)); break;
      case 5: f.insert(u(f.size() + 1), std::string(1 + u(3), static_cast<char>(u(256)))); break;
      case 6: {  // a footer of random bytes with a matching length
        std::string junk(u(64), '\0');
        for (auto& c : junk) c = static_cast<char>(u(256));
        f.resize(footer);
        f += junk;
        const auto n = static_cast<uint32_t>(junk.size());
        f.append(reinterpret_cast<const char*>(&n), 4);
        f += "PAR1";
        break;
      }
      default: {  // set a byte in the first page header region to a small value (counts, sizes)
        const size_t at = 4 + u(std::min<size_t>(40, f.size() - 4));
        f[at] = static_cast<char>(u(32));
        break;
      }
    }
  }

  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;
};

class PackedParquetFuzz : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("nm_pqfuzz_{}_{}", ::getpid(), ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(PackedParquetFuzz, corrupted_shards_read_cleanly_or_fail_with_input_error) {
  Bounds bounds;
  Fuzzer fz(bounds.seed);
  std::map<std::string, int> outcome;
  const fs::path p = dir_ / "f.parquet";
  uint64_t i = 0;
  // A pool of valid shards made once: each iteration mutates a copy of one (writing shards
  // through the writer each time would leave little of the time for reading).
  std::vector<std::string> pool;
  for (int k = 0; k < 48; ++k) pool.push_back(fz.valid_shard(dir_ / "valid.parquet"));
  for (; bounds.more(i); ++i) {
    std::string bytes = pool[fz.u(pool.size())];
    const bool mutated = !fz.coin(10);
    if (mutated) fz.mutate(bytes);
    {
      std::ofstream out(p, std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    try {
      const auto rows = read_packed_parquet(p.string());
      for (size_t r = 0; r < rows.size(); ++r) validate_packed_row(rows[r], p.string(), static_cast<int64_t>(r));
      ASSERT_EQ(packed_parquet_num_rows(p.string()), static_cast<int64_t>(rows.size())) << "iteration " << i;
      ++outcome[mutated ? "read (mutated)" : "read (valid)"];
    } catch (const InputError& e) {
      ASSERT_TRUE(mutated) << "iteration " << i << ": a valid shard failed: " << e.what();
      ASSERT_NE(std::string(e.what()).find(p.string()), std::string::npos) << "error without the path: " << e.what();
      ++outcome["InputError"];
    } catch (const std::exception& e) {
      FAIL() << "iteration " << i << " (seed " << bounds.seed << "): not an InputError: " << e.what();
    }
  }
  std::string summary;
  for (const auto& [k, v] : outcome) summary += fmt::format(" {}={}", k, v);
  std::printf("packed parquet fuzz: %llu iterations:%s\n", static_cast<unsigned long long>(i), summary.c_str());
  EXPECT_GT(outcome["InputError"], 0);
}

// The nested-row reader (io/parquet_rows.h) on pyarrow's chat fixtures, mutated the same way.
TEST_F(PackedParquetFuzz, corrupted_chat_rows_read_cleanly_or_fail_with_input_error) {
  Bounds bounds;
  Fuzzer fz(bounds.seed + 2000);
  std::vector<std::string> pool;
  for (const char* v : {"default", "zstd_v2_plain", "small_pages"}) {
    std::ifstream in(fs::path(NEMOTRON_SOURCE_DIR) / "tests/fixtures/parquet" / fmt::format("chat_{}.parquet", v), std::ios::binary);
    pool.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const fs::path p = dir_ / "chat.parquet";
  uint64_t i = 0, errors = 0;
  for (; bounds.more(i); ++i) {
    std::string bytes = pool[fz.u(pool.size())];
    fz.mutate(bytes);
    {
      std::ofstream out(p, std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    try {
      ParquetRowReader r(p.string());
      nlohmann::ordered_json row;
      int64_t n = 0;
      while (r.next_row(row)) ++n, (void)row.dump();
      ASSERT_EQ(n, r.num_rows()) << "iteration " << i;
    } catch (const InputError& e) {
      ASSERT_NE(std::string(e.what()).find(p.string()), std::string::npos) << "error without the path: " << e.what();
      ++errors;
    } catch (const std::exception& e) {
      FAIL() << "iteration " << i << " (seed " << bounds.seed << "): not an InputError: " << e.what();
    }
  }
  std::printf("parquet chat rows fuzz: %llu iterations, %llu InputErrors\n", static_cast<unsigned long long>(i),
              static_cast<unsigned long long>(errors));
  EXPECT_GT(errors, 0u);
}

TEST(PackedParquetDecoderFuzz, random_bytes_decode_cleanly_or_fail_with_input_error) {
  Bounds bounds;
  Fuzzer fz(bounds.seed + 1000);
  uint64_t i = 0, errors = 0;
  std::vector<uint8_t> scratch;
  std::vector<uint32_t> out32;
  for (; bounds.more(i); ++i) {
    // Mostly-valid prefixes make the decoders go deep: thrift structs, RLE headers, snappy tags.
    std::string bytes(fz.u(96), '\0');
    for (auto& c : bytes) c = static_cast<char>(fz.coin(3) ? fz.u(256) : fz.u(32));
    const auto* d = reinterpret_cast<const uint8_t*>(bytes.data());
    try {
      switch (fz.u(4)) {
        case 0: pq::decode_file_metadata(d, bytes.size(), "fuzz"); break;
        case 1: {
          size_t hb = 0;
          pq::decode_page_header(d, bytes.size(), "fuzz", &hb);
          ASSERT_LE(hb, bytes.size());
          break;
        }
        case 2: {
          const int bw = static_cast<int>(fz.u(34));
          const size_t count = fz.u(300);
          out32.assign(count, 0);
          pq::decode_rle_hybrid(d, bytes.size(), bw, static_cast<uint32_t>(fz.rng()()), count, out32.data(), "fuzz");
          break;
        }
        default: {
          const int32_t codec = fz.coin(2) ? pq::kSnappy : pq::kZstd;
          const size_t claimed = fz.u(512);
          const uint8_t* r = pq::decompress_page(codec, d, bytes.size(), claimed, &scratch, "fuzz");
          ASSERT_TRUE(claimed == 0 || r != nullptr);
          break;
        }
      }
    } catch (const InputError&) {
      ++errors;
    } catch (const std::exception& e) {
      FAIL() << "iteration " << i << ": not an InputError: " << e.what();
    }
  }
  std::printf("parquet decoder fuzz: %llu iterations, %llu InputErrors\n", static_cast<unsigned long long>(i),
              static_cast<unsigned long long>(errors));
}

}  // namespace
}  // namespace nemotron::io
