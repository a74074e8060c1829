// Value-level encodings of the Parquet pages we write and read: the RLE/bit-packed hybrid
// (levels and dictionary indices) and page compression. Every decoder checks each length against
// the bytes it was given before touching them.
#include <zstd.h>

#include <cstring>

#include "core/error.h"
#include "io/packed_parquet_format.h"

namespace nemotron::io::parquet {

// ---- RLE/bit-packed hybrid ----

int bit_width_of(uint32_t max_value) {
  int w = 0;
  while (max_value > 0) ++w, max_value >>= 1;
  return w;
}

void RleRunEncoder::add(uint32_t value, uint64_t count) {
  if (count == 0) return;
  if (count_ > 0 && value != value_) flush();
  value_ = value;
  count_ += count;
}

void RleRunEncoder::flush() {
  if (count_ == 0) return;
  // A run's header is a ULEB128 of (count << 1); counts past 2^31 are split to stay in 32 bits.
  const int value_bytes = (bit_width_ + 7) / 8;
  while (count_ > 0) {
    const uint64_t n = std::min<uint64_t>(count_, 1ull << 30);
    uint64_t h = n << 1;
    while (h >= 0x80) {
      out_.push_back(static_cast<char>((h & 0x7f) | 0x80));
      h >>= 7;
    }
    out_.push_back(static_cast<char>(h));
    for (int b = 0; b < value_bytes; ++b) out_.push_back(static_cast<char>((value_ >> (8 * b)) & 0xff));
    count_ -= n;
  }
}

const std::string& RleRunEncoder::finish() {
  flush();
  return out_;
}

namespace {

template <class T>
void decode_hybrid(const uint8_t* data, size_t size, int bit_width, uint32_t max_value, size_t count, T* out,
                   const std::string& context) {
  if (bit_width < 0 || bit_width > 32) throw InputError(fmt::format("{}: bit width {} outside 0..32", context, bit_width));
  const uint64_t mask = bit_width == 32 ? 0xffffffffull : (1ull << bit_width) - 1;
  size_t pos = 0, n = 0;
  auto fail = [&](const std::string& what) {
    throw InputError(fmt::format("{}: {} (RLE/bit-packed data, byte {} of {}, value {} of {})", context, what, pos, size, n, count));
  };
  while (n < count) {
    uint64_t header = 0;
    for (int shift = 0;; shift += 7) {
      if (pos >= size) fail("the runs end before all values");
      if (shift > 28) fail("run header longer than 5 bytes");
      const uint8_t b = data[pos++];
      header |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) break;
    }
    if (header & 1) {  // bit-packed: (header >> 1) groups of 8 values, LSB first
      const uint64_t groups = header >> 1;
      const uint64_t bytes = groups * static_cast<uint64_t>(bit_width);
      if (bytes > size - pos) fail(fmt::format("bit-packed run of {} bytes with {} left", bytes, size - pos));
      const size_t take = static_cast<size_t>(std::min<uint64_t>(groups * 8, count - n));
      const uint8_t* p = data + pos;
      uint64_t buf = 0;
      int bits = 0;
      for (size_t i = 0; i < take; ++i) {
        while (bits < bit_width) buf |= static_cast<uint64_t>(*p++) << bits, bits += 8;
        const uint64_t v = buf & mask;
        buf >>= bit_width;
        bits -= bit_width;
        if (v > max_value) fail(fmt::format("value {} above the maximum {}", v, max_value));
        out[n + i] = static_cast<T>(v);
      }
      pos += static_cast<size_t>(bytes);
      n += take;
    } else {  // RLE: (header >> 1) repeats of one value stored in ceil(bit_width / 8) bytes
      const uint64_t run = header >> 1;
      const size_t value_bytes = static_cast<size_t>((bit_width + 7) / 8);
      if (value_bytes > size - pos) fail("RLE run value cut off");
      uint64_t v = 0;
      for (size_t b = 0; b < value_bytes; ++b) v |= static_cast<uint64_t>(data[pos + b]) << (8 * b);
      pos += value_bytes;
      if (v > max_value) fail(fmt::format("value {} above the maximum {}", v, max_value));
      const size_t take = static_cast<size_t>(std::min<uint64_t>(run, count - n));
      std::fill(out + n, out + n + take, static_cast<T>(v));
      n += take;
    }
  }
}

}  // namespace

void decode_rle_hybrid(const uint8_t* data, size_t size, int bit_width, uint32_t max_value, size_t count,
                       uint32_t* out, const std::string& context) {
  decode_hybrid(data, size, bit_width, max_value, count, out, context);
}

void decode_rle_hybrid_u8(const uint8_t* data, size_t size, int bit_width, uint32_t max_value, size_t count,
                          uint8_t* out, const std::string& context) {
  NM_CHECK(max_value <= 255, "u8 levels above 255");
  decode_hybrid(data, size, bit_width, max_value, count, out, context);
}

