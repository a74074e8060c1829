// The parts of the Parquet format (apache/parquet-format, parquet.thrift) that the packed SFT
// shards use: the footer (FileMetaData) and page headers as plain structs with their Thrift
// compact encoding and a strict decoding, the RLE/bit-packed hybrid used for levels and
// dictionary indices, and page compression (zstd, plus snappy decoding for pyarrow's default).
// Only fields we write or need to read are kept; the decoder skips the others.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace nemotron::io::parquet {

// parquet.thrift enums (values are the wire values).
enum PhysicalType : int32_t { kBoolean = 0, kInt32 = 1, kInt64 = 2, kInt96 = 3, kFloat = 4, kDouble = 5, kByteArray = 6, kFixedLenByteArray = 7 };
enum Repetition : int32_t { kRequired = 0, kOptional = 1, kRepeated = 2 };
enum ConvertedType : int32_t { kConvertedList = 3, kConvertedUint8 = 11, kConvertedInt8 = 15, kConvertedInt16 = 16, kConvertedInt32 = 17 };
enum Encoding : int32_t { kPlain = 0, kPlainDictionary = 2, kRle = 3, kBitPacked = 4, kRleDictionary = 8 };
enum Codec : int32_t { kUncompressed = 0, kSnappy = 1, kGzip = 2, kLzo = 3, kBrotli = 4, kLz4 = 5, kZstd = 6, kLz4Raw = 7 };
enum PageType : int32_t { kDataPage = 0, kIndexPage = 1, kDictionaryPage = 2, kDataPageV2 = 3 };

const char* codec_name(int32_t codec);
const char* encoding_name(int32_t encoding);
const char* physical_type_name(int32_t type);

struct SchemaElement {
  std::optional<int32_t> type;  // physical type; absent for groups
  std::optional<int32_t> repetition;
  std::string name;
  std::optional<int32_t> num_children;
  std::optional<int32_t> converted_type;
  // LogicalType union: the member's field id (3 = LIST, 10 = INTEGER, ...) and INTEGER's fields.
  std::optional<int16_t> logical;
  int8_t int_bit_width = 0;
  bool int_signed = true;
};
constexpr int16_t kLogicalList = 3;
constexpr int16_t kLogicalInteger = 10;

struct ColumnMetaData {
  int32_t type = 0;
  std::vector<int32_t> encodings;
  std::vector<std::string> path_in_schema;
  int32_t codec = 0;
  int64_t num_values = 0;
  int64_t total_uncompressed_size = 0;
  int64_t total_compressed_size = 0;
  int64_t data_page_offset = 0;
  std::optional<int64_t> dictionary_page_offset;
};

struct ColumnChunk {
  std::optional<std::string> file_path;  // data in another file: we reject it
  int64_t file_offset = 0;
  std::optional<ColumnMetaData> meta_data;
};

struct RowGroup {
  std::vector<ColumnChunk> columns;
  int64_t total_byte_size = 0;
  int64_t num_rows = 0;
};

struct FileMetaData {
  int32_t version = 1;
  std::vector<SchemaElement> schema;
  int64_t num_rows = 0;
  std::vector<RowGroup> row_groups;
  std::vector<std::pair<std::string, std::string>> key_value_metadata;
  std::string created_by;
};

struct PageHeader {
  int32_t type = 0;
  int32_t uncompressed_page_size = 0;
  int32_t compressed_page_size = 0;
  // DataPageHeader (v1) / DictionaryPageHeader / DataPageHeaderV2, whichever `type` says.
  int32_t num_values = 0;
  int32_t encoding = 0;
  int32_t definition_level_encoding = kRle;
  int32_t repetition_level_encoding = kRle;
  int32_t v2_num_rows = 0;
  int32_t v2_definition_levels_byte_length = 0;
  int32_t v2_repetition_levels_byte_length = 0;
  bool v2_is_compressed = true;
  bool has_type_header = false;
};

std::string encode_file_metadata(const FileMetaData& m);
std::string encode_page_header(const PageHeader& h);
// Strict decoders: InputError prefixed with `context` on anything malformed or missing.
FileMetaData decode_file_metadata(const uint8_t* data, size_t size, const std::string& context);
// Decodes one page header at the start of [data, data + size); `*header_bytes` gets its length.
PageHeader decode_page_header(const uint8_t* data, size_t size, const std::string& context, size_t* header_bytes);

// RLE/bit-packed hybrid (Parquet Encodings.md), encoded as RLE runs only (valid, and compact for
// levels, which come in long runs).
class RleRunEncoder {
 public:
  explicit RleRunEncoder(int bit_width) : bit_width_(bit_width) {}
  void add(uint32_t value, uint64_t count);
  // The encoded runs; call once at the end.
  const std::string& finish();

 private:
  void flush();
  int bit_width_;
  uint32_t value_ = 0;
  uint64_t count_ = 0;
  std::string out_;
};

int bit_width_of(uint32_t max_value);

// Decodes exactly `count` values of `bit_width` bits from [data, data + size) into out[0..count);
// values past `count` in a final bit-packed group are ignored. InputError (with `context`) when
// the runs end early, a run is malformed, or a value exceeds `max_value`.
void decode_rle_hybrid(const uint8_t* data, size_t size, int bit_width, uint32_t max_value, size_t count,
                       uint32_t* out, const std::string& context);
// The same into bytes (levels, bit width <= 8).
void decode_rle_hybrid_u8(const uint8_t* data, size_t size, int bit_width, uint32_t max_value, size_t count,
                          uint8_t* out, const std::string& context);

// Compression of whole pages. zstd_compress at Arrow's default level (1).
std::string zstd_compress(const uint8_t* data, size_t size);
// The `out_size` bytes of a decompressed page: `data` itself when uncompressed, else `scratch`'s
// (resized only once the compressed stream's own size header agrees). InputError (with
// `context`) when the codec is unsupported or the data does not decompress to exactly out_size.
const uint8_t* decompress_page(int32_t codec, const uint8_t* data, size_t size, size_t out_size,
                               std::vector<uint8_t>* scratch, const std::string& context);

}  // namespace nemotron::io::parquet
