// JSON object rows from a file of rows, whatever its format: JSON Lines (.jsonl/.json, one
// object a line) or Parquet (.parquet, nested columns as pyarrow's to_pylist() gives them, the
// form Hugging Face chat datasets ship in). Data prep reads chat and RL rows through this, so a
// Parquet file and the same rows as JSONL give the same output.
#pragma once
#include <memory>
#include <string>

#include "data/jsonl.h"
#include "data/python_format.h"
#include "io/parquet_rows.h"

namespace nemotron::data {

// True for the file names RowReader reads as Parquet.
bool is_parquet_path(const std::string& path);

class RowReader {
 public:
  // Throws InputError when the file cannot be opened (or a Parquet footer/schema is invalid).
  // `max_row_bytes` bounds a JSON Lines row (JsonlReader).
  explicit RowReader(const std::string& path, int64_t max_row_bytes = kDefaultMaxRowBytes);
  // The next row (keys in file / schema order); false at the end of the file.
  bool next_row(OrderedJson& row);
  // Where the row last returned came from, the prefix of errors about it: "<file>:<line>" for
  // JSON Lines, "<file>: row N" (0-based) for Parquet.
  std::string where() const;

 private:
  std::unique_ptr<JsonlReader> jsonl_;
  std::unique_ptr<io::ParquetRowReader> parquet_;
};

}  // namespace nemotron::data
