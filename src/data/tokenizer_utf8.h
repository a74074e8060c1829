// UTF-8 helpers for the tokenizer: validation, code point stepping, and the lossy byte -> text
// conversion that Hugging Face decoders apply (Rust's String::from_utf8_lossy: every maximal
// invalid subsequence becomes one U+FFFD). Inputs to the stepping functions must be valid UTF-8.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace nemotron::data {

// Byte offset of the first invalid UTF-8 sequence in `s`, or std::string_view::npos if `s` is
// valid (overlong forms, surrogates and code points above U+10FFFF are invalid).
size_t utf8_invalid_at(std::string_view s);

// Length in bytes of the (valid) UTF-8 sequence that starts with `lead`.
inline int utf8_char_len(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

// Decodes the (valid) code point at s[i] and advances i past it.
uint32_t utf8_next(std::string_view s, size_t& i);

// Appends the UTF-8 encoding of code point `cp` (< 0x110000).
void utf8_append(std::string& out, uint32_t cp);

// `bytes` as text: valid sequences are copied, each maximal invalid subsequence becomes U+FFFD.
std::string utf8_lossy(std::string_view bytes);

// Unicode White_Space (the set Rust's char::is_whitespace and Oniguruma's \s use).
bool is_unicode_whitespace(uint32_t cp);

}  // namespace nemotron::data
