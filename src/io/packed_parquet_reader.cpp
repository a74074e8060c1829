// Reads packed SFT shards: ours and pyarrow's of the same shape (3-level LIST columns of INT32 or
// INT64, nullable or not; data pages v1 or v2; PLAIN or dictionary-encoded values; zstd, snappy
// or no compression; extra columns ignored). Strict: every offset and length is checked against
// the file before use, every count against what the pages really hold, and anything else is an
// InputError naming the file, the row group and the column.
#include <cstring>
#include <limits>
#include <type_traits>

#include <fmt/ranges.h>

#include "core/error.h"
#include "io/mapped_file.h"
#include "io/packed_parquet.h"
#include "io/packed_parquet_format.h"

namespace nemotron::io {

namespace pq = parquet;

namespace {

constexpr size_t kMaxFooterBytes = 64u << 20;  // a shard's footer is a few KB; refuse absurd claims
constexpr size_t kMaxPageBytes = 1u << 30;     // pages are ~1 MiB; 1 GiB bounds what a header can make us allocate
constexpr int32_t kMaxPageLevels = 1 << 28;    // likewise for the levels a page header can make us decode

// One list column as the schema declares it.
struct ListColumn {
  std::string name;
  size_t leaf = 0;  // index among the schema's leaves = index in each row group's columns
  int32_t physical = pq::kInt32;
  std::vector<std::string> path;  // name / repeated group / element
  int max_def = 0;
  int empty_def = 0;  // definition level of an empty (defined, zero-length) list
  bool outer_optional = false, element_optional = false;
};

struct Footer {
  std::shared_ptr<const MappedFile> file;
  pq::FileMetaData meta;
  size_t data_end = 0;  // first byte of the footer: column chunks lie in [4, data_end)
  ListColumn columns[3];
};

[[noreturn]] void bad_file(const std::string& path, const std::string& what) {
  throw InputError(fmt::format("{}: invalid packed Parquet shard: {}", path, what));
}

// Finds the three list columns in the flattened schema (walked without recursion: its depth is
// whatever the file says).
void resolve_schema(Footer* f, const std::string& path) {
  const auto& s = f->meta.schema;
  if (s.empty()) bad_file(path, "the schema is empty");
  if (!s[0].num_children || *s[0].num_children < 0) bad_file(path, "the schema root is not a group");
  struct Top {
    size_t element;
    size_t first_leaf;
  };
  std::vector<Top> tops;
  std::vector<int64_t> remaining{*s[0].num_children};
  size_t i = 1, leaves = 0;
  while (!remaining.empty()) {
    if (remaining.back() == 0) {
      remaining.pop_back();
      continue;
    }
    --remaining.back();
    if (i >= s.size()) bad_file(path, fmt::format("the schema declares more fields than its {} elements", s.size()));
    const pq::SchemaElement& e = s[i];
    if (remaining.size() == 1) tops.push_back({i, leaves});
    if (e.type) {
      if (e.num_children && *e.num_children != 0) bad_file(path, fmt::format("schema field '{}' has both a type and children", e.name));
      ++leaves;
    } else {
      if (!e.num_children || *e.num_children < 0) bad_file(path, fmt::format("schema field '{}' has neither a type nor children", e.name));
      remaining.push_back(*e.num_children);
    }
    ++i;
  }
  if (i != s.size()) bad_file(path, fmt::format("the schema has {} elements after its last field", s.size() - i));

  for (int c = 0; c < 3; ++c) {
    const std::string name = kPackedParquetColumns[c];
    const Top* top = nullptr;
    for (const auto& t : tops)
      if (s[t.element].name == name) top = &t;
    if (!top) bad_file(path, fmt::format("no column '{}' (a packed shard has input_ids, loss_mask and seq_start_id)", name));
    auto not_list = [&](const std::string& why) {
      bad_file(path, fmt::format("column '{}' is not a list of integers in the 3-level LIST layout: {}", name, why));
    };
    const size_t at = top->element;
    const pq::SchemaElement& outer = s[at];
    if (outer.type) not_list("it is a primitive column");
    if (!(outer.converted_type == pq::kConvertedList || outer.logical == pq::kLogicalList)) not_list("no LIST annotation");
    if (outer.repetition == pq::kRepeated) not_list("the list field itself is repeated (legacy 2-level lists are not read)");
    if (*outer.num_children != 1 || at + 2 >= s.size()) not_list("the list group must have one child");
    const pq::SchemaElement& rep = s[at + 1];
    if (rep.type || rep.repetition != pq::kRepeated || !rep.num_children || *rep.num_children != 1)
      not_list("the list group's child must be a repeated group of one field");
    const pq::SchemaElement& elem = s[at + 2];
    if (!elem.type) not_list("the list element is a group (nested lists are not read)");
    if (elem.repetition == pq::kRepeated) not_list("the list element is repeated");
    if (*elem.type != pq::kInt32 && *elem.type != pq::kInt64)
      not_list(fmt::format("element type {}, expected INT32 or INT64", pq::physical_type_name(*elem.type)));
    ListColumn& col = f->columns[c];
    col.name = name;
    col.leaf = top->first_leaf;
    col.physical = *elem.type;
    col.path = {outer.name, rep.name, elem.name};
    col.outer_optional = outer.repetition.value_or(pq::kRequired) == pq::kOptional;
    col.element_optional = elem.repetition.value_or(pq::kRequired) == pq::kOptional;
    col.empty_def = col.outer_optional ? 1 : 0;
    col.max_def = col.empty_def + 1 + (col.element_optional ? 1 : 0);
  }
  for (const auto& rg : f->meta.row_groups)
    if (rg.columns.size() != leaves)
      bad_file(path, fmt::format("a row group has {} column chunks, the schema {} columns", rg.columns.size(), leaves));
}

Footer open_footer(const std::string& path) {
  Footer f;
  f.file = MappedFile::open(path);
  const uint8_t* d = f.file->data();
  const size_t n = f.file->size();
  if (n < 12) bad_file(path, fmt::format("{} bytes is too short for a Parquet file (truncated?)", n));
  if (std::memcmp(d, "PAR1", 4) != 0) bad_file(path, "does not start with the Parquet magic 'PAR1'");
  if (std::memcmp(d + n - 4, "PAR1", 4) != 0)
    bad_file(path, "does not end with the Parquet magic 'PAR1' (truncated, or encrypted 'PARE')");
  uint32_t footer_len;
  std::memcpy(&footer_len, d + n - 8, 4);
  if (footer_len == 0 || footer_len > n - 12 || footer_len > kMaxFooterBytes)
    bad_file(path, fmt::format("footer length {} does not fit in the file's {} bytes", footer_len, n));
  f.data_end = n - 8 - footer_len;
  f.meta = pq::decode_file_metadata(d + f.data_end, footer_len, path + ": Parquet footer");
  int64_t rows = 0;
  for (size_t g = 0; g < f.meta.row_groups.size(); ++g) {
    const int64_t r = f.meta.row_groups[g].num_rows;
    if (r < 0 || r > std::numeric_limits<int64_t>::max() - rows) bad_file(path, fmt::format("row group {} has {} rows", g, r));
    rows += r;
  }
  if (rows != f.meta.num_rows)
    bad_file(path, fmt::format("the footer says {} rows, its row groups hold {}", f.meta.num_rows, rows));
  resolve_schema(&f, path);
  return f;
}

// Decodes one column chunk of one row group into rows[first_row ...]: the first column makes the
// rows (`make_rows`), the others fill them and must end on the same count.
class ChunkReader {
 public:
  ChunkReader(const Footer& f, const ListColumn& col, size_t group, const std::string& path)
      : f_(f), col_(col), where_(fmt::format("{}: row group {}, column '{}'", path, group, col.name)) {}

