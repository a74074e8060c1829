#include "data/byte_level.h"

#include "data/tokenizer_utf8.h"

namespace nemotron::data {

namespace {

struct Tables {
  std::array<uint32_t, 256> to_char{};
  std::array<int16_t, 512> to_byte{};  // alphabet code points are all < 0x144
  std::array<std::string, 256> utf8;

  Tables() {
    to_byte.fill(-1);
    auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) to_char[b] = printable(b) ? static_cast<uint32_t>(b) : next++;
    for (int b = 0; b < 256; ++b) {
      to_byte[to_char[b]] = static_cast<int16_t>(b);
      utf8_append(utf8[b], to_char[b]);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

uint32_t byte_level_char(uint8_t b) { return tables().to_char[b]; }

int byte_level_byte(uint32_t cp) { return cp < 512 ? tables().to_byte[cp] : -1; }

const std::array<std::string, 256>& byte_level_alphabet() { return tables().utf8; }

void byte_level_encode(std::string_view bytes, std::string& out) {
  const auto& u = tables().utf8;
  for (char c : bytes) out += u[static_cast<uint8_t>(c)];
}

void byte_level_decode_token(std::string_view token, std::string& out) {
  const size_t mark = out.size();
  size_t i = 0;
  while (i < token.size()) {
    const int b = byte_level_byte(utf8_next(token, i));
    if (b < 0) {  // not a byte-level token: keep it as written
      out.resize(mark);
      out.append(token);
      return;
    }
    out += static_cast<char>(b);
  }
}

}  // namespace nemotron::data
