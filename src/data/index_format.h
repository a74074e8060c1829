// The Megatron indexed-dataset file pair (`P.bin` + `P.idx`, shared/reference/data-formats.md
// §1): header constants, dtype codes and little-endian loads/stores shared by the reader and the
// builder. The `.idx` arrays start at byte 34 and are therefore unaligned; every access goes
// through load_le/store_le (memcpy), never through a cast pointer.
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace nemotron::data {

static_assert(std::endian::native == std::endian::little,
              "the .bin/.idx format is little-endian; a big-endian host needs byte swaps");

inline constexpr char kIdxMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
inline constexpr uint64_t kIdxVersion = 1;
inline constexpr size_t kIdxHeaderBytes = 34;  // magic 9 + version 8 + dtype 1 + counts 8 + 8

// Megatron's DType enum: the code stored at byte 17 of the `.idx`.
enum class TokenDType : uint8_t {
  u8 = 1, i8 = 2, i16 = 3, i32 = 4, i64 = 5, f64 = 6, f32 = 7, u16 = 8,
};

size_t token_dtype_size(TokenDType t);
// numpy's name ("int32", "uint16", ...), as Megatron spells it.
const char* token_dtype_name(TokenDType t);
std::optional<TokenDType> token_dtype_from_code(uint8_t code);
// "int32", "uint16", ... (also "i32", "u16"); nullopt for anything else.
std::optional<TokenDType> token_dtype_from_name(std::string_view name);
// Integer dtypes can hold token ids; float64/float32 are legal codes but not token files.
bool is_token_dtype(TokenDType t);
// The inclusive range of ids a dtype stores.
int64_t token_dtype_min(TokenDType t);
int64_t token_dtype_max(TokenDType t);
// Megatron's DType.optimal_dtype: uint16 when vocab_size < 65500, else int32.
TokenDType optimal_token_dtype(int64_t vocab_size);

inline std::string bin_path(const std::string& prefix) { return prefix + ".bin"; }
inline std::string idx_path(const std::string& prefix) { return prefix + ".idx"; }

template <class T>
inline T load_le(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <class T>
inline void store_le(void* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

// Decodes `count` tokens stored as `dtype` at `src` (any alignment) into `out`.
template <class Out>
void decode_tokens(TokenDType dtype, const unsigned char* src, int64_t count, Out* out);

}  // namespace nemotron::data
