#include "data/jinja/string_methods.h"

#include <algorithm>

#include <fmt/format.h>

#include "data/jinja/builtins.h"
#include "data/python_format.h"

namespace nemotron::data::jinja {

std::string ascii_lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

std::string ascii_upper(std::string s) {
  for (char& c : s)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return s;
}

std::string capitalize(const std::string& s) {
  if (s.empty()) return s;
  return ascii_upper(s.substr(0, 1)) + ascii_lower(s.substr(1));
}

std::string jinja_title(const std::string& s) {
  // jinja2: "".join(w[0].upper() + w[1:].lower() for w in re.split(r"([-\s({\[<]+)", s) if w):
  // separator runs are items too, their first character unchanged by upper().
  std::string out;
  bool word_start = true;
  for (size_t k = 0; k < s.size(); ++k) {
    const char c = s[k];
    const bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || python_space_length(s, k) > 0;
    if (sep) {
      const size_t n = std::max<size_t>(1, python_space_length(s, k));
      out.append(s, k, n);
      k += n - 1;
      word_start = true;
    } else {
      out += word_start ? ascii_upper(std::string(1, c)) : ascii_lower(std::string(1, c));
      word_start = false;
    }
  }
  return out;
}

std::string python_strip_str(const std::string& s) { return python_strip(s); }

std::string strip_chars(const std::string& s, const Value& chars, int side) {
  if (chars.is_undefined() || chars.is_none()) {
    if (side == 1) return python_lstrip(s);
    if (side == 2) return python_rstrip(s);
    return python_strip(s);
  }
  const std::string set = to_str(chars);
  const std::vector<size_t> cp = code_point_offsets(s), set_cp = code_point_offsets(set);
  const auto in_set = [&](size_t k) {
    const std::string_view c(s.data() + cp[k], cp[k + 1] - cp[k]);
    for (size_t j = 0; j + 1 < set_cp.size(); ++j)
      if (std::string_view(set.data() + set_cp[j], set_cp[j + 1] - set_cp[j]) == c) return true;
    return false;
  };
  size_t b = 0, e = cp.size() - 1;
  if (side & 1)
    while (b < e && in_set(b)) ++b;
  if (side & 2)
    while (e > b && in_set(e - 1)) --e;
  return s.substr(cp[b], cp[e] - cp[b]);
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] != '\n' && s[k] != '\r') continue;
    out.push_back(s.substr(start, k - start));
    if (s[k] == '\r' && k + 1 < s.size() && s[k + 1] == '\n') ++k;
    start = k + 1;
  }
  if (start < s.size()) out.push_back(s.substr(start));
  return out;
}

std::string replace(const std::string& s, const std::string& from, const std::string& to, int64_t count, int line) {
  std::string out;
  if (from.empty()) {  // Python inserts `to` before every character and at the end
    const std::vector<size_t> cp = code_point_offsets(s);
    for (size_t k = 0; k < cp.size(); ++k) {
      if (count < 0 || static_cast<int64_t>(k) < count) out += to;
      if (k + 1 < cp.size()) out.append(s, cp[k], cp[k + 1] - cp[k]);
      check_size(out.size(), line);
    }
    return out;
  }
  size_t pos = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    const size_t at = s.find(from, pos);
    if (at == std::string::npos) break;
    out.append(s, pos, at - pos).append(to);
    check_size(out.size(), line);
    pos = at + from.size();
  }
  return out.append(s, pos, std::string::npos);
}

