// What the benchmark programs share around their measurements: the comma-separated size lists of
// their --sweep options, and the JSON line each appends to --results (stamped with the UTC date and
// the commit in NEMOTRON_COMMIT, "unknown" when unset), so every results file reads alike.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace nemotron::bench {

// "1,8,32" -> {1, 8, 32}; empty items are skipped ("" -> {}).
inline std::vector<int64_t> parse_sizes(const std::string& s) {
  std::vector<int64_t> out;
  size_t at = 0;
  while (at < s.size()) {
    size_t end = s.find(',', at);
    if (end == std::string::npos) end = s.size();
    if (end > at) out.push_back(std::stoll(s.substr(at, end - at)));
    at = end + 1;
  }
  return out;
}

inline std::string commit_or_unknown() {
  const char* c = std::getenv("NEMOTRON_COMMIT");
  return c ? c : "unknown";
}

// Adds "date": the UTC time now, ISO 8601.
inline void stamp_date(nlohmann::json& rec) {
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  rec["date"] = date;
}

// Appends rec as one line to `path` (nothing when path is empty).
inline void append_line(const std::string& path, const nlohmann::json& rec) {
  if (!path.empty()) std::ofstream(path, std::ios::app) << rec.dump() << "\n";
}

// stamp_date, then append_line.
inline void append_result(const std::string& path, nlohmann::json rec) {
  stamp_date(rec);
  append_line(path, rec);
}

}  // namespace nemotron::bench
