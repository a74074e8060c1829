// Streaming reader of JSON Lines files (one JSON object per line), the input of data prep.
// Lines are read one at a time (files of any size); a missing final newline, CRLF endings, a
// UTF-8 byte-order mark and blank lines (skipped) are accepted. A line is read up to a size limit
// (max_row_bytes), so one huge row is refused before it is held in memory. Every problem with a
// row is an InputError "<file>:<line>: ..." naming the field and what was expected.
#pragma once
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nemotron::data {

// The default row size limit: a 128k-token conversation is about 0.5 MB of JSON; a 200 MB row took
// 87 s and 5.3 GB to be dropped.
constexpr int64_t kDefaultMaxRowBytes = 16 << 20;

class JsonlReader {
 public:
  // Throws InputError when the file cannot be opened. A row longer than `max_row_bytes` is an
  // InputError "<file>:<line>: ..." naming the limit and the key that raises it.
  explicit JsonlReader(std::string path, int64_t max_row_bytes = kDefaultMaxRowBytes);

  // The next non-blank row, which must be a JSON object; false at the end of the file.
  bool next_row(nlohmann::json& row);
  // The same with the row's keys kept in file order (chat rows: tool-call arguments render in order).
  bool next_row(nlohmann::ordered_json& row);
  // The string field `key` of the next row (e.g. "text"); false at the end of the file.
  bool next_text(std::string& text, const std::string& key = "text");
  // 1-based line number of the row last returned.
  int64_t line_number() const { return line_; }
  const std::string& path() const { return path_; }
  // "<file>:<line>", the prefix of this reader's errors.
  std::string where() const;

 private:
  bool next_line(std::string& line);
  template <class Json>
  bool next_row_as(Json& row);

  std::string path_;
  std::ifstream in_;
  std::vector<char> buffer_;
  int64_t line_ = 0;
  int64_t max_row_bytes_;
};

// The string field `key` of a parsed row; `where` ("<file>:<line>") prefixes errors.
const std::string& row_string_field(const nlohmann::json& row, const std::string& key, const std::string& where);

// Writes rows as JSON Lines (compact, one per line, '\n'), through a temporary file and a rename.
void write_jsonl(const std::string& path, const std::vector<nlohmann::json>& rows);

}  // namespace nemotron::data