namespace {

[[noreturn]] void fail(const std::string& what, int line) { throw TemplateError(what, line); }

const std::string& str_arg(const Args& a, size_t k, const char* name, const char* method) {
  const Value& v = k < a.pos.size() ? a.pos[k] : Value::undefined();
  if (!v.is_string()) fail(fmt::format("str.{}: argument {} must be a string, got {}", method, name, kind_name(v)), a.line);
  return v.str();
}

// str.split / rsplit: on runs of whitespace (leading and trailing ignored) or on an exact separator.
Value split(const std::string& s, const Args& a, bool from_right) {
  const Value sep = a.get(0, "sep", Value::none());
  const Value maxv = a.get(1, "maxsplit", Value::integer(-1));
  const int64_t max = maxv.kind == Value::Kind::integer ? maxv.i : -1;
  List parts;
  if (sep.is_none()) {
    std::vector<std::pair<size_t, size_t>> words;  // [begin, end) of each word
    size_t k = 0;
    while (k < s.size()) {
      while (k < s.size() && python_space_length(s, k)) k += python_space_length(s, k);
      if (k >= s.size()) break;
      const size_t b = k;
      while (k < s.size() && !python_space_length(s, k)) ++k;
      words.emplace_back(b, k);
    }
    if (max >= 0 && static_cast<int64_t>(words.size()) > max) {
      // The unsplit remainder keeps its whitespace: trailing for split, leading for rsplit.
      if (!from_right) {
        for (int64_t w = 0; w < max; ++w) parts.push_back(Value::string(s.substr(words[w].first, words[w].second - words[w].first)));
        parts.push_back(Value::string(s.substr(words[static_cast<size_t>(max)].first)));
      } else {
        const size_t first_kept = words.size() - static_cast<size_t>(max);
        parts.push_back(Value::string(s.substr(0, words[first_kept - 1].second)));
        for (size_t w = first_kept; w < words.size(); ++w) parts.push_back(Value::string(s.substr(words[w].first, words[w].second - words[w].first)));
      }
      return Value::list(std::move(parts));
    }
    for (const auto& [b, e] : words) parts.push_back(Value::string(s.substr(b, e - b)));
    return Value::list(std::move(parts));
  }
  if (!sep.is_string()) fail(fmt::format("str.split: separator must be a string or None, got {}", kind_name(sep)), a.line);
  const std::string& d = sep.str();
  if (d.empty()) fail("empty separator", a.line);
  std::vector<size_t> cuts;
  for (size_t at = s.find(d); at != std::string::npos; at = s.find(d, at + d.size())) cuts.push_back(at);
  if (max >= 0 && static_cast<int64_t>(cuts.size()) > max) {
    if (from_right) cuts.erase(cuts.begin(), cuts.end() - max);
    else cuts.resize(static_cast<size_t>(max));
  }
  size_t start = 0;
  for (size_t at : cuts) {
    parts.push_back(Value::string(s.substr(start, at - start)));
    start = at + d.size();
  }
  parts.push_back(Value::string(s.substr(start)));
  return Value::list(std::move(parts));
}

bool affix_matches(const std::string& s, const Value& affix, bool prefix, int line) {
  const auto one = [&](const Value& v) {
    if (!v.is_string()) fail(fmt::format("startswith/endswith take a string or tuple of strings, got {}", kind_name(v)), line);
    const std::string& x = v.str();
    return x.size() <= s.size() && (prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0);
  };
  if (affix.is_list()) return std::any_of(affix.l->begin(), affix.l->end(), one);
  return one(affix);
}

// str.format with "{}", "{0}", "{name}" fields and "{{" / "}}" escapes (no format specs).
std::string format(const std::string& f, const Args& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t k = 0; k < f.size(); ++k) {
    const char c = f[k];
    if ((c == '{' || c == '}') && k + 1 < f.size() && f[k + 1] == c) {
      out += c;
      ++k;
      continue;
    }
    if (c == '}') fail("single '}' encountered in format string", a.line);
    if (c != '{') {
      out += c;
      continue;
    }
    const size_t close = f.find('}', k);
    if (close == std::string::npos) fail("single '{' encountered in format string", a.line);
    const std::string field = f.substr(k + 1, close - k - 1);
    if (field.find_first_of(":!") != std::string::npos) fail("format specs are not supported in str.format", a.line);
    Value v;
    if (field.empty()) v = a.get(auto_index++, "");
    else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) v = a.get(std::stoul(field), "");
    else v = a.get(SIZE_MAX, field);
    if (v.is_undefined()) fail(fmt::format("str.format: no argument for field '{}'", field), a.line);
    out += to_str(v);
    check_size(out.size(), a.line);
    k = close;
  }
  return out;
}

}  // namespace

