// Rows of a Parquet file with nested columns (Hugging Face chat datasets: a `messages`
// list<struct<role, content, reasoning_content, tool_calls list<struct<...>>>>, `tools`, ...) as
// the JSON objects pyarrow's Table.to_pylist() gives: structs become objects with every field in
// schema order (a field a row lacks is null), lists arrays, strings strings. Read one row group at
// a time over the page code the packed-shard reader uses (parquet_pages.h): data pages v1/v2,
// PLAIN or dictionary values, zstd/snappy/none. Leaves: BOOLEAN, INT32, INT64, FLOAT, DOUBLE and
// BYTE_ARRAY annotated STRING/JSON (checked to be UTF-8); groups: structs and 3-level LISTs,
// nested to any depth. Anything else (maps, legacy 2-level lists, other encodings) is an
// InputError naming the file, row group and column (and the row when one is at fault).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace nemotron::io {

class ParquetRowReader {
 public:
  // Opens the file and checks its footer and schema (nothing of the data is read yet).
  explicit ParquetRowReader(const std::string& path);
  ~ParquetRowReader();
  ParquetRowReader(const ParquetRowReader&) = delete;
  ParquetRowReader& operator=(const ParquetRowReader&) = delete;

  // The next row as a JSON object, keys in schema order; false after the last row.
  bool next_row(nlohmann::ordered_json& row);
  int64_t num_rows() const;
  // "<file>: row N" (0-based, as pyarrow and pandas count) of the row last returned.
  std::string where() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nemotron::io
