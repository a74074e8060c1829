#include "data/index_format.h"

#include <limits>

#include "core/error.h"

namespace nemotron::data {

size_t token_dtype_size(TokenDType t) {
  switch (t) {
    case TokenDType::u8: case TokenDType::i8: return 1;
    case TokenDType::i16: case TokenDType::u16: return 2;
    case TokenDType::i32: case TokenDType::f32: return 4;
    case TokenDType::i64: case TokenDType::f64: return 8;
  }
  NM_CHECK(false, "dtype code {}", static_cast<int>(t));
  return 0;
}

const char* token_dtype_name(TokenDType t) {
  switch (t) {
    case TokenDType::u8: return "uint8";
    case TokenDType::i8: return "int8";
    case TokenDType::i16: return "int16";
    case TokenDType::i32: return "int32";
    case TokenDType::i64: return "int64";
    case TokenDType::f64: return "float64";
    case TokenDType::f32: return "float32";
    case TokenDType::u16: return "uint16";
  }
  return "?";
}

std::optional<TokenDType> token_dtype_from_code(uint8_t code) {
  if (code < 1 || code > 8) return std::nullopt;
  return static_cast<TokenDType>(code);
}

std::optional<TokenDType> token_dtype_from_name(std::string_view name) {
  for (uint8_t code = 1; code <= 8; ++code) {
    auto t = static_cast<TokenDType>(code);
    if (name == token_dtype_name(t)) return t;
  }
  if (name == "u8") return TokenDType::u8;
  if (name == "i8") return TokenDType::i8;
  if (name == "i16") return TokenDType::i16;
  if (name == "u16") return TokenDType::u16;
  if (name == "i32") return TokenDType::i32;
  if (name == "i64") return TokenDType::i64;
  return std::nullopt;
}

bool is_token_dtype(TokenDType t) { return t != TokenDType::f32 && t != TokenDType::f64; }

int64_t token_dtype_min(TokenDType t) {
  switch (t) {
    case TokenDType::u8: case TokenDType::u16: return 0;
    case TokenDType::i8: return std::numeric_limits<int8_t>::min();
    case TokenDType::i16: return std::numeric_limits<int16_t>::min();
    case TokenDType::i32: return std::numeric_limits<int32_t>::min();
    default: return std::numeric_limits<int64_t>::min();
  }
}

int64_t token_dtype_max(TokenDType t) {
  switch (t) {
    case TokenDType::u8: return std::numeric_limits<uint8_t>::max();
    case TokenDType::u16: return std::numeric_limits<uint16_t>::max();
    case TokenDType::i8: return std::numeric_limits<int8_t>::max();
    case TokenDType::i16: return std::numeric_limits<int16_t>::max();
    case TokenDType::i32: return std::numeric_limits<int32_t>::max();
    default: return std::numeric_limits<int64_t>::max();
  }
}

TokenDType optimal_token_dtype(int64_t vocab_size) {
  return vocab_size < 65500 ? TokenDType::u16 : TokenDType::i32;
}

namespace {
template <class Stored, class Out>
void decode_as(const unsigned char* src, int64_t count, Out* out) {
  for (int64_t i = 0; i < count; ++i) out[i] = static_cast<Out>(load_le<Stored>(src + i * sizeof(Stored)));
}
}  // namespace

template <class Out>
void decode_tokens(TokenDType dtype, const unsigned char* src, int64_t count, Out* out) {
  switch (dtype) {
    case TokenDType::u8: return decode_as<uint8_t>(src, count, out);
    case TokenDType::i8: return decode_as<int8_t>(src, count, out);
    case TokenDType::i16: return decode_as<int16_t>(src, count, out);
    case TokenDType::u16: return decode_as<uint16_t>(src, count, out);
    case TokenDType::i32: return decode_as<int32_t>(src, count, out);
    case TokenDType::i64: return decode_as<int64_t>(src, count, out);
    default: NM_CHECK(false, "decode of non-token dtype {}", token_dtype_name(dtype));
  }
}

template void decode_tokens<int32_t>(TokenDType, const unsigned char*, int64_t, int32_t*);
template void decode_tokens<int64_t>(TokenDType, const unsigned char*, int64_t, int64_t*);

}  // namespace nemotron::data
