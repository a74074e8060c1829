#include "data/jsonl.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/json_limits.h"

namespace nemotron::data {

namespace {

std::string short_value(const nlohmann::json& v) { return json_excerpt(v, 60); }

}  // namespace

JsonlReader::JsonlReader(std::string path, int64_t max_row_bytes)
    : path_(std::move(path)), buffer_(1 << 20), max_row_bytes_(max_row_bytes) {
  in_.rdbuf()->pubsetbuf(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
  in_.open(path_, std::ios::binary);
  if (!in_) throw InputError(fmt::format("{}: cannot open: {}", path_, std::strerror(errno)));
}

std::string JsonlReader::where() const { return fmt::format("{}:{}", path_, line_); }

bool JsonlReader::next_line(std::string& line) {
  std::streambuf* in = in_.rdbuf();
  for (;;) {
    // One line, refused as soon as it passes the limit (std::getline would hold all of it first).
    line.clear();
    int c = in->sbumpc();
    if (c == std::char_traits<char>::eof()) break;
    ++line_;
    auto too_long = [&] {
      return InputError(fmt::format("{}: the row is longer than max_row_bytes = {} bytes (raise max_row_bytes for "
                                    "longer rows)",
                                    where(), max_row_bytes_));
    };
    for (; c != std::char_traits<char>::eof() && c != '\n'; c = in->sbumpc()) {
      if (static_cast<int64_t>(line.size()) > max_row_bytes_) throw too_long();  // room for a final CR
      line.push_back(static_cast<char>(c));
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (static_cast<int64_t>(line.size()) > max_row_bytes_) throw too_long();
    if (line_ == 1 && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);
    if (line.find_first_not_of(" \t\r\f\v") != std::string::npos) return true;
  }
  if (in_.bad()) throw Error(fmt::format("{}: read failed after line {}: {}", path_, line_, std::strerror(errno)));
  return false;
}

template <class Json>
bool JsonlReader::next_row_as(Json& row) {
  std::string line;
  if (!next_line(line)) return false;
  // The column only: the line is always 1 within a row; ours is the file's.
  if (std::optional<JsonError> e = parse_json_bounded(line, row))
    throw InputError(fmt::format("{}: invalid JSON at column {}: {}", where(), e->column, e->reason));
  if (!row.is_object())
    throw InputError(fmt::format("{}: expected a JSON object, got {}", where(), json_excerpt(row, 60)));
  return true;
}

bool JsonlReader::next_row(nlohmann::json& row) { return next_row_as(row); }
bool JsonlReader::next_row(nlohmann::ordered_json& row) { return next_row_as(row); }

const std::string& row_string_field(const nlohmann::json& row, const std::string& key, const std::string& where) {
  auto it = row.find(key);
  if (it == row.end()) {
    std::string keys;
    for (const auto& [k, v] : row.items()) keys += fmt::format("{}\"{}\"", keys.empty() ? "" : ", ", k);
    throw InputError(fmt::format("{}: missing field \"{}\" (the row has {})", where, key,
                                 keys.empty() ? "no fields" : "fields " + keys));
  }
  if (!it->is_string())
    throw InputError(fmt::format("{}: field \"{}\": expected a string, got {}", where, key, short_value(*it)));
  return it->get_ref<const std::string&>();
}

bool JsonlReader::next_text(std::string& text, const std::string& key) {
  nlohmann::json row;
  if (!next_row(row)) return false;
  text = row_string_field(row, key, where());
  return true;
}

void write_jsonl(const std::string& path, const std::vector<nlohmann::json>& rows) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw InputError(fmt::format("{}: cannot create: {}", tmp, std::strerror(errno)));
  bool ok = true;
  for (const auto& row : rows) {
    const std::string line = row.dump() + "\n";
    ok = ok && std::fwrite(line.data(), 1, line.size(), f) == line.size();
  }
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    throw Error(fmt::format("{}: write failed: {}", tmp, std::strerror(errno)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw Error(fmt::format("{}: rename failed: {}", path, std::strerror(errno)));
}

}  // namespace nemotron::data
