// Thrift compact (de)serialization of the Parquet footer and page headers (field ids from
// apache/parquet-format's parquet.thrift).
#include "io/packed_parquet_format.h"

#include "core/error.h"
#include "io/thrift_compact.h"

namespace nemotron::io::parquet {

using thrift::Field;
using thrift::ListHeader;
using thrift::TType;

const char* codec_name(int32_t codec) {
  switch (codec) {
    case kUncompressed: return "UNCOMPRESSED";
    case kSnappy: return "SNAPPY";
    case kGzip: return "GZIP";
    case kLzo: return "LZO";
    case kBrotli: return "BROTLI";
    case kLz4: return "LZ4";
    case kZstd: return "ZSTD";
    case kLz4Raw: return "LZ4_RAW";
  }
  return "unknown codec";
}

const char* encoding_name(int32_t encoding) {
  switch (encoding) {
    case kPlain: return "PLAIN";
    case kPlainDictionary: return "PLAIN_DICTIONARY";
    case kRle: return "RLE";
    case kBitPacked: return "BIT_PACKED";
    case 5: return "DELTA_BINARY_PACKED";
    case 6: return "DELTA_LENGTH_BYTE_ARRAY";
    case 7: return "DELTA_BYTE_ARRAY";
    case kRleDictionary: return "RLE_DICTIONARY";
    case 9: return "BYTE_STREAM_SPLIT";
  }
  return "unknown encoding";
}

const char* physical_type_name(int32_t type) {
  static const char* kNames[] = {"BOOLEAN", "INT32", "INT64", "INT96", "FLOAT", "DOUBLE", "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"};
  return type >= 0 && type < 8 ? kNames[type] : "unknown type";
}

// ---- encoding ----

namespace {

void encode_schema_element(thrift::Writer& w, const SchemaElement& e) {
  w.begin_struct_elem();
  if (e.type) w.field_i32(1, *e.type);
  if (e.repetition) w.field_i32(3, *e.repetition);
  w.field_binary(4, e.name);
  if (e.num_children) w.field_i32(5, *e.num_children);
  if (e.converted_type) w.field_i32(6, *e.converted_type);
  if (e.logical) {
    w.begin_struct_field(10);
    w.begin_struct_field(*e.logical);
    if (*e.logical == kLogicalInteger) {
      w.field_byte(1, e.int_bit_width);
      w.field_bool(2, e.int_signed);
    }
    w.end_struct();
    w.end_struct();
  }
  w.end_struct();
}

void encode_column_chunk(thrift::Writer& w, const ColumnChunk& c) {
  w.begin_struct_elem();
  if (c.file_path) w.field_binary(1, *c.file_path);
  w.field_i64(2, c.file_offset);
  if (c.meta_data) {
    const ColumnMetaData& m = *c.meta_data;
    w.begin_struct_field(3);
    w.field_i32(1, m.type);
    w.begin_list_field(2, TType::I32, m.encodings.size());
    for (int32_t e : m.encodings) w.elem_i32(e);
    w.begin_list_field(3, TType::Binary, m.path_in_schema.size());
    for (const auto& p : m.path_in_schema) w.elem_binary(p);
    w.field_i32(4, m.codec);
    w.field_i64(5, m.num_values);
    w.field_i64(6, m.total_uncompressed_size);
    w.field_i64(7, m.total_compressed_size);
    w.field_i64(9, m.data_page_offset);
    if (m.dictionary_page_offset) w.field_i64(11, *m.dictionary_page_offset);
    w.end_struct();
  }
  w.end_struct();
}

}  // namespace

std::string encode_file_metadata(const FileMetaData& m) {
  thrift::Writer w;
  w.field_i32(1, m.version);
  w.begin_list_field(2, TType::Struct, m.schema.size());
  for (const auto& e : m.schema) encode_schema_element(w, e);
  w.field_i64(3, m.num_rows);
  w.begin_list_field(4, TType::Struct, m.row_groups.size());
  for (const auto& rg : m.row_groups) {
    w.begin_struct_elem();
    w.begin_list_field(1, TType::Struct, rg.columns.size());
    for (const auto& c : rg.columns) encode_column_chunk(w, c);
    w.field_i64(2, rg.total_byte_size);
    w.field_i64(3, rg.num_rows);
    w.end_struct();
  }
  if (!m.key_value_metadata.empty()) {
    w.begin_list_field(5, TType::Struct, m.key_value_metadata.size());
    for (const auto& [k, v] : m.key_value_metadata) {
      w.begin_struct_elem();
      w.field_binary(1, k);
      w.field_binary(2, v);
      w.end_struct();
    }
  }
  if (!m.created_by.empty()) w.field_binary(6, m.created_by);
  w.end_message();
  return w.take();
}

std::string encode_page_header(const PageHeader& h) {
  thrift::Writer w;
  w.field_i32(1, h.type);
  w.field_i32(2, h.uncompressed_page_size);
  w.field_i32(3, h.compressed_page_size);
  if (h.type == kDataPage) {
    w.begin_struct_field(5);
    w.field_i32(1, h.num_values);
    w.field_i32(2, h.encoding);
    w.field_i32(3, h.definition_level_encoding);
    w.field_i32(4, h.repetition_level_encoding);
    w.end_struct();
  } else if (h.type == kDictionaryPage) {
    w.begin_struct_field(7);
    w.field_i32(1, h.num_values);
    w.field_i32(2, h.encoding);
    w.end_struct();
  } else {
    NM_CHECK(false, "encode_page_header: page type {} is not written", h.type);
  }
  w.end_message();
  return w.take();
}

// ---- decoding ----

namespace {

// Tracks the required fields of one struct; names them when missing.
class Required {
 public:
  Required(thrift::Reader& r, const char* what) : r_(r), what_(what) {}
  void saw(int16_t id) { seen_ |= 1ull << id; }
  void check(std::initializer_list<int16_t> ids) const {
    for (int16_t id : ids)
      if (!(seen_ & (1ull << id))) r_.fail(fmt::format("{} lacks its required field {}", what_, id));
  }