  template <class T>
  void read(const pq::ColumnChunk& chunk, int64_t group_rows, std::vector<PackedRow>* rows, size_t first_row,
            std::vector<T> PackedRow::*member, bool make_rows) {
    rows_ = rows, first_row_ = first_row, make_rows_ = make_rows, group_rows_ = group_rows;
    row_ = -1;
    if (chunk.file_path) fail(fmt::format("its data is in another file ('{}'), which is not supported", *chunk.file_path));
    if (!chunk.meta_data) fail("the column chunk has no metadata");
    const pq::ColumnMetaData& m = *chunk.meta_data;
    if (m.type != col_.physical)
      fail(fmt::format("chunk type {}, the schema says {}", pq::physical_type_name(m.type), pq::physical_type_name(col_.physical)));
    if (m.path_in_schema != col_.path) fail(fmt::format("path_in_schema '{}' does not match the schema", fmt::join(m.path_in_schema, ".")));
    if (m.num_values < 0) fail(fmt::format("num_values {}", m.num_values));
    // Some writers store dictionary_page_offset 0 for "none".
    int64_t start = m.data_page_offset;
    if (m.dictionary_page_offset && *m.dictionary_page_offset > 0) start = std::min(start, *m.dictionary_page_offset);
    const int64_t data_end = static_cast<int64_t>(f_.data_end);
    if (start < 4 || start >= data_end || m.total_compressed_size <= 0 || m.total_compressed_size > data_end - start)
      fail(fmt::format("column chunk [{}, +{}) lies outside the data section [4, {})", start, m.total_compressed_size, data_end));
    const uint8_t* base = f_.file->data();
    size_t pos = static_cast<size_t>(start);
    const size_t end = pos + static_cast<size_t>(m.total_compressed_size);
    int64_t levels_seen = 0;
    bool data_seen = false;
    dict_.clear();
    has_dict_ = false;
    while (levels_seen < m.num_values) {
      if (pos >= end) fail(fmt::format("the column chunk ends after {} of its {} values", levels_seen, m.num_values));
      const std::string page_where = fmt::format("{}, page at byte {}", where_, pos);
      size_t header_bytes = 0;
      const pq::PageHeader h = pq::decode_page_header(base + pos, end - pos, page_where + ": page header", &header_bytes);
      pos += header_bytes;
      if (h.compressed_page_size < 0 || static_cast<size_t>(h.compressed_page_size) > end - pos)
        fail_at(page_where, fmt::format("compressed size {} runs past the column chunk ({} bytes left)", h.compressed_page_size, end - pos));
      if (h.uncompressed_page_size < 0 || static_cast<size_t>(h.uncompressed_page_size) > kMaxPageBytes)
        fail_at(page_where, fmt::format("uncompressed size {} outside [0, {}]", h.uncompressed_page_size, kMaxPageBytes));
      const uint8_t* page = base + pos;
      const size_t page_size = static_cast<size_t>(h.compressed_page_size);
      pos += page_size;
      if (h.type == pq::kIndexPage) continue;
      if (!h.has_type_header) fail_at(page_where, fmt::format("page of type {} without its header", h.type));
      if (h.num_values < 0 || h.num_values > kMaxPageLevels)
        fail_at(page_where, fmt::format("num_values {} outside [0, {}]", h.num_values, kMaxPageLevels));
      if (h.type == pq::kDictionaryPage) {
        if (has_dict_ || data_seen) fail_at(page_where, "a second dictionary page, or one after the data pages");
        read_dictionary(h, page, page_size, m.codec, page_where);
        continue;
      }
      if (h.type != pq::kDataPage && h.type != pq::kDataPageV2) fail_at(page_where, fmt::format("unknown page type {}", h.type));
      if (h.num_values > m.num_values - levels_seen)
        fail_at(page_where, fmt::format("{} values, more than the {} left in the chunk", h.num_values, m.num_values - levels_seen));
      data_seen = true;
      read_data_page(h, page, page_size, m.codec, page_where, member);
      levels_seen += h.num_values;
    }
    const int64_t got = row_ + 1;
    if (got != group_rows) fail(fmt::format("holds {} rows, the row group says {}", got, group_rows));
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw InputError(fmt::format("{}: {}", where_, what)); }
  [[noreturn]] void fail_at(const std::string& where, const std::string& what) const {
    throw InputError(fmt::format("{}: {}", where, what));
  }

