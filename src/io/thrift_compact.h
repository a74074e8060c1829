// The Thrift compact protocol, the encoding of Parquet's footer and page headers: a writer that
// appends fields to a byte string, and a bounded reader that never reads past its span, caps
// nesting depth and list sizes, and throws InputError prefixed with the caller's context (the
// file and what is being decoded) on anything malformed. Unknown fields are skipped, so metadata
// written by newer Parquet writers still reads.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace nemotron::io::thrift {

// Compact protocol type codes (field headers and list element types).
enum class TType : uint8_t {
  Stop = 0, BoolTrue = 1, BoolFalse = 2, Byte = 3, I16 = 4, I32 = 5, I64 = 6, Double = 7,
  Binary = 8, List = 9, Set = 10, Map = 11, Struct = 12,
};

class Writer {
 public:
  const std::string& bytes() const { return out_; }
  std::string take() { return std::move(out_); }

  void field_i32(int16_t id, int32_t v);
  void field_i64(int16_t id, int64_t v);
  void field_byte(int16_t id, int8_t v);
  void field_bool(int16_t id, bool v);
  void field_binary(int16_t id, const std::string& v);
  void begin_struct_field(int16_t id);  // a nested struct as field `id`; close with end_struct()
  void begin_list_field(int16_t id, TType elem, size_t count);
  // List elements (after begin_list_field).
  void elem_i32(int32_t v);
  void elem_binary(const std::string& v);
  void begin_struct_elem();  // close with end_struct()
  void end_struct();         // writes STOP and returns to the enclosing struct's field ids
  void end_message();        // STOP of the outermost struct

 private:
  void field_header(int16_t id, TType t);
  void varint(uint64_t v);
  std::string out_;
  std::vector<int16_t> last_ids_{0};
};

struct Field {
  TType type = TType::Stop;
  int16_t id = 0;
};

struct ListHeader {
  TType elem = TType::Stop;
  size_t size = 0;
};

class Reader {
 public:
  // Reads [data, data + size); `context` prefixes every error ("x.parquet: footer").
  Reader(const uint8_t* data, size_t size, std::string context);

  // Struct traversal: begin_struct(); while (next_field(&f)) { ... read or skip(f.type) ... }
  // next_field returns false at the struct's STOP and leaves the struct.
  void begin_struct();
  bool next_field(Field* f);

  // Values of a field of the expected type (errors name the field id and the type found).
  int32_t i32(const Field& f);
  int64_t i64(const Field& f);
  int8_t byte(const Field& f);
  bool boolean(const Field& f);
  std::string binary(const Field& f);
  ListHeader list(const Field& f);  // size bounded by the bytes left
  void expect_struct(const Field& f);  // then begin_struct()

  // List elements.
  int32_t elem_i32(const ListHeader& l);
  std::string elem_binary(const ListHeader& l);
  void expect_struct_elem(const ListHeader& l);

  void skip(TType t);
  size_t position() const { return pos_; }
  [[noreturn]] void fail(const std::string& what) const;

 private:
  uint64_t varint();
  int64_t zigzag();
  uint8_t u8();
  void need(size_t n) const;
  void check_type(const Field& f, TType want, const char* name) const;

  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  std::string context_;
  std::vector<int16_t> last_ids_;
  int skip_depth_ = 0;
};

const char* ttype_name(TType t);

}  // namespace nemotron::io::thrift
