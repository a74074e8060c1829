// JSON from outside the program (request bodies, JSONL rows, config and checkpoint files) parsed
// with a bound on how deeply arrays and objects nest, and JSON values quoted in error messages
// with a bound on length. nlohmann's parser is iterative, but copying, comparing, dumping and
// rendering a value recurse once per level: 100,000 nested `[` (200 KB) overflow the stack. The
// bounded parser stops at the first level past the limit, so the deep value is never built.
#pragma once
#include <cstddef>
#include <istream>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace nemotron {

// Deeper than any real config, row or request (OpenAI tool schemas nest a dozen levels), and
// shallow enough for every recursive walk of a value on any thread's stack.
inline constexpr int kMaxJsonDepth = 256;

// Where and why a text was refused: 1-based line and column (in bytes) of the point where
// parsing stopped, and nlohmann's reason ("syntax error while parsing value - ...") or ours
// ("arrays and objects nested deeper than 256 levels").
struct JsonError {
  size_t line = 1, column = 1;
  std::string reason;
  std::string where() const;  // "line 3, column 14"
};

// Parses `text` (one JSON value, nothing after it but whitespace) into `out`, with arrays and
// objects nested at most `max_depth` levels. Returns nullopt on success; on failure `out` is null
// and the error says where. Never throws for bad input.
template <class Json>
std::optional<JsonError> parse_json_bounded(std::string_view text, Json& out, int max_depth = kMaxJsonDepth);

// As parse_json_bounded, throwing InputError "<source>: JSON parse error at line L, column C:
// <reason>" (source: a file name, "request body", ...).
template <class Json>
Json parse_json(std::string_view text, const std::string& source, int max_depth = kMaxJsonDepth);

// The whole stream read, then parsed as above (source: the file's name).
template <class Json>
Json parse_json(std::istream& in, const std::string& source, int max_depth = kMaxJsonDepth);

// nlohmann's parse(text, nullptr, false) with the depth bound: a discarded value (is_discarded())
// when the text is not JSON or nests too deeply, for callers that skip or report bad input
// themselves.
template <class Json>
Json parse_json_or_discarded(std::string_view text, int max_depth = kMaxJsonDepth);
template <class Json>
Json parse_json_or_discarded(std::istream& in, int max_depth = kMaxJsonDepth);

// At most about `max_chars` characters of `v` serialised, "..." when cut: for error messages.
// Costs O(max_chars) however large or deep `v` is (it never serialises the whole value).
template <class Json>
std::string json_excerpt(const Json& v, size_t max_chars = 80);

}  // namespace nemotron
