// Opening a Parquet file and walking a column chunk's pages (see parquet_pages.h). Every count a
// header states is bounded before it sizes an allocation.
#include "io/parquet_pages.h"

#include <cstring>
#include <limits>

#include <fmt/ranges.h>

#include "core/error.h"

namespace nemotron::io::parquet {

namespace {

constexpr size_t kMaxFooterBytes = 64u << 20;  // footers are KBs to a few MBs; refuse absurd claims
constexpr size_t kMaxPageBytes = 1u << 30;     // pages are ~1 MiB; 1 GiB bounds what a header can make us allocate
constexpr int32_t kMaxPageLevels = 1 << 28;    // likewise for the levels a page header can make us decode

}  // namespace

ParquetFile open_parquet_file(const std::string& path, const std::string& what) {
  auto bad = [&](const std::string& why) { throw InputError(fmt::format("{}: invalid {}: {}", path, what, why)); };
  ParquetFile f;
  f.file = MappedFile::open(path);
  const uint8_t* d = f.file->data();
  const size_t n = f.file->size();
  if (n < 12) bad(fmt::format("{} bytes is too short for a Parquet file (truncated?)", n));
  if (std::memcmp(d, "PAR1", 4) != 0) bad("does not start with the Parquet magic 'PAR1'");
  if (std::memcmp(d + n - 4, "PAR1", 4) != 0) bad("does not end with the Parquet magic 'PAR1' (truncated, or encrypted 'PARE')");
  uint32_t footer_len;
  std::memcpy(&footer_len, d + n - 8, 4);
  if (footer_len == 0 || footer_len > n - 12 || footer_len > kMaxFooterBytes)
    bad(fmt::format("footer length {} does not fit in the file's {} bytes", footer_len, n));
  f.data_end = n - 8 - footer_len;
  f.meta = decode_file_metadata(d + f.data_end, footer_len, path + ": Parquet footer");
  int64_t rows = 0;
  for (size_t g = 0; g < f.meta.row_groups.size(); ++g) {
    const int64_t r = f.meta.row_groups[g].num_rows;
    if (r < 0 || r > std::numeric_limits<int64_t>::max() - rows) bad(fmt::format("row group {} has {} rows", g, r));
    rows += r;
  }
  if (rows != f.meta.num_rows) bad(fmt::format("the footer says {} rows, its row groups hold {}", f.meta.num_rows, rows));
  return f;
}

std::vector<SchemaNode> schema_tree(const ParquetFile& f, const std::string& path, const std::string& what) {
  auto bad = [&](const std::string& why) { throw InputError(fmt::format("{}: invalid {}: {}", path, what, why)); };
  const auto& s = f.meta.schema;
  if (s.empty()) bad("the schema is empty");
  if (!s[0].num_children || *s[0].num_children < 0) bad("the schema root is not a group");
  std::vector<SchemaNode> nodes(1);
  // Open groups: (node, children still to come).
  std::vector<std::pair<size_t, int64_t>> open{{0, *s[0].num_children}};
  size_t i = 1;
  int64_t leaves = 0;
  while (!open.empty()) {
    if (open.back().second == 0) {
      open.pop_back();
      continue;
    }
    --open.back().second;
    if (i >= s.size()) bad(fmt::format("the schema declares more fields than its {} elements", s.size()));
    const SchemaElement& e = s[i];
    const size_t id = nodes.size();
    nodes[open.back().first].children.push_back(id);
    nodes.push_back({i, {}, -1});
    if (e.type) {
      if (e.num_children && *e.num_children != 0) bad(fmt::format("schema field '{}' has both a type and children", e.name));
      nodes[id].leaf = leaves++;
    } else {
      if (!e.num_children || *e.num_children < 0) bad(fmt::format("schema field '{}' has neither a type nor children", e.name));
      open.emplace_back(id, *e.num_children);
    }
    ++i;
  }
  if (i != s.size()) bad(fmt::format("the schema has {} elements after its last field", s.size() - i));
  for (const auto& rg : f.meta.row_groups)
    if (static_cast<int64_t>(rg.columns.size()) != leaves)
      bad(fmt::format("a row group has {} column chunks, the schema {} columns", rg.columns.size(), leaves));
  return nodes;
}

void ColumnPages::fail(const std::string& what) const { throw InputError(fmt::format("{}: {}", where_, what)); }

ColumnPages::ColumnPages(const ParquetFile& f, const ColumnChunk& chunk, const LeafColumn& col, std::string where)
    : f_(f), col_(col), where_(std::move(where)) {
  if (chunk.file_path) fail(fmt::format("its data is in another file ('{}'), which is not supported", *chunk.file_path));
  if (!chunk.meta_data) fail("the column chunk has no metadata");
  const ColumnMetaData& m = *chunk.meta_data;
  if (m.type != col_.physical)
    fail(fmt::format("chunk type {}, the schema says {}", physical_type_name(m.type), physical_type_name(col_.physical)));
  if (m.path_in_schema != col_.path) fail(fmt::format("path_in_schema '{}' does not match the schema", fmt::join(m.path_in_schema, ".")));
  if (m.num_values < 0) fail(fmt::format("num_values {}", m.num_values));
  // Some writers store dictionary_page_offset 0 for "none".
  int64_t start = m.data_page_offset;
  if (m.dictionary_page_offset && *m.dictionary_page_offset > 0) start = std::min(start, *m.dictionary_page_offset);
  const int64_t data_end = static_cast<int64_t>(f_.data_end);
  if (start < 4 || start >= data_end || m.total_compressed_size <= 0 || m.total_compressed_size > data_end - start)
    fail(fmt::format("column chunk [{}, +{}) lies outside the data section [4, {})", start, m.total_compressed_size, data_end));
  pos_ = static_cast<size_t>(start);
  end_ = pos_ + static_cast<size_t>(m.total_compressed_size);
  codec_ = m.codec;
  num_values_ = m.num_values;
}

// Levels of a v1 page: a 4-byte length, then the RLE/bit-packed hybrid.
size_t ColumnPages::read_levels_v1(const uint8_t* d, size_t size, int32_t encoding, int max_level, size_t count,
                                   uint8_t* out, const std::string& where, const char* what) {
  if (max_level == 0) {  // a level that cannot vary is not stored
    std::memset(out, 0, count);
    return 0;
  }
  auto fail_at = [&](const std::string& why) { throw InputError(fmt::format("{}: {}", where, why)); };
  if (encoding != kRle) fail_at(fmt::format("{} levels encoded {}, expected RLE", what, encoding_name(encoding)));
  if (size < 4) fail_at(fmt::format("{} levels cut off", what));
  uint32_t len;
  std::memcpy(&len, d, 4);
  if (len > size - 4) fail_at(fmt::format("{} levels of {} bytes with {} left in the page", what, len, size - 4));
  decode_rle_hybrid_u8(d + 4, len, bit_width_of(static_cast<uint32_t>(max_level)), static_cast<uint32_t>(max_level), count,
                       out, where + ": " + what + " levels");
  return 4 + len;
}

bool ColumnPages::next(DataPage* page) {
  const uint8_t* base = f_.file->data();
  while (levels_seen_ < num_values_) {
    if (pos_ >= end_) fail(fmt::format("the column chunk ends after {} of its {} values", levels_seen_, num_values_));
    std::string where = fmt::format("{}, page at byte {}", where_, pos_);
    auto fail_at = [&](const std::string& why) { throw InputError(fmt::format("{}: {}", where, why)); };
    size_t header_bytes = 0;
    const PageHeader h = decode_page_header(base + pos_, end_ - pos_, where + ": page header", &header_bytes);
    pos_ += header_bytes;
    if (h.compressed_page_size < 0 || static_cast<size_t>(h.compressed_page_size) > end_ - pos_)
      fail_at(fmt::format("compressed size {} runs past the column chunk ({} bytes left)", h.compressed_page_size, end_ - pos_));
    if (h.uncompressed_page_size < 0 || static_cast<size_t>(h.uncompressed_page_size) > kMaxPageBytes)
      fail_at(fmt::format("uncompressed size {} outside [0, {}]", h.uncompressed_page_size, kMaxPageBytes));
    const uint8_t* raw = base + pos_;
    const size_t raw_size = static_cast<size_t>(h.compressed_page_size);
    const size_t out_size = static_cast<size_t>(h.uncompressed_page_size);
    pos_ += raw_size;
    if (h.type == kIndexPage) continue;
    if (!h.has_type_header) fail_at(fmt::format("page of type {} without its header", h.type));
    if (h.num_values < 0 || h.num_values > kMaxPageLevels)
      fail_at(fmt::format("num_values {} outside [0, {}]", h.num_values, kMaxPageLevels));
    if (h.type == kDictionaryPage) {
      if (dict_ || data_seen_) fail_at("a second dictionary page, or one after the data pages");
      if (h.encoding != kPlain && h.encoding != kPlainDictionary)
        fail_at(fmt::format("dictionary page encoding {}, expected PLAIN", encoding_name(h.encoding)));
      dict_ = decompress_page(codec_, raw, raw_size, out_size, &dict_scratch_, where);
      dict_size_ = out_size;
      dict_count_ = static_cast<size_t>(h.num_values);
      continue;
    }
    if (h.type != kDataPage && h.type != kDataPageV2) fail_at(fmt::format("unknown page type {}", h.type));
    if (h.num_values > num_values_ - levels_seen_)
      fail_at(fmt::format("{} values, more than the {} left in the chunk", h.num_values, num_values_ - levels_seen_));
    data_seen_ = true;
    const size_t n = static_cast<size_t>(h.num_values);
    rep_.resize(n);
    def_.resize(n);
    if (h.type == kDataPage) {
      const uint8_t* d = decompress_page(codec_, raw, raw_size, out_size, &scratch_, where);
      size_t at = read_levels_v1(d, out_size, h.repetition_level_encoding, col_.max_rep, n, rep_.data(), where, "repetition");
      at += read_levels_v1(d + at, out_size - at, h.definition_level_encoding, col_.max_def, n, def_.data(), where, "definition");
      page->values = d + at;
      page->values_size = out_size - at;
    } else {  // v2: levels uncompressed and unprefixed ahead of the (maybe compressed) values
      const int64_t rl = h.v2_repetition_levels_byte_length, dl = h.v2_definition_levels_byte_length;
      if (rl < 0 || dl < 0 || rl + dl > static_cast<int64_t>(raw_size) || rl + dl > h.uncompressed_page_size)
        fail_at(fmt::format("level lengths {} + {} do not fit the page", rl, dl));
      if (col_.max_rep == 0) std::memset(rep_.data(), 0, n);
      else
        decode_rle_hybrid_u8(raw, static_cast<size_t>(rl), bit_width_of(static_cast<uint32_t>(col_.max_rep)),
                             static_cast<uint32_t>(col_.max_rep), n, rep_.data(), where + ": repetition levels");
      if (col_.max_def == 0) std::memset(def_.data(), 0, n);
      else
        decode_rle_hybrid_u8(raw + rl, static_cast<size_t>(dl), bit_width_of(static_cast<uint32_t>(col_.max_def)),
                             static_cast<uint32_t>(col_.max_def), n, def_.data(), where + ": definition levels");
      const size_t levels = static_cast<size_t>(rl + dl);
      const size_t values_out = out_size - levels;
      page->values = h.v2_is_compressed ? decompress_page(codec_, raw + levels, raw_size - levels, values_out, &scratch_, where)
                                        : raw + levels;
      page->values_size = h.v2_is_compressed ? values_out : raw_size - levels;
    }
    page->encoding = h.encoding;
    page->num_levels = n;
    page->rep = rep_.data();
    page->def = def_.data();
    size_t count = 0;
    for (size_t i = 0; i < n; ++i) count += def_[i] == col_.max_def;
    page->num_values = count;
    page->where = std::move(where);
    levels_seen_ += h.num_values;
    return true;
  }
  return false;
}

void decode_dictionary_indices(const DataPage& page, size_t dict_count, std::vector<uint32_t>* out) {
  const size_t count = page.num_values;
  out->resize(count);
  if (count == 0) return;
  if (dict_count == 0) throw InputError(fmt::format("{}: dictionary-encoded values with an empty dictionary", page.where));
  if (page.values_size < 1) throw InputError(fmt::format("{}: dictionary indices cut off", page.where));
  decode_rle_hybrid(page.values + 1, page.values_size - 1, page.values[0], static_cast<uint32_t>(dict_count - 1), count,
                    out->data(), page.where + ": dictionary indices");
}

}  // namespace nemotron::io::parquet
