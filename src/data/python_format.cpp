#include "data/python_format.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

namespace nemotron::data {

std::string python_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  // Shortest round-trip digits in scientific form: "-1.2345e+02".
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  const size_t e = sci.find('e');
  std::string digits;
  for (size_t i = 0; i < e; ++i)
    if (sci[i] != '.') digits += sci[i];
  const int exp10 = std::stoi(sci.substr(e + 1));  // value = d.ddd x 10^exp10
  const int decpt = exp10 + 1;                     // value = 0.ddd x 10^decpt
  std::string out;
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out.assign("0.");
      out.append(static_cast<size_t>(-decpt), '0');
      out.append(digits);
    } else if (static_cast<size_t>(decpt) >= digits.size()) {
      out = digits + std::string(static_cast<size_t>(decpt) - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(decpt)) + "." + digits.substr(static_cast<size_t>(decpt));
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out.append(1, '.').append(digits, 1, std::string::npos);
    out += fmt::format("e{}{:02d}", exp10 < 0 ? '-' : '+', std::abs(exp10));
  }
  return negative ? "-" + out : out;
}

namespace {

std::string repr_string(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == static_cast<unsigned char>(quote) || c == '\\') out += '\\', out += static_cast<char>(c);
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  return out + quote;
}

void dump_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) out += fmt::format("\\u{:04x}", c);
        else out += static_cast<char>(c);
    }
  }
  out += '"';
}

void dump(std::string& out, const OrderedJson& v) {
  switch (v.type()) {
    case OrderedJson::value_t::null: out += "null"; break;
    case OrderedJson::value_t::boolean: out += v.get<bool>() ? "true" : "false"; break;
    case OrderedJson::value_t::number_integer: out += std::to_string(v.get<int64_t>()); break;
    case OrderedJson::value_t::number_unsigned: out += std::to_string(v.get<uint64_t>()); break;
    case OrderedJson::value_t::number_float: {
      const double d = v.get<double>();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : python_float_repr(d);
      break;
    }
    case OrderedJson::value_t::string: dump_string(out, v.get_ref<const std::string&>()); break;
    case OrderedJson::value_t::array: {
      out += '[';
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) out += ", ";
        dump(out, v[i]);
      }
      out += ']';
      break;
    }
    case OrderedJson::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [k, x] : v.items()) {
        if (!first) out += ", ";
        first = false;
        dump_string(out, k);
        out += ": ";
        dump(out, x);
      }
      out += '}';
      break;
    }
    default: out += "null";
  }
}

}  // namespace

std::string python_repr(const OrderedJson& v) {
  switch (v.type()) {
    case OrderedJson::value_t::string: return repr_string(v.get_ref<const std::string&>());
    case OrderedJson::value_t::array: {
      std::string out = "[";
      for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + python_repr(v[i]);
      return out + "]";
    }
    case OrderedJson::value_t::object: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, x] : v.items()) {
        out += (first ? "" : ", ") + repr_string(k) + ": " + python_repr(x);
        first = false;
      }
      return out + "}";
    }
    default: return python_str(v);
  }
}

std::string python_str(const OrderedJson& v) {
  switch (v.type()) {
    case OrderedJson::value_t::null: return "None";
    case OrderedJson::value_t::boolean: return v.get<bool>() ? "True" : "False";
    case OrderedJson::value_t::number_integer: return std::to_string(v.get<int64_t>());
    case OrderedJson::value_t::number_unsigned: return std::to_string(v.get<uint64_t>());
    case OrderedJson::value_t::number_float: return python_float_repr(v.get<double>());
    case OrderedJson::value_t::string: return v.get<std::string>();
    default: return python_repr(v);
  }
}

std::string python_json_dumps(const OrderedJson& v) {
  std::string out;
  dump(out, v);
  return out;
}

bool python_truthy(const OrderedJson& v) {
  switch (v.type()) {
    case OrderedJson::value_t::null: return false;
    case OrderedJson::value_t::boolean: return v.get<bool>();
    case OrderedJson::value_t::number_integer: return v.get<int64_t>() != 0;
    case OrderedJson::value_t::number_unsigned: return v.get<uint64_t>() != 0;
    case OrderedJson::value_t::number_float: return v.get<double>() != 0;
    case OrderedJson::value_t::string: return !v.get_ref<const std::string&>().empty();
    case OrderedJson::value_t::array:
    case OrderedJson::value_t::object: return !v.empty();
    default: return false;
  }
}

// Length of the whitespace character at s[i] (0 if none): ASCII \t\n\v\f\r, \x1c-\x1f, space,
// and U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
size_t python_space_length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  const unsigned c = b(0);
  if ((c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20)) return 1;
  if (c == 0xc2 && (b(1) == 0x85 || b(1) == 0xa0)) return 2;
  if (c == 0xe1 && b(1) == 0x9a && b(2) == 0x80) return 3;
  if (c == 0xe2 && b(1) == 0x80 && (b(2) <= 0x8a || b(2) == 0xa8 || b(2) == 0xa9 || b(2) == 0xaf) && b(2) >= 0x80) return 3;
  if (c == 0xe2 && b(1) == 0x81 && b(2) == 0x9f) return 3;
  if (c == 0xe3 && b(1) == 0x80 && b(2) == 0x80) return 3;
  return 0;
}

std::string python_strip(std::string_view s) { return python_rstrip(python_lstrip(s)); }

std::string python_lstrip(std::string_view s) {
  size_t begin = 0;
  while (begin < s.size()) {
    const size_t n = python_space_length(s, begin);
    if (!n) break;
    begin += n;
  }
  return std::string(s.substr(begin));
}

std::string python_rstrip(std::string_view s) {
  // Scan forward, remembering where the last non-space character ended.
  size_t end = 0, i = 0;
  while (i < s.size()) {
    const size_t n = python_space_length(s, i);
    if (n) {
      i += n;
    } else {
      ++i;
      end = i;
    }
  }
  return std::string(s.substr(0, end));
}

}  // namespace nemotron::data
