#include "io/thrift_compact.h"

#include "core/error.h"

namespace nemotron::io::thrift {

namespace {
constexpr size_t kMaxDepth = 64;  // Parquet metadata nests 5 deep; anything far deeper is hostile

uint64_t zigzag_encode(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
}  // namespace

const char* ttype_name(TType t) {
  switch (t) {
    case TType::Stop: return "stop";
    case TType::BoolTrue:
    case TType::BoolFalse: return "bool";
    case TType::Byte: return "byte";
    case TType::I16: return "i16";
    case TType::I32: return "i32";
    case TType::I64: return "i64";
    case TType::Double: return "double";
    case TType::Binary: return "binary";
    case TType::List: return "list";
    case TType::Set: return "set";
    case TType::Map: return "map";
    case TType::Struct: return "struct";
  }
  return "unknown";
}

// ---- Writer ----

void Writer::varint(uint64_t v) {
  while (v >= 0x80) {
    out_.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out_.push_back(static_cast<char>(v));
}

void Writer::field_header(int16_t id, TType t) {
  const int delta = id - last_ids_.back();
  if (delta > 0 && delta <= 15) {
    out_.push_back(static_cast<char>((delta << 4) | static_cast<int>(t)));
  } else {
    out_.push_back(static_cast<char>(t));
    varint(zigzag_encode(id));
  }
  last_ids_.back() = id;
}

void Writer::field_i32(int16_t id, int32_t v) {
  field_header(id, TType::I32);
  varint(zigzag_encode(v));
}
void Writer::field_i64(int16_t id, int64_t v) {
  field_header(id, TType::I64);
  varint(zigzag_encode(v));
}
void Writer::field_byte(int16_t id, int8_t v) {
  field_header(id, TType::Byte);
  out_.push_back(static_cast<char>(v));
}
void Writer::field_bool(int16_t id, bool v) { field_header(id, v ? TType::BoolTrue : TType::BoolFalse); }
void Writer::field_binary(int16_t id, const std::string& v) {
  field_header(id, TType::Binary);
  elem_binary(v);
}
void Writer::begin_struct_field(int16_t id) {
  field_header(id, TType::Struct);
  last_ids_.push_back(0);
}
void Writer::begin_list_field(int16_t id, TType elem, size_t count) {
  field_header(id, TType::List);
  if (count < 15) {
    out_.push_back(static_cast<char>((count << 4) | static_cast<size_t>(elem)));
  } else {
    out_.push_back(static_cast<char>(0xf0 | static_cast<int>(elem)));
    varint(count);
  }
}
void Writer::elem_i32(int32_t v) { varint(zigzag_encode(v)); }
void Writer::elem_binary(const std::string& v) {
  varint(v.size());
  out_ += v;
}
void Writer::begin_struct_elem() { last_ids_.push_back(0); }
void Writer::end_struct() {
  NM_CHECK(last_ids_.size() > 1, "thrift end_struct without a struct");
  out_.push_back(0);
  last_ids_.pop_back();
}
void Writer::end_message() {
  NM_CHECK(last_ids_.size() == 1, "thrift message ended inside a struct");
  out_.push_back(0);
  last_ids_.back() = 0;
}

// ---- Reader ----

Reader::Reader(const uint8_t* data, size_t size, std::string context)
    : data_(data), size_(size), context_(std::move(context)) {}

void Reader::fail(const std::string& what) const {
  throw InputError(fmt::format("{}: {} (at byte {} of {})", context_, what, pos_, size_));
}

void Reader::need(size_t n) const {
  if (n > size_ - pos_) fail(fmt::format("truncated: needs {} more bytes, {} left", n, size_ - pos_));
}

uint8_t Reader::u8() {
  need(1);
  return data_[pos_++];
}

uint64_t Reader::varint() {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    const uint8_t b = u8();
    if (shift == 63 && b > 1) fail("varint overflows 64 bits");
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  fail("varint longer than 10 bytes");
}

int64_t Reader::zigzag() {
  const uint64_t u = varint();
  return static_cast<int64_t>(u >> 1) ^ -static_cast<int64_t>(u & 1);
}

void Reader::begin_struct() {
  if (last_ids_.size() >= kMaxDepth) fail(fmt::format("structs nested deeper than {}", kMaxDepth));
  last_ids_.push_back(0);
}

bool Reader::next_field(Field* f) {
  if (last_ids_.empty()) fail("field read outside a struct");
  const uint8_t h = u8();
  const auto type = static_cast<TType>(h & 0x0f);
  if (type == TType::Stop) {
    if (h != 0) fail(fmt::format("bad field header byte 0x{:02x}", h));
    last_ids_.pop_back();
    return false;
  }
  if (static_cast<uint8_t>(type) > static_cast<uint8_t>(TType::Struct)) fail(fmt::format("unknown field type {}", h & 0x0f));
  const int delta = h >> 4;
  int64_t id;
  if (delta != 0) {
    id = last_ids_.back() + delta;
  } else {
    id = zigzag();
  }
  if (id < -32768 || id > 32767) fail(fmt::format("field id {} out of the i16 range", id));
  last_ids_.back() = static_cast<int16_t>(id);
  f->type = type;
  f->id = static_cast<int16_t>(id);
  return true;
}

void Reader::check_type(const Field& f, TType want, const char* name) const {
  if (f.type != want) fail(fmt::format("field {} has type {}, expected {}", f.id, ttype_name(f.type), name));
}

int32_t Reader::i32(const Field& f) {
  check_type(f, TType::I32, "i32");
  const int64_t v = zigzag();
  if (v < INT32_MIN || v > INT32_MAX) fail(fmt::format("field {}: {} out of the i32 range", f.id, v));
  return static_cast<int32_t>(v);
}
int64_t Reader::i64(const Field& f) {
  check_type(f, TType::I64, "i64");
  return zigzag();
}
int8_t Reader::byte(const Field& f) {
  check_type(f, TType::Byte, "byte");
  return static_cast<int8_t>(u8());
}
bool Reader::boolean(const Field& f) {
  if (f.type != TType::BoolTrue && f.type != TType::BoolFalse)
    fail(fmt::format("field {} has type {}, expected bool", f.id, ttype_name(f.type)));
  return f.type == TType::BoolTrue;
}
std::string Reader::binary(const Field& f) {
  check_type(f, TType::Binary, "binary");
  return elem_binary(ListHeader{TType::Binary, 0});
}
ListHeader Reader::list(const Field& f) {
  if (f.type != TType::List && f.type != TType::Set)
    fail(fmt::format("field {} has type {}, expected list", f.id, ttype_name(f.type)));
  const uint8_t h = u8();
  ListHeader l;
  l.elem = static_cast<TType>(h & 0x0f);
  l.size = h >> 4;
  if (l.size == 15) l.size = varint();
  if (l.elem == TType::Stop || static_cast<uint8_t>(l.elem) > static_cast<uint8_t>(TType::Struct))
    fail(fmt::format("field {}: bad list element type {}", f.id, h & 0x0f));
  // Every element takes at least one byte: a larger count is a lie.
  if (l.size > size_ - pos_) fail(fmt::format("field {}: list of {} elements in {} bytes", f.id, l.size, size_ - pos_));
  return l;
}
void Reader::expect_struct(const Field& f) { check_type(f, TType::Struct, "struct"); }

int32_t Reader::elem_i32(const ListHeader& l) {
  if (l.elem != TType::I32) fail(fmt::format("list of {}, expected i32", ttype_name(l.elem)));
  const int64_t v = zigzag();
  if (v < INT32_MIN || v > INT32_MAX) fail(fmt::format("list element {} out of the i32 range", v));
  return static_cast<int32_t>(v);
}
std::string Reader::elem_binary(const ListHeader& l) {
  if (l.elem != TType::Binary) fail(fmt::format("list of {}, expected binary", ttype_name(l.elem)));
  const uint64_t n = varint();
  if (n > size_ - pos_) fail(fmt::format("string of {} bytes with {} left", n, size_ - pos_));
  std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(n));
  pos_ += static_cast<size_t>(n);
  return s;
}
void Reader::expect_struct_elem(const ListHeader& l) {
  if (l.elem != TType::Struct) fail(fmt::format("list of {}, expected struct", ttype_name(l.elem)));
}

void Reader::skip(TType t) {
  if (++skip_depth_ > static_cast<int>(kMaxDepth)) fail(fmt::format("values nested deeper than {}", kMaxDepth));
  switch (t) {
    case TType::BoolTrue:
    case TType::BoolFalse: break;  // the value is in the field header
    case TType::Byte: u8(); break;
    case TType::I16:
    case TType::I32:
    case TType::I64: varint(); break;
    case TType::Double: need(8), pos_ += 8; break;
    case TType::Binary: elem_binary(ListHeader{TType::Binary, 0}); break;
    case TType::List:
    case TType::Set: {
      const ListHeader l = list(Field{t, 0});
      for (size_t i = 0; i < l.size; ++i) {
        if (l.elem == TType::BoolTrue || l.elem == TType::BoolFalse) u8();  // one byte per bool in lists
        else skip(l.elem);
      }
      break;
    }
    case TType::Map: {
      const uint64_t n = varint();
      if (n > 0) {
        const uint8_t kv = u8();
        const auto k = static_cast<TType>(kv >> 4), v = static_cast<TType>(kv & 0x0f);
        if (n > size_ - pos_) fail(fmt::format("map of {} entries in {} bytes", n, size_ - pos_));
        for (uint64_t i = 0; i < n; ++i) {
          for (TType e : {k, v}) {
            if (e == TType::BoolTrue || e == TType::BoolFalse) u8();
            else skip(e);
          }
        }
      }
      break;
    }
    case TType::Struct: {
      begin_struct();
      Field f;
      while (next_field(&f)) skip(f.type);
      break;
    }
    case TType::Stop:
    default: fail(fmt::format("cannot skip a value of type {}", static_cast<int>(t)));
  }
  --skip_depth_;
}

}  // namespace nemotron::io::thrift
