// The Thrift compact protocol codec: known byte encodings, the long forms (field id jumps past 15,
// lists of 15 or more), zigzag extremes, skipping every type a newer writer may add, and bounded
// errors on lying lengths and deep nesting.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "io/thrift_compact.h"
#include "test_util.h"

namespace nemotron::io::thrift {
namespace {

using nemotron::testing::input_error;
using ::testing::HasSubstr;

const uint8_t* u8(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }

TEST(ThriftCompact, writes_the_bytes_of_the_spec) {
  Writer w;
  w.field_i32(1, 3);     // delta 1, type i32 (5): 0x15, zigzag(3) = 6
  w.field_i64(2, -1);    // delta 1, type i64 (6): 0x16, zigzag(-1) = 1
  w.field_binary(20, "ab");  // delta 18 > 15: long form 0x08, zigzag(20) = 40, then length 2
  w.field_bool(21, true);    // delta 1, type true (1)
  w.end_message();
  EXPECT_EQ(w.bytes(), std::string("\x15\x06\x16\x01\x08\x28\x02", 7) + "ab" + std::string("\x11\x00", 2));
}

TEST(ThriftCompact, reads_back_what_it_writes_including_long_forms_and_extremes) {
  Writer w;
  w.field_i32(1, INT32_MIN);
  w.field_i64(7, INT64_MAX);
  w.field_i64(8, INT64_MIN);
  w.begin_list_field(100, TType::I32, 20);  // a list of 20: long size form
  for (int i = 0; i < 20; ++i) w.elem_i32(i - 10);
  w.begin_struct_field(101);
  w.field_byte(1, -3);
  w.field_bool(2, false);
  w.end_struct();
  w.field_binary(102, std::string(300, 'x'));
  w.end_message();
  const std::string b = w.take();

  Reader r(u8(b), b.size(), "test");
  r.begin_struct();
  Field f;
  ASSERT_TRUE(r.next_field(&f));
  EXPECT_EQ(r.i32(f), INT32_MIN);
  ASSERT_TRUE(r.next_field(&f));
  EXPECT_EQ(f.id, 7);
  EXPECT_EQ(r.i64(f), INT64_MAX);
  ASSERT_TRUE(r.next_field(&f));
  EXPECT_EQ(r.i64(f), INT64_MIN);
  ASSERT_TRUE(r.next_field(&f));
  EXPECT_EQ(f.id, 100);
  const ListHeader l = r.list(f);
  ASSERT_EQ(l.size, 20u);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(r.elem_i32(l), i - 10);
  ASSERT_TRUE(r.next_field(&f));
  r.expect_struct(f);
  r.begin_struct();
  Field g;
  ASSERT_TRUE(r.next_field(&g));
  EXPECT_EQ(r.byte(g), -3);
  ASSERT_TRUE(r.next_field(&g));
  EXPECT_FALSE(r.boolean(g));
  EXPECT_FALSE(r.next_field(&g));
  ASSERT_TRUE(r.next_field(&f));
  EXPECT_EQ(f.id, 102);
  EXPECT_EQ(r.binary(f), std::string(300, 'x'));
  EXPECT_FALSE(r.next_field(&f));
  EXPECT_EQ(r.position(), b.size());
}

TEST(ThriftCompact, skips_every_value_type) {
  // Field 1: double; 2: map<i32, binary> of 2; 3: set<bool> of 2; 4: struct{list<struct{}>}; 5: i16; 6: i32 = 9.
  const std::string b("\x17" "12345678"
                      "\x1b\x02\x58\x02\x01" "a" "\x04\x01" "b"
                      "\x1a\x21\x01\x02"
                      "\x1c\x19\x1c\x00\x00"
                      "\x14\x05"
                      "\x15\x12"
                      "\x00",
                      32);
  Reader r(u8(b), b.size(), "test");
  r.begin_struct();
  Field f;
  for (int id = 1; id <= 5; ++id) {
    ASSERT_TRUE(r.next_field(&f));
    EXPECT_EQ(f.id, id);
    r.skip(f.type);
  }
  ASSERT_TRUE(r.next_field(&f));
  EXPECT_EQ(r.i32(f), 9);
  EXPECT_FALSE(r.next_field(&f));
  EXPECT_EQ(r.position(), b.size());
}

TEST(ThriftCompact, malformed_input_is_an_input_error_naming_the_context) {
  auto err = [](const std::string& b, auto&& body) {
    return input_error([&] {
      Reader r(u8(b), b.size(), "x.parquet: footer");
      body(r);
    });
  };
  auto read_i32_field = [](Reader& r) {
    r.begin_struct();
    Field f;
    r.next_field(&f);
    r.i32(f);
  };
  EXPECT_THAT(err(std::string("\x15", 1), read_i32_field), HasSubstr("x.parquet: footer: truncated"));
  EXPECT_THAT(err(std::string("\x16\x02", 2), read_i32_field), HasSubstr("field 1 has type i64, expected i32"));
  EXPECT_THAT(err(std::string("\x15\xff\xff\xff\xff\x7f", 6), read_i32_field), HasSubstr("out of the i32 range"));
  EXPECT_THAT(err(std::string("\x15\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12), read_i32_field),
              HasSubstr("varint"));
  // A list claiming more elements than bytes left.
  EXPECT_THAT(err(std::string("\x19\xf5\xff\x01", 4),
                  [](Reader& r) {
                    r.begin_struct();
                    Field f;
                    r.next_field(&f);
                    r.list(f);
                  }),
              HasSubstr("list of 255 elements in 0 bytes"));
  // A string longer than the input.
  EXPECT_THAT(err(std::string("\x18\x10" "abc", 5),
                  [](Reader& r) {
                    r.begin_struct();
                    Field f;
                    r.next_field(&f);
                    r.binary(f);
                  }),
              HasSubstr("string of 16 bytes with 3 left"));
  // Structs nested 10000 deep: refused at a fixed depth, not by a stack overflow.
  EXPECT_THAT(err(std::string(10000, '\x1c'),
                  [](Reader& r) {
                    r.begin_struct();
                    Field f;
                    r.next_field(&f);
                    r.skip(f.type);
                  }),
              HasSubstr("nested deeper than 64"));
}

}  // namespace
}  // namespace nemotron::io::thrift