// ---- compression ----

std::string zstd_compress(const uint8_t* data, size_t size) {
  std::string out(ZSTD_compressBound(size), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), data, size, 1);
  if (ZSTD_isError(n)) throw Error(fmt::format("zstd compression failed: {}", ZSTD_getErrorName(n)));
  out.resize(n);
  return out;
}

namespace {

// Raw snappy (no framing), pyarrow's default codec: a varint length, then literals and copies.
void snappy_decompress(const uint8_t* in, size_t size, size_t out_size, std::vector<uint8_t>* scratch,
                       const std::string& context) {
  size_t pos = 0, op = 0;
  auto fail = [&](const std::string& what) {
    throw InputError(fmt::format("{}: corrupt snappy data: {} (input byte {} of {})", context, what, pos, size));
  };
  uint64_t length = 0;
  for (int shift = 0;; shift += 7) {
    if (pos >= size || shift > 28) fail("bad length header");
    const uint8_t b = in[pos++];
    length |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) break;
  }
  if (length != out_size) fail(fmt::format("holds {} bytes, the page header says {}", length, out_size));
  scratch->resize(out_size);
  uint8_t* out = scratch->data();
  while (pos < size) {
    const uint8_t tag = in[pos++];
    uint64_t len, offset;
    switch (tag & 3) {
      case 0: {  // literal
        len = tag >> 2;
        if (len >= 60) {
          const size_t nb = len - 59;
          if (nb > size - pos) fail("literal length cut off");
          len = 0;
          for (size_t b = 0; b < nb; ++b) len |= static_cast<uint64_t>(in[pos + b]) << (8 * b);
          pos += nb;
        }
        len += 1;
        if (len > size - pos) fail("literal runs past the input");
        if (len > out_size - op) fail("literal runs past the output");
        std::memcpy(out + op, in + pos, len);
        pos += len, op += len;
        continue;
      }
      case 1:
        if (pos >= size) fail("copy cut off");
        len = 4 + ((tag >> 2) & 7);
        offset = (static_cast<uint64_t>(tag >> 5) << 8) | in[pos++];
        break;
      case 2:
        if (2 > size - pos) fail("copy cut off");
        len = 1 + (tag >> 2);
        offset = in[pos] | (static_cast<uint64_t>(in[pos + 1]) << 8);
        pos += 2;
        break;
      default:
        if (4 > size - pos) fail("copy cut off");
        len = 1 + (tag >> 2);
        offset = 0;
        for (int b = 0; b < 4; ++b) offset |= static_cast<uint64_t>(in[pos + b]) << (8 * b);
        pos += 4;
        break;
    }
    if (offset == 0 || offset > op) fail(fmt::format("copy offset {} at output byte {}", offset, op));
    if (len > out_size - op) fail("copy runs past the output");
    for (uint64_t i = 0; i < len; ++i, ++op) out[op] = out[op - offset];  // copies may overlap
  }
  if (op != out_size) fail(fmt::format("produced {} bytes, expected {}", op, out_size));
}

}  // namespace

const uint8_t* decompress_page(int32_t codec, const uint8_t* data, size_t size, size_t out_size,
                               std::vector<uint8_t>* scratch, const std::string& context) {
  if (size == 0 && out_size == 0) return data;  // an empty page, whatever the codec
  switch (codec) {
    case kUncompressed:
      if (size != out_size)
        throw InputError(fmt::format("{}: uncompressed page of {} bytes, its header says {}", context, size, out_size));
      return data;
    case kZstd: {
      // The frame states its size: check it before allocating what the page header claims.
      const unsigned long long framed = ZSTD_getFrameContentSize(data, size);
      if (framed == ZSTD_CONTENTSIZE_ERROR) throw InputError(fmt::format("{}: corrupt zstd data (bad frame header)", context));
      if (framed != ZSTD_CONTENTSIZE_UNKNOWN && framed != out_size)
        throw InputError(fmt::format("{}: zstd frame holds {} bytes, the page header says {}", context, framed, out_size));
      scratch->resize(out_size);
      const size_t n = ZSTD_decompress(scratch->data(), out_size, data, size);
      if (ZSTD_isError(n)) throw InputError(fmt::format("{}: corrupt zstd data: {}", context, ZSTD_getErrorName(n)));
      if (n != out_size)
        throw InputError(fmt::format("{}: zstd data holds {} bytes, the page header says {}", context, n, out_size));
      return scratch->data();
    }
    case kSnappy: snappy_decompress(data, size, out_size, scratch, context); return scratch->data();
    default:
      throw InputError(fmt::format("{}: compression {} is not supported (ZSTD, SNAPPY or UNCOMPRESSED)", context,
                                   codec_name(codec)));
  }
}

}  // namespace nemotron::io::parquet