 private:
  thrift::Reader& r_;
  const char* what_;
  uint64_t seen_ = 0;
};

void decode_logical_type(thrift::Reader& r, SchemaElement* e) {
  r.begin_struct();
  Field f;
  while (r.next_field(&f)) {
    if (f.type != TType::Struct) {
      r.skip(f.type);
      continue;
    }
    e->logical = f.id;
    r.begin_struct();
    Field g;
    while (r.next_field(&g)) {
      if (f.id == kLogicalInteger && g.id == 1) e->int_bit_width = r.byte(g);
      else if (f.id == kLogicalInteger && g.id == 2) e->int_signed = r.boolean(g);
      else r.skip(g.type);
    }
  }
}

SchemaElement decode_schema_element(thrift::Reader& r) {
  SchemaElement e;
  Required req(r, "SchemaElement");
  r.begin_struct();
  Field f;
  while (r.next_field(&f)) {
    switch (f.id) {
      case 1: e.type = r.i32(f); break;
      case 3: e.repetition = r.i32(f); break;
      case 4: e.name = r.binary(f); break;
      case 5: e.num_children = r.i32(f); break;
      case 6: e.converted_type = r.i32(f); break;
      case 10: r.expect_struct(f), decode_logical_type(r, &e); break;
      default: r.skip(f.type); continue;
    }
    req.saw(f.id);
  }
  req.check({4});
  return e;
}

ColumnMetaData decode_column_metadata(thrift::Reader& r) {
  ColumnMetaData m;
  Required req(r, "ColumnMetaData");
  r.begin_struct();
  Field f;
  while (r.next_field(&f)) {
    switch (f.id) {
      case 1: m.type = r.i32(f); break;
      case 2: {
        const ListHeader l = r.list(f);
        for (size_t i = 0; i < l.size; ++i) m.encodings.push_back(r.elem_i32(l));
        break;
      }
      case 3: {
        const ListHeader l = r.list(f);
        for (size_t i = 0; i < l.size; ++i) m.path_in_schema.push_back(r.elem_binary(l));
        break;
      }
      case 4: m.codec = r.i32(f); break;
      case 5: m.num_values = r.i64(f); break;
      case 6: m.total_uncompressed_size = r.i64(f); break;
      case 7: m.total_compressed_size = r.i64(f); break;
      case 9: m.data_page_offset = r.i64(f); break;
      case 11: m.dictionary_page_offset = r.i64(f); break;
      default: r.skip(f.type); continue;
    }
    req.saw(f.id);
  }
  req.check({1, 2, 3, 4, 5, 6, 7, 9});
  return m;
}

ColumnChunk decode_column_chunk(thrift::Reader& r) {
  ColumnChunk c;
  Required req(r, "ColumnChunk");
  r.begin_struct();
  Field f;
  while (r.next_field(&f)) {
    switch (f.id) {
      case 1: c.file_path = r.binary(f); break;
      case 2: c.file_offset = r.i64(f); break;
      case 3: r.expect_struct(f), c.meta_data = decode_column_metadata(r); break;
      default: r.skip(f.type); continue;
    }
    req.saw(f.id);
  }
  req.check({2});
  return c;
}

RowGroup decode_row_group(thrift::Reader& r) {
  RowGroup g;
  Required req(r, "RowGroup");
  r.begin_struct();
  Field f;
  while (r.next_field(&f)) {
    switch (f.id) {
      case 1: {
        const ListHeader l = r.list(f);
        for (size_t i = 0; i < l.size; ++i) r.expect_struct_elem(l), g.columns.push_back(decode_column_chunk(r));
        break;
      }
      case 2: g.total_byte_size = r.i64(f); break;
      case 3: g.num_rows = r.i64(f); break;
      default: r.skip(f.type); continue;
    }
    req.saw(f.id);
  }
  req.check({1, 2, 3});
  return g;
}

}  // namespace

FileMetaData decode_file_metadata(const uint8_t* data, size_t size, const std::string& context) {
  thrift::Reader r(data, size, context);
  FileMetaData m;
  Required req(r, "FileMetaData");
  r.begin_struct();
  Field f;
  while (r.next_field(&f)) {
    switch (f.id) {
      case 1: m.version = r.i32(f); break;
      case 2: {
        const ListHeader l = r.list(f);
        for (size_t i = 0; i < l.size; ++i) r.expect_struct_elem(l), m.schema.push_back(decode_schema_element(r));
        break;
      }
      case 3: m.num_rows = r.i64(f); break;
      case 4: {
        const ListHeader l = r.list(f);
        for (size_t i = 0; i < l.size; ++i) r.expect_struct_elem(l), m.row_groups.push_back(decode_row_group(r));
        break;
      }
      case 5: {
        const ListHeader l = r.list(f);
        for (size_t i = 0; i < l.size; ++i) {
          r.expect_struct_elem(l);
          r.begin_struct();
          std::pair<std::string, std::string> kv;
          Field g;
          while (r.next_field(&g)) {
            if (g.id == 1) kv.first = r.binary(g);
            else if (g.id == 2) kv.second = r.binary(g);
            else r.skip(g.type);
          }
          m.key_value_metadata.push_back(std::move(kv));
        }
        break;
      }
      case 6: m.created_by = r.binary(f); break;
      default: r.skip(f.type); continue;
    }
    req.saw(f.id);
  }
  req.check({1, 2, 3, 4});
  if (r.position() != size) r.fail(fmt::format("{} bytes after the end of FileMetaData", size - r.position()));
  return m;
}

PageHeader decode_page_header(const uint8_t* data, size_t size, const std::string& context, size_t* header_bytes) {
  thrift::Reader r(data, size, context);
  PageHeader h;
  uint32_t sub_headers = 0;
  Required req(r, "PageHeader");
  r.begin_struct();
  Field f;
  while (r.next_field(&f)) {
    switch (f.id) {
      case 1: h.type = r.i32(f); break;
      case 2: h.uncompressed_page_size = r.i32(f); break;
      case 3: h.compressed_page_size = r.i32(f); break;
      case 5:  // DataPageHeader
      case 7:  // DictionaryPageHeader
      case 8: {  // DataPageHeaderV2
        r.expect_struct(f);
        const int16_t which = f.id;
        Required sub(r, which == 5 ? "DataPageHeader" : which == 7 ? "DictionaryPageHeader" : "DataPageHeaderV2");
        r.begin_struct();
        Field g;
        while (r.next_field(&g)) {
          if (g.id == 1) h.num_values = r.i32(g);
          else if (which == 5 && g.id == 2) h.encoding = r.i32(g);
          else if (which == 5 && g.id == 3) h.definition_level_encoding = r.i32(g);
          else if (which == 5 && g.id == 4) h.repetition_level_encoding = r.i32(g);
          else if (which == 7 && g.id == 2) h.encoding = r.i32(g);
          else if (which == 8 && g.id == 3) h.v2_num_rows = r.i32(g);
          else if (which == 8 && g.id == 4) h.encoding = r.i32(g);
          else if (which == 8 && g.id == 5) h.v2_definition_levels_byte_length = r.i32(g);
          else if (which == 8 && g.id == 6) h.v2_repetition_levels_byte_length = r.i32(g);
          else if (which == 8 && g.id == 7) h.v2_is_compressed = r.boolean(g);
          else {
            r.skip(g.type);
            continue;
          }
          sub.saw(g.id);
        }
        if (which == 5) sub.check({1, 2, 3, 4});
        else if (which == 7) sub.check({1, 2});
        else sub.check({1, 3, 4, 5, 6});
        sub_headers |= 1u << which;
        break;
      }
      default: r.skip(f.type); continue;
    }
    req.saw(f.id);
  }
  req.check({1, 2, 3});
  // Only the header that matches the page type counts (the caller checks it is there).
  h.has_type_header = (h.type == kDataPage && (sub_headers & (1u << 5))) ||
                      (h.type == kDictionaryPage && (sub_headers & (1u << 7))) ||
                      (h.type == kDataPageV2 && (sub_headers & (1u << 8)));
  *header_bytes = r.position();
  return h;
}

}  // namespace nemotron::io::parquet