Value string_method(const Value& sv, const std::string& name) {
  static const char* kMethods[] = {"strip", "lstrip", "rstrip", "split", "rsplit", "replace", "startswith", "endswith",
                                   "upper", "lower", "title", "capitalize", "find", "rfind", "count", "format", "join",
                                   "splitlines", "isdigit", "isspace"};
  if (std::none_of(std::begin(kMethods), std::end(kMethods), [&](const char* m) { return name == m; }))
    return Value::undefined(fmt::format("str object' has no attribute '{}", name));
  return Value::callable([sv, name](Args& a) -> Value {
    const std::string& s = sv.str();
    if (name == "strip" || name == "lstrip" || name == "rstrip")
      return Value::string(strip_chars(s, a.get(0, "chars"), name == "lstrip" ? 1 : name == "rstrip" ? 2 : 3));
    if (name == "split" || name == "rsplit") return split(s, a, name == "rsplit");
    if (name == "replace") {
      const Value count = a.get(2, "count", Value::integer(-1));
      return Value::string(replace(s, str_arg(a, 0, "old", "replace"), str_arg(a, 1, "new", "replace"),
                                   count.kind == Value::Kind::integer ? count.i : -1, a.line));
    }
    if (name == "startswith" || name == "endswith") return Value::boolean(affix_matches(s, a.get(0, ""), name == "startswith", a.line));
    if (name == "upper") return Value::string(ascii_upper(s));
    if (name == "lower") return Value::string(ascii_lower(s));
    if (name == "capitalize") return Value::string(capitalize(s));
    if (name == "title") {
      std::string out;
      bool prev_letter = false;
      for (char c : s) {
        const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        out += letter ? (prev_letter ? ascii_lower(std::string(1, c)) : ascii_upper(std::string(1, c))) : std::string(1, c);
        prev_letter = letter;
      }
      return Value::string(std::move(out));
    }
    if (name == "find" || name == "rfind") {
      const std::string& sub = str_arg(a, 0, "sub", name.c_str());
      const size_t at = name == "find" ? s.find(sub) : s.rfind(sub);
      return Value::integer(at == std::string::npos ? -1 : static_cast<int64_t>(code_point_count(std::string_view(s).substr(0, at))));
    }
    if (name == "count") {
      const std::string& sub = str_arg(a, 0, "sub", "count");
      if (sub.empty()) return Value::integer(static_cast<int64_t>(code_point_count(s) + 1));
      int64_t n = 0;
      for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
      return Value::integer(n);
    }
    if (name == "format") return Value::string(format(s, a));
    if (name == "join") {
      std::string out;
      bool first = true;
      for (const Value& x : iterate(a.get(0, "iterable"), a.line)) {
        if (!x.is_string()) fail(fmt::format("str.join: expected str instance, {} found", kind_name(x)), a.line);
        if (!first) out += s;
        first = false;
        out += x.str();
        check_size(out.size(), a.line);
      }
      return Value::string(std::move(out));
    }
    if (name == "splitlines") {
      List out;
      for (std::string& l : split_lines(s)) out.push_back(Value::string(std::move(l)));
      return Value::list(std::move(out));
    }
    if (name == "isdigit") return Value::boolean(!s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }));
    return Value::boolean(!s.empty() && python_strip(s).empty());  // isspace
  });
}

Value dict_method(const Value& dv, const std::string& name) {
  return Value::callable([dv, name](Args& a) -> Value {
    const Dict& d = *dv.d;
    if (name == "get") {
      const Value key = a.get(0, "key");
      const Value* v = key.is_string() || key.kind == Value::Kind::integer ? find(d, key_of(key, a.line)) : nullptr;
      return v ? *v : a.get(1, "default", Value::none());
    }
    List out;
    for (const auto& [k, v] : d) {
      if (name == "items") out.push_back(Value::list({key_value(k), v}, true));
      else if (name == "keys") out.push_back(key_value(k));
      else out.push_back(v);
    }
    return Value::list(std::move(out));
  });
}

}  // namespace nemotron::data::jinja
