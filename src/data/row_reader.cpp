// Opens a row file by its extension: .parquet/.pq through io::ParquetRowReader, anything else
// (.jsonl, .json) as JSON Lines.
#include "data/row_reader.h"

namespace nemotron::data {

bool is_parquet_path(const std::string& path) { return path.ends_with(".parquet") || path.ends_with(".pq"); }

RowReader::RowReader(const std::string& path, int64_t max_row_bytes) {
  if (is_parquet_path(path)) parquet_ = std::make_unique<io::ParquetRowReader>(path);
  else jsonl_ = std::make_unique<JsonlReader>(path, max_row_bytes);
}

bool RowReader::next_row(OrderedJson& row) { return parquet_ ? parquet_->next_row(row) : jsonl_->next_row(row); }

std::string RowReader::where() const { return parquet_ ? parquet_->where() : jsonl_->where(); }

}  // namespace nemotron::data
