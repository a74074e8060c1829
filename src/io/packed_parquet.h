// Packed SFT shards in Parquet (reference/data-formats.md §6.5): one row = one packed bin with
// three list columns, input_ids list<int32>, loss_mask list<uint8> (already shifted) and
// seq_start_id list<int32>. The files are read by the Python stack (pyarrow / Megatron-Bridge's
// GPTSFTPackedParquetDataset), so the writer emits standard Parquet: Thrift compact metadata,
// data pages v1 with RLE repetition/definition levels, PLAIN values, zstd or no compression.
// The reader takes what the writer writes and files of the same shape from pyarrow (PLAIN or
// dictionary-encoded values, data pages v1 or v2, zstd, snappy or none, INT32 or INT64 lists,
// extra columns ignored); anything else is an InputError naming the file, row group and column.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace nemotron::io {

// The three columns, in file order.
inline constexpr const char* kPackedParquetColumns[3] = {"input_ids", "loss_mask", "seq_start_id"};

struct PackedRow {
  std::vector<int32_t> input_ids;
  std::vector<uint8_t> loss_mask;     // same length as input_ids
  std::vector<int32_t> seq_start_id;  // first 0, strictly increasing, each < input_ids.size()
};

// Throws InputError naming `source` and the row when the §6.5 validation rules fail.
void validate_packed_row(const PackedRow& row, const std::string& source, int64_t row_index);

struct PackedParquetOptions {
  bool zstd = true;                 // Nemotron writes zstd; false = uncompressed
  int64_t rows_per_row_group = 1000;
};

// Streams rows into `path`: written to a temporary name beside it and renamed on close(), so a
// crash never leaves a partial file under the final name. A writer destroyed without close()
// removes its temporary file.
class PackedParquetWriter {
 public:
  PackedParquetWriter(const std::string& path, PackedParquetOptions opts = {});
  ~PackedParquetWriter();
  PackedParquetWriter(const PackedParquetWriter&) = delete;
  PackedParquetWriter& operator=(const PackedParquetWriter&) = delete;
  void add(const PackedRow& row);  // validates the row first
  void close();
  int64_t rows_written() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Reads every row of a packed shard (validated). InputError naming the file on anything malformed.
std::vector<PackedRow> read_packed_parquet(const std::string& path);
// Row count from the footer alone.
int64_t packed_parquet_num_rows(const std::string& path);

}  // namespace nemotron::io
