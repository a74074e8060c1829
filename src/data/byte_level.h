// GPT-2 byte-level alphabet: every byte 0..255 is shown as one printable code point (printable
// Latin-1 bytes as themselves, the other 68 bytes as U+0100..U+0143 in byte order), so BPE works on
// text of any encoding with a 256-symbol base alphabet. Same table as Hugging Face `ByteLevel`.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace nemotron::data {

// The pre-tokenizer regex ByteLevel applies when `use_regex` is true (GPT-2's pattern).
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Code point that stands for byte b.
uint32_t byte_level_char(uint8_t b);
// Byte that code point cp stands for, or -1 if cp is not in the alphabet.
int byte_level_byte(uint32_t cp);
// The 256 alphabet characters as UTF-8 strings, indexed by byte.
const std::array<std::string, 256>& byte_level_alphabet();

// Appends the byte-level form of `bytes` (each byte -> its character, UTF-8 encoded) to `out`.
void byte_level_encode(std::string_view bytes, std::string& out);

// Hugging Face ByteLevel decoder for one token: if every character of `token` is in the alphabet,
// appends the bytes they stand for; otherwise appends the token's own UTF-8 bytes unchanged.
void byte_level_decode_token(std::string_view token, std::string& out);

}  // namespace nemotron::data
