#include "core/json_limits.h"

#include <cstdio>
#include <iterator>

#include <fmt/format.h>

#include "core/error.h"

namespace nemotron {

namespace {

// nlohmann's DOM builder behind a depth gate: every event is forwarded, and the first array or
// object past `max_depth` stops the parse (returning false from a SAX event ends it at once).
template <class Json>
class DepthBoundedSax {
 public:
  using number_integer_t = typename Json::number_integer_t;
  using number_unsigned_t = typename Json::number_unsigned_t;
  using number_float_t = typename Json::number_float_t;
  using string_t = typename Json::string_t;
  using binary_t = typename Json::binary_t;

  DepthBoundedSax(Json& out, int max_depth) : dom_(out, /*allow_exceptions=*/false), max_depth_(max_depth) {}

  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(number_float_t v, const string_t& s) { return dom_.number_float(v, s); }
  bool string(string_t& v) { return dom_.string(v); }
  bool binary(binary_t& v) { return dom_.binary(v); }
  bool key(string_t& v) { return dom_.key(v); }
  bool start_object(std::size_t n) { return enter() && dom_.start_object(n); }
  bool start_array(std::size_t n) { return enter() && dom_.start_array(n); }
  bool end_object() {
    --depth_;
    return dom_.end_object();
  }
  bool end_array() {
    --depth_;
    return dom_.end_array();
  }
  template <class Exception>
  bool parse_error(std::size_t, const std::string&, const Exception& e) {
    message_ = e.what();
    return false;
  }

  bool too_deep() const { return too_deep_; }
  const std::string& message() const { return message_; }

 private:
  bool enter() {
    if (++depth_ <= max_depth_) return true;
    too_deep_ = true;
    return false;
  }
  nlohmann::detail::json_sax_dom_parser<Json> dom_;
  int depth_ = 0, max_depth_;
  bool too_deep_ = false;
  std::string message_;
};

// The line and column of the bracket that opens level max_depth + 1. Only called after the SAX
// parse stopped there, so the text before it is valid JSON and brackets inside strings are the
// only ones to skip.
JsonError locate_too_deep(std::string_view text, int max_depth) {
  JsonError e;
  e.reason = fmt::format("arrays and objects nested deeper than {} levels", max_depth);
  int depth = 0;
  bool in_string = false, escaped = false;
  size_t line_start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++e.line;
      line_start = i + 1;
    }
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        e.column = i - line_start + 1;
        return e;
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return e;
}

// nlohmann's "[json.exception.parse_error.101] parse error at line 3, column 14: <reason>" as its
// parts (a message without a position keeps line 1, column 1 and the whole text as the reason).
JsonError split_nlohmann_message(const std::string& what) {
  JsonError e;
  e.reason = what;
  const size_t at = what.find("at line ");
  if (at == std::string::npos) return e;
  unsigned long line = 0, column = 0;
  int used = 0;
  if (std::sscanf(what.c_str() + at, "at line %lu, column %lu: %n", &line, &column, &used) == 2 && used > 0) {
    e.line = line;
    e.column = column;
    e.reason = what.substr(at + static_cast<size_t>(used));
  }
  return e;
}

// Back off to the start of a UTF-8 sequence, so a cut never splits a character.
size_t utf8_cut(const std::string& s, size_t n) {
  while (n > 0 && n < s.size() && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return n;
}

template <class Json>
void append_string(std::string& out, const std::string& s, size_t budget) {
  const std::string piece = s.size() > budget ? s.substr(0, utf8_cut(s, budget)) : s;
  // replace: a cut in the middle of invalid UTF-8 must not throw while building an error message
  out += Json(piece).dump(-1, ' ', false, Json::error_handler_t::replace);
}

// dump()'s compact form, stopping once `out` is longer than `limit`: each level writes at least
// one character, so the recursion is at most `limit` deep whatever the value.
template <class Json>
void excerpt(const Json& v, std::string& out, size_t limit) {
  if (out.size() > limit) return;
  if (v.is_string()) {
    append_string<Json>(out, v.template get_ref<const std::string&>(), limit - out.size() + 1);
  } else if (v.is_array()) {
    out += '[';
    bool first = true;
    for (const Json& e : v) {
      if (out.size() > limit) return;
      if (!first) out += ',';
      first = false;
      excerpt(e, out, limit);
    }
    out += ']';
  } else if (v.is_object()) {
    out += '{';
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (out.size() > limit) return;
      if (!first) out += ',';
      first = false;
      append_string<Json>(out, it.key(), limit - out.size() + 1);
      out += ':';
      excerpt(it.value(), out, limit);
    }
    out += '}';
  } else {
    out += v.dump(-1, ' ', false, Json::error_handler_t::replace);  // a scalar: a few characters
  }
}

std::string read_all(std::istream& in) {
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

std::string JsonError::where() const { return fmt::format("line {}, column {}", line, column); }

template <class Json>
std::optional<JsonError> parse_json_bounded(std::string_view text, Json& out, int max_depth) {
  out = Json();
  DepthBoundedSax<Json> sax(out, max_depth);
  if (Json::sax_parse(text.data(), text.data() + text.size(), &sax)) return std::nullopt;
  out = Json();  // the part built before the stop (at most max_depth deep)
  if (sax.too_deep()) return locate_too_deep(text, max_depth);
  return split_nlohmann_message(sax.message());
}

template <class Json>
Json parse_json(std::string_view text, const std::string& source, int max_depth) {
  Json out;
  if (std::optional<JsonError> e = parse_json_bounded(text, out, max_depth))
    throw InputError(fmt::format("{}: JSON parse error at {}: {}", source, e->where(), e->reason));
  return out;
}

template <class Json>
Json parse_json(std::istream& in, const std::string& source, int max_depth) {
  return parse_json<Json>(read_all(in), source, max_depth);
}

template <class Json>
Json parse_json_or_discarded(std::string_view text, int max_depth) {
  Json out;
  if (parse_json_bounded(text, out, max_depth)) return Json(Json::value_t::discarded);
  return out;
}

template <class Json>
Json parse_json_or_discarded(std::istream& in, int max_depth) {
  return parse_json_or_discarded<Json>(read_all(in), max_depth);
}

template <class Json>
std::string json_excerpt(const Json& v, size_t max_chars) {
  if (max_chars < 4) max_chars = 4;
  std::string out;
  excerpt(v, out, max_chars);
  if (out.size() <= max_chars) return out;
  out.resize(utf8_cut(out, max_chars - 3));
  return out + "...";
}

template std::optional<JsonError> parse_json_bounded(std::string_view, nlohmann::json&, int);
template std::optional<JsonError> parse_json_bounded(std::string_view, nlohmann::ordered_json&, int);
template nlohmann::json parse_json(std::string_view, const std::string&, int);
template nlohmann::ordered_json parse_json(std::string_view, const std::string&, int);
template nlohmann::json parse_json(std::istream&, const std::string&, int);
template nlohmann::ordered_json parse_json(std::istream&, const std::string&, int);
template nlohmann::json parse_json_or_discarded(std::string_view, int);
template nlohmann::ordered_json parse_json_or_discarded(std::string_view, int);
template nlohmann::json parse_json_or_discarded(std::istream&, int);
template nlohmann::ordered_json parse_json_or_discarded(std::istream&, int);
template std::string json_excerpt(const nlohmann::json&, size_t);
template std::string json_excerpt(const nlohmann::ordered_json&, size_t);

}  // namespace nemotron
