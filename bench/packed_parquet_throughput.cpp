// Throughput of the packed SFT Parquet shards (io/packed_parquet.h): writing and reading a
// realistic shard, 1000 packed bins of 4096 tokens (Nemotron's row group size, a common pack size),
// zstd and uncompressed. Token ids are drawn log-uniformly below 131072 (a Zipf-like spread, so
// compression sees text-like ids); each bin packs sequences of 200-1200 tokens with a prompt
// (mask 0) then a response (mask 1). MB/s counts the in-memory payload (4 B per id + 1 B per mask
// + 4 B per start), the unit a data-prep run cares about.
// Usage: packed_parquet_throughput [rows=1000] [tokens_per_row=4096] [dir=/tmp] [repeats=3]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/rng.h"
#include "io/packed_parquet.h"

using namespace nemotron;
using namespace nemotron::io;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<PackedRow> make_rows(int64_t n, int64_t tokens) {
  Philox rng(7);
  uint64_t k = 0;
  auto uniform = [&] { return rng.uniform(k++); };
  std::vector<PackedRow> rows(static_cast<size_t>(n));
  for (auto& r : rows) {
    r.input_ids.resize(static_cast<size_t>(tokens));
    r.loss_mask.resize(static_cast<size_t>(tokens));
    for (auto& t : r.input_ids) t = static_cast<int32_t>(std::exp(uniform() * std::log(131072.0))) - 1;
    for (int64_t start = 0; start < tokens;) {
      const int64_t len = std::min<int64_t>(200 + static_cast<int64_t>(uniform() * 1000), tokens - start);
      const int64_t prompt = len * 2 / 5;
      r.seq_start_id.push_back(static_cast<int32_t>(start));
      for (int64_t j = 0; j < len; ++j) r.loss_mask[static_cast<size_t>(start + j)] = j >= prompt && j + 1 < len;
      start += len;
    }
  }
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 1000;
  const int64_t tokens = argc > 2 ? std::atoll(argv[2]) : 4096;
  const std::string dir = (argc > 3 ? argv[3] : "/tmp") + std::string("/nemotron_parquet_bench");
  const int repeats = argc > 4 ? std::atoi(argv[4]) : 3;
  std::filesystem::create_directories(dir);
  const auto rows = make_rows(n, tokens);
  double payload = 0;
  for (const auto& r : rows) payload += 5.0 * static_cast<double>(r.input_ids.size()) + 4.0 * static_cast<double>(r.seq_start_id.size());
  std::printf("packed_parquet_throughput: %lld rows x %lld tokens, payload %.1f MB, best of %d\n",
              static_cast<long long>(n), static_cast<long long>(tokens), payload / 1e6, repeats);

  for (bool zstd : {true, false}) {
    const std::string path = dir + (zstd ? "/shard_zstd.parquet" : "/shard_none.parquet");
    double write_s = 1e30, read_s = 1e30;
    int64_t checksum = 0;
    for (int rep = 0; rep < repeats; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      PackedParquetWriter w(path, {.zstd = zstd, .rows_per_row_group = 1000});
      for (const auto& r : rows) w.add(r);
      w.close();
      write_s = std::min(write_s, seconds_since(t0));
      t0 = std::chrono::steady_clock::now();
      const auto back = read_packed_parquet(path);
      read_s = std::min(read_s, seconds_since(t0));
      checksum = 0;
      for (const auto& r : back) checksum += r.input_ids.back() + r.loss_mask.back() + r.seq_start_id.back();
      if (back.size() != rows.size() || back.back().input_ids != rows.back().input_ids) {
        std::fprintf(stderr, "packed_parquet_throughput: %s did not read back what was written\n", path.c_str());
        return 1;
      }
    }
    const double file_mb = static_cast<double>(std::filesystem::file_size(path)) / 1e6;
    std::printf("  %-4s file %7.2f MB (%.2fx)  write %7.1f MB/s %8.0f rows/s (%.3f s, incl. fsync)"
                "  read %7.1f MB/s %8.0f rows/s (%.3f s, validated)  checksum %lld\n",
                zstd ? "zstd" : "none", file_mb, payload / 1e6 / file_mb, payload / 1e6 / write_s,
                static_cast<double>(n) / write_s, write_s, payload / 1e6 / read_s, static_cast<double>(n) / read_s,
                read_s, static_cast<long long>(checksum));
  }
  std::filesystem::remove_all(dir);
  return 0;
}