  size_t value_width() const { return col_.physical == pq::kInt64 ? 8 : 4; }

  int64_t plain_value(const uint8_t* p) const {
    if (col_.physical == pq::kInt64) {
      int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }

  void read_dictionary(const pq::PageHeader& h, const uint8_t* page, size_t size, int32_t codec, const std::string& where) {
    if (h.encoding != pq::kPlain && h.encoding != pq::kPlainDictionary)
      fail_at(where, fmt::format("dictionary page encoding {}, expected PLAIN", pq::encoding_name(h.encoding)));
    const uint8_t* d = pq::decompress_page(codec, page, size, static_cast<size_t>(h.uncompressed_page_size), &scratch_, where);
    const size_t n = static_cast<size_t>(h.num_values);
    if (n > static_cast<size_t>(h.uncompressed_page_size) / value_width())
      fail_at(where, fmt::format("dictionary of {} values in {} bytes", n, h.uncompressed_page_size));
    dict_.resize(n);
    for (size_t i = 0; i < n; ++i) dict_[i] = plain_value(d + i * value_width());
    has_dict_ = true;
  }

  // Levels of a v1 page: a 4-byte length, then the RLE/bit-packed hybrid.
  size_t read_levels_v1(const uint8_t* d, size_t size, int32_t encoding, int max_level, size_t count, uint8_t* out,
                        const std::string& where, const char* what) {
    if (encoding != pq::kRle)
      fail_at(where, fmt::format("{} levels encoded {}, expected RLE", what, pq::encoding_name(encoding)));
    if (size < 4) fail_at(where, fmt::format("{} levels cut off", what));
    uint32_t len;
    std::memcpy(&len, d, 4);
    if (len > size - 4) fail_at(where, fmt::format("{} levels of {} bytes with {} left in the page", what, len, size - 4));
    pq::decode_rle_hybrid_u8(d + 4, len, pq::bit_width_of(static_cast<uint32_t>(max_level)),
                             static_cast<uint32_t>(max_level), count, out, where + ": " + what + " levels");
    return 4 + len;
  }

  template <class T>
  void read_data_page(const pq::PageHeader& h, const uint8_t* page, size_t page_size, int32_t codec,
                      const std::string& where, std::vector<T> PackedRow::*member) {
    const size_t n = static_cast<size_t>(h.num_values);
    rep_.resize(n);
    def_.resize(n);
    const uint8_t* values;
    size_t values_size;
    if (h.type == pq::kDataPage) {
      const uint8_t* d = pq::decompress_page(codec, page, page_size, static_cast<size_t>(h.uncompressed_page_size), &scratch_, where);
      size_t size = static_cast<size_t>(h.uncompressed_page_size), at = 0;
      at += read_levels_v1(d + at, size - at, h.repetition_level_encoding, 1, n, rep_.data(), where, "repetition");
      at += read_levels_v1(d + at, size - at, h.definition_level_encoding, col_.max_def, n, def_.data(), where, "definition");
      values = d + at, values_size = size - at;
    } else {  // v2: levels uncompressed and unprefixed ahead of the (maybe compressed) values
      const int64_t rl = h.v2_repetition_levels_byte_length, dl = h.v2_definition_levels_byte_length;
      if (rl < 0 || dl < 0 || rl + dl > static_cast<int64_t>(page_size) || rl + dl > h.uncompressed_page_size)
        fail_at(where, fmt::format("level lengths {} + {} do not fit the page", rl, dl));
      pq::decode_rle_hybrid_u8(page, static_cast<size_t>(rl), 1, 1, n, rep_.data(), where + ": repetition levels");
      pq::decode_rle_hybrid_u8(page + rl, static_cast<size_t>(dl), pq::bit_width_of(static_cast<uint32_t>(col_.max_def)),
                               static_cast<uint32_t>(col_.max_def), n, def_.data(), where + ": definition levels");
      const size_t levels = static_cast<size_t>(rl + dl);
      const size_t out_size = static_cast<size_t>(h.uncompressed_page_size) - levels;
      values = h.v2_is_compressed ? pq::decompress_page(codec, page + levels, page_size - levels, out_size, &scratch_, where)
                                  : page + levels;
      values_size = h.v2_is_compressed ? out_size : page_size - levels;
    }
    size_t count = 0;
    for (size_t i = 0; i < n; ++i) count += def_[i] == col_.max_def;
    decode_values(h.encoding, values, values_size, count, where);
    assemble(member, where);
  }

  void decode_values(int32_t encoding, const uint8_t* d, size_t size, size_t count, const std::string& where) {
    values_.resize(count);
    if (encoding == pq::kPlain) {
      if (count > size / value_width())
        fail_at(where, fmt::format("{} PLAIN values need {} bytes, the page has {}", count, count * value_width(), size));
      if (col_.physical == pq::kInt32) {
        for (size_t i = 0; i < count; ++i) values_[i] = plain_value(d + 4 * i);
      } else {
        std::memcpy(values_.data(), d, count * 8);
      }
      return;
    }
    if (encoding == pq::kRleDictionary || encoding == pq::kPlainDictionary) {
      if (!has_dict_) fail_at(where, "dictionary-encoded page without a dictionary page");
      if (count == 0) return;
      if (dict_.empty()) fail_at(where, "dictionary-encoded values with an empty dictionary");
      if (size < 1) fail_at(where, "dictionary indices cut off");
      index_.resize(count);
      pq::decode_rle_hybrid(d + 1, size - 1, d[0], static_cast<uint32_t>(dict_.size() - 1), count, index_.data(),
                            where + ": dictionary indices");
      for (size_t i = 0; i < count; ++i) values_[i] = dict_[index_[i]];
      return;
    }
    fail_at(where, fmt::format("value encoding {} is not supported (PLAIN or RLE_DICTIONARY)", pq::encoding_name(encoding)));
  }

  // Walks the levels: repetition 0 starts a row, definition max_def carries a value. The values
  // of one row within the page are appended as one run.
  template <class T>
  void assemble(std::vector<T> PackedRow::*member, const std::string& where) {
    std::vector<PackedRow>& rows = *rows_;
    const size_t n = rep_.size();
    size_t vi = 0;
    std::vector<T>* cur = row_ >= 0 ? &(rows[first_row_ + static_cast<size_t>(row_)].*member) : nullptr;
    for (size_t i = 0; i < n;) {
      const int def = def_[i];
      if (rep_[i] == 0) {
        ++row_;
        const size_t r = first_row_ + static_cast<size_t>(row_);
        if (make_rows_) {
          if (row_ >= group_rows_) fail_at(where, fmt::format("more rows than the row group's {}", group_rows_));
          rows.emplace_back();
        } else if (r >= rows.size()) {
          fail_at(where, fmt::format("more rows than column '{}' holds", kPackedParquetColumns[0]));
        }
        cur = &(rows[r].*member);
        if (def == col_.empty_def) {  // an empty list
          ++i;
          continue;
        }
        if (def < col_.empty_def) fail_at(where, fmt::format("row {} is null (packed shards have no null lists)", row_));
      } else if (!cur) {
        fail_at(where, "the column chunk starts inside a row (repetition level 1)");
      } else if (def <= col_.empty_def) {
        fail_at(where, fmt::format("row {}: an empty-list marker inside a list", row_));
      }
      if (def != col_.max_def) fail_at(where, fmt::format("row {} has a null element", row_));
      size_t j = i + 1;
      while (j < n && rep_[j] == 1 && def_[j] == col_.max_def) ++j;
      const size_t count = j - i, old = cur->size();
      cur->resize(old + count);
      T* dst = cur->data() + old;
      const int64_t* src = values_.data() + vi;
      bool in_range = true;
      for (size_t k = 0; k < count; ++k) {
        in_range &= src[k] >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                    src[k] <= static_cast<int64_t>(std::numeric_limits<T>::max());
        dst[k] = static_cast<T>(src[k]);
      }
      if (!in_range) {
        for (size_t k = 0; k < count; ++k)
          if (static_cast<int64_t>(dst[k]) != src[k])
            fail_at(where, fmt::format("row {}: value {} does not fit {}", row_, src[k], std::is_same_v<T, uint8_t> ? "uint8" : "int32"));
      }
      vi += count;
      i = j;
    }
  }

  const Footer& f_;
  const ListColumn& col_;
  std::string where_;
  std::vector<PackedRow>* rows_ = nullptr;
  size_t first_row_ = 0;
  bool make_rows_ = false;
  int64_t group_rows_ = 0;
  int64_t row_ = -1;  // index in this row group of the row being filled
  std::vector<uint8_t> scratch_, rep_, def_;
  std::vector<int64_t> values_, dict_;
  std::vector<uint32_t> index_;
  bool has_dict_ = false;
};

}  // namespace

std::vector<PackedRow> read_packed_parquet(const std::string& path) {
  const Footer f = open_footer(path);
  std::vector<PackedRow> rows;
  for (size_t g = 0; g < f.meta.row_groups.size(); ++g) {
    const pq::RowGroup& rg = f.meta.row_groups[g];
    const size_t first = rows.size();
    ChunkReader(f, f.columns[0], g, path).read(rg.columns[f.columns[0].leaf], rg.num_rows, &rows, first, &PackedRow::input_ids, true);
    ChunkReader(f, f.columns[1], g, path).read(rg.columns[f.columns[1].leaf], rg.num_rows, &rows, first, &PackedRow::loss_mask, false);
    ChunkReader(f, f.columns[2], g, path).read(rg.columns[f.columns[2].leaf], rg.num_rows, &rows, first, &PackedRow::seq_start_id, false);
  }
  for (size_t r = 0; r < rows.size(); ++r) validate_packed_row(rows[r], path, static_cast<int64_t>(r));
  return rows;
}

int64_t packed_parquet_num_rows(const std::string& path) { return open_footer(path).meta.num_rows; }

}  // namespace nemotron::io
