#include "data/tokenizer_utf8.h"

namespace nemotron::data {

namespace {

// Length of the longest prefix of s[i..] that is a valid UTF-8 sequence or the start of one
// (the "maximal subpart"), and whether that prefix is a complete character.
struct Subpart {
  size_t len;
  bool complete;
};

Subpart utf8_subpart(std::string_view s, size_t i) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) return {1, true};
  int need;            // continuation bytes after the lead
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the first continuation byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0) lo = 0xA0;  // no overlong forms
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return {1, false};
  }
  size_t k = 1;
  for (int j = 0; j < need; ++j) {
    if (i + k >= s.size()) return {k, false};
    const auto b = static_cast<uint8_t>(s[i + k]);
    const uint8_t l = j == 0 ? lo : 0x80, h = j == 0 ? hi : 0xBF;
    if (b < l || b > h) return {k, false};
    ++k;
  }
  return {k, true};
}

}  // namespace

size_t utf8_invalid_at(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {  // ASCII run
      ++i;
      continue;
    }
    const Subpart p = utf8_subpart(s, i);
    if (!p.complete) return i;
    i += p.len;
  }
  return std::string_view::npos;
}

uint32_t utf8_next(std::string_view s, size_t& i) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  const int len = utf8_char_len(b0);
  uint32_t cp = b0 & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
  for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
  i += len;
  return cp;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    const Subpart p = utf8_subpart(bytes, i);
    if (p.complete) {
      out.append(bytes.substr(i, p.len));
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
    }
    i += p.len;
  }
  return out;
}

bool is_unicode_whitespace(uint32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  if (cp < 0x85) return false;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

}  // namespace nemotron::data
