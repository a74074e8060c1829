// Nested Parquet columns to JSON rows (see parquet_rows.h). Each leaf column is compiled into the
// steps from a row down to its value (enter a struct field, become null, be a list, pick a list
// element, store the value); its (repetition, definition, value) triples are then replayed from
// the row's root one by one, so columns that share structs and lists fill the same objects, and a
// list that crosses a page boundary needs no state beyond the element index per nesting level.
#include "io/parquet_rows.h"

#include <cstring>

#include <fmt/ranges.h>

#include "core/error.h"
#include "io/parquet_pages.h"

namespace nemotron::io {

namespace pq = parquet;
using Json = nlohmann::ordered_json;

namespace {

constexpr const char* kWhat = "Parquet file";
// parquet.thrift's ConvertedType and LogicalType values beyond those packed shards use.
constexpr int32_t kConvertedUtf8 = 0, kConvertedMap = 1, kConvertedMapKeyValue = 2, kConvertedEnum = 4, kConvertedJson = 19;
constexpr int16_t kLogicalString = 1, kLogicalMap = 2, kLogicalEnum = 4, kLogicalJson = 12;

struct Step {
  enum Kind : uint8_t { kKey, kNull, kArray, kRepeat, kValue } kind;
  int level = 0;    // kNull, kRepeat: the definition level at which the node is present
  int rep = 0;      // kRepeat: its repetition level
  std::string key;  // kKey
};

struct Column {
  std::string name;  // dotted path, for messages
  pq::LeafColumn spec;
  bool utf8 = false;  // BYTE_ARRAY read as a string
  std::vector<Step> steps;
};

bool valid_utf8(const uint8_t* s, size_t n) {
  size_t i = 0;
  while (i < n) {
    const uint8_t c = s[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4, cp = c & 0x07;
    } else {
      return false;
    }
    if (len > n - i) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (s[i + k] & 0x3f);
    }
    // No overlong forms, surrogates or code points past U+10FFFF.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += len;
  }
  return true;
}

class Schema {
 public:
  Schema(const pq::ParquetFile& f, const std::string& path) : f_(f), path_(path) {
    tree_ = pq::schema_tree(f, path, kWhat);
    std::vector<size_t> chain;
    collect(0, &chain);
  }
  std::vector<Column> columns;

 private:
  const pq::SchemaElement& el(size_t node) const { return f_.meta.schema[tree_[node].element]; }
  [[noreturn]] void bad(const std::string& field, const std::string& why) const {
    throw InputError(fmt::format("{}: column '{}': {}", path_, field, why));
  }

  void collect(size_t node, std::vector<size_t>* chain) {
    if (node != 0) chain->push_back(node);
    if (tree_[node].leaf >= 0) compile(*chain);
    for (size_t c : tree_[node].children) collect(c, chain);
    if (node != 0) chain->pop_back();
  }

  // The steps from the row down to the leaf at the end of `chain` (root excluded).
  void compile(const std::vector<size_t>& chain) {
    Column col;
    for (size_t n : chain) col.spec.path.push_back(el(n).name);
    col.name = fmt::format("{}", fmt::join(col.spec.path, "."));
    for (const std::string& name : col.spec.path)  // they become JSON keys
      if (!valid_utf8(reinterpret_cast<const uint8_t*>(name.data()), name.size())) bad(col.name, "a field name that is not UTF-8");
    const pq::SchemaElement& leaf = el(chain.back());
    col.spec.physical = *leaf.type;
    int def = 0, rep = 0;
    size_t i = 0;
    auto enter = [&](size_t n) {  // the value of node chain[i] == n: its own nullability, then what it is
      const pq::SchemaElement& e = el(n);
      const int32_t r = e.repetition.value_or(pq::kRequired);
      if (r == pq::kRepeated) bad(col.name, fmt::format("field '{}' is repeated outside a LIST (legacy lists are not read)", e.name));
      if (r == pq::kOptional) col.steps.push_back({Step::kNull, ++def, 0, {}});
    };
    col.steps.push_back({Step::kKey, 0, 0, el(chain[0]).name});
    enter(chain[0]);
    while (true) {
      const size_t n = chain[i];
      const pq::SchemaElement& e = el(n);
      if (e.type) break;  // the leaf
      if (e.converted_type == kConvertedMap || e.converted_type == kConvertedMapKeyValue || e.logical == kLogicalMap)
        bad(col.name, fmt::format("'{}' is a MAP, which is not read", e.name));
      const bool list = e.converted_type == pq::kConvertedList || e.logical == pq::kLogicalList;
      if (list) {
        const size_t rn = chain[i + 1];
        const pq::SchemaElement& r = el(rn);
        if (r.type || r.repetition != pq::kRepeated || tree_[rn].children.size() != 1)
          bad(col.name, fmt::format("LIST '{}' is not in the 3-level layout (a repeated group of one field)", e.name));
        col.steps.push_back({Step::kArray, 0, 0, {}});
        col.steps.push_back({Step::kRepeat, ++def, ++rep, {}});
        i += 2;
        enter(chain[i]);
      } else {  // a struct: the next node is one of its fields
        ++i;
        col.steps.push_back({Step::kKey, 0, 0, el(chain[i]).name});
        enter(chain[i]);
      }
    }
    col.steps.push_back({Step::kValue, 0, 0, {}});
    col.spec.max_def = def;
    col.spec.max_rep = rep;
    switch (col.spec.physical) {
      case pq::kBoolean: case pq::kInt32: case pq::kInt64: case pq::kFloat: case pq::kDouble: break;
      case pq::kByteArray:
        col.utf8 = leaf.converted_type == kConvertedUtf8 || leaf.converted_type == kConvertedJson ||
                   leaf.converted_type == kConvertedEnum || leaf.logical == kLogicalString || leaf.logical == kLogicalJson ||
                   leaf.logical == kLogicalEnum;
        if (!col.utf8) bad(col.name, "BYTE_ARRAY without a STRING annotation (binary data) is not read");
        break;
      default: bad(col.name, fmt::format("type {} is not read", pq::physical_type_name(col.spec.physical)));
    }
    if (tree_[chain.back()].leaf != static_cast<int64_t>(columns.size())) bad(col.name, "leaves out of order");
    columns.push_back(std::move(col));
  }

  const pq::ParquetFile& f_;
  std::string path_;
  std::vector<pq::SchemaNode> tree_;
};

// PLAIN values of one column: `count` of them from [d, d + size).
void decode_plain(const Column& col, const uint8_t* d, size_t size, size_t count, std::vector<Json>* out,
                  const std::string& where) {
  auto short_page = [&](size_t need) {
    throw InputError(fmt::format("{}: {} PLAIN values need {} bytes, the page has {}", where, count, need, size));
  };
  out->resize(count);
  switch (col.spec.physical) {
    case pq::kBoolean:
      if ((count + 7) / 8 > size) short_page((count + 7) / 8);
      for (size_t i = 0; i < count; ++i) (*out)[i] = static_cast<bool>((d[i / 8] >> (i % 8)) & 1);
      return;
    case pq::kInt32: case pq::kFloat: {
      if (count > size / 4) short_page(count * 4);
      for (size_t i = 0; i < count; ++i) {
        if (col.spec.physical == pq::kInt32) {
          int32_t v;
          std::memcpy(&v, d + 4 * i, 4);
          (*out)[i] = v;
        } else {
          float v;
          std::memcpy(&v, d + 4 * i, 4);
          (*out)[i] = v;
        }
      }
      return;
    }
    case pq::kInt64: case pq::kDouble: {
      if (count > size / 8) short_page(count * 8);
      for (size_t i = 0; i < count; ++i) {
        if (col.spec.physical == pq::kInt64) {
          int64_t v;
          std::memcpy(&v, d + 8 * i, 8);
          (*out)[i] = v;
        } else {
          double v;
          std::memcpy(&v, d + 8 * i, 8);
          (*out)[i] = v;
        }
      }
      return;
    }
    default: {  // BYTE_ARRAY: a 4-byte length, then the bytes
      size_t pos = 0;
      for (size_t i = 0; i < count; ++i) {
        uint32_t len;
        if (size - pos < 4) short_page(pos + 4);
        std::memcpy(&len, d + pos, 4);
        pos += 4;
        if (len > size - pos)
          throw InputError(fmt::format("{}: string {} of {} bytes runs past the page ({} bytes left)", where, i, len, size - pos));
        (*out)[i] = std::string(reinterpret_cast<const char*>(d + pos), len);
        pos += len;
      }
      return;
    }
  }
}

// Replays one column chunk's triples into the row group's rows.
class ColumnAssembler {
 public:
  ColumnAssembler(const Column& col, std::vector<Json>* rows, int64_t first_row) : col_(col), rows_(*rows), first_row_(first_row) {
    index_.assign(static_cast<size_t>(col.spec.max_rep) + 1, 0);
  }

  void page(const pq::DataPage& p, const std::vector<Json>& values) {
    size_t vi = 0;
    for (size_t i = 0; i < p.num_levels; ++i) triple(p.rep[i], p.def[i], values, &vi, p.where);
  }
  int64_t rows_seen() const { return row_ + 1; }

 private:
  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw InputError(fmt::format("{}: row {}: {}", where, first_row_ + row_, what));
  }

  void triple(int r, int d, const std::vector<Json>& values, size_t* vi, const std::string& where) {
    if (r == 0) {
      if (++row_ >= static_cast<int64_t>(rows_.size()))
        throw InputError(fmt::format("{}: more rows than the row group's {}", where, rows_.size()));
    } else if (row_ < 0) {
      throw InputError(fmt::format("{}: the column chunk starts inside a row (repetition level {})", where, r));
    }
    Json* slot = &rows_[static_cast<size_t>(row_)];
    bool reached_rep = r == 0;
    for (const Step& s : col_.steps) {
      switch (s.kind) {
        case Step::kKey:
          if (slot->is_null()) *slot = Json::object();
          else if (!slot->is_object()) fail(where, "the columns disagree on the row's structure");
          slot = &(*slot)[s.key];
          break;
        case Step::kNull:
          if (d < s.level) {
            if (!slot->is_null()) fail(where, "the columns disagree on which values are null");
            goto done;
          }
          break;
        case Step::kArray:
          if (slot->is_null()) *slot = Json::array();
          else if (!slot->is_array()) fail(where, "the columns disagree on the row's structure");
          break;
        case Step::kRepeat: {
          if (d < s.level) goto done;  // an empty list
          size_t& k = index_[static_cast<size_t>(s.rep)];
          if (s.rep == r) ++k, reached_rep = true;
          else if (s.rep > r) k = 0;
          else if (k >= slot->size()) fail(where, fmt::format("repetition level {} continues a list that has no element", r));
          if (k > slot->size()) fail(where, fmt::format("list element {} follows only {} elements", k, slot->size()));
          if (k == slot->size()) slot->push_back(nullptr);
          slot = &(*slot)[k];
          break;
        }
        case Step::kValue: {
          if (*vi >= values.size()) fail(where, "more defined levels than values in the page");
          const Json& v = values[(*vi)++];
          if (col_.utf8) {
            const auto& str = v.get_ref<const std::string&>();
            if (!valid_utf8(reinterpret_cast<const uint8_t*>(str.data()), str.size())) fail(where, "a string that is not valid UTF-8");
          }
          if (!slot->is_null()) fail(where, "two values for one place (the columns disagree on the row's structure)");
          *slot = v;
          break;
        }
      }
    }
  done:
    if (!reached_rep) fail(where, fmt::format("repetition level {} inside a value that is null or an empty list", r));
  }

  const Column& col_;
  std::vector<Json>& rows_;
  int64_t first_row_;
  int64_t row_ = -1;
  std::vector<size_t> index_;  // per repetition level: the element being filled
};

}  // namespace

struct ParquetRowReader::Impl {
  std::string path;
  pq::ParquetFile file;
  std::vector<Column> columns;
  size_t group = 0;            // next row group to read
  std::vector<Json> rows;      // the current row group's rows
  size_t next = 0;             // next of `rows` to hand out
  int64_t group_first_row = 0, returned = -1;

  void read_group() {
    const pq::RowGroup& rg = file.meta.row_groups[group];
    rows.assign(static_cast<size_t>(rg.num_rows), Json::object());
    for (size_t c = 0; c < columns.size(); ++c) {
      const Column& col = columns[c];
      const std::string where = fmt::format("{}: row group {}, column '{}'", path, group, col.name);
      pq::ColumnPages pages(file, rg.columns[c], col.spec, where);
      ColumnAssembler assembler(col, &rows, group_first_row);
      pq::DataPage page;
      std::vector<Json> dict, values;
      std::vector<uint32_t> index;
      bool dict_read = false;
      while (pages.next(&page)) {
        if (pages.has_dictionary() && !dict_read) {
          decode_plain(col, pages.dictionary_data(), pages.dictionary_size(), pages.dictionary_count(), &dict,
                       page.where + ": dictionary page");
          dict_read = true;
        }
        if (page.num_values == 0) {  // all null or empty: writers may leave out an empty dictionary
          values.clear();
        } else if (page.encoding == pq::kPlain) {
          decode_plain(col, page.values, page.values_size, page.num_values, &values, page.where);
        } else if (page.encoding == pq::kRleDictionary || page.encoding == pq::kPlainDictionary) {
          if (!dict_read) throw InputError(fmt::format("{}: dictionary-encoded page without a dictionary page", page.where));
          pq::decode_dictionary_indices(page, dict.size(), &index);
          values.resize(index.size());
          for (size_t i = 0; i < index.size(); ++i) values[i] = dict[index[i]];
        } else {
          throw InputError(fmt::format("{}: value encoding {} is not supported (PLAIN or RLE_DICTIONARY)", page.where,
                                       pq::encoding_name(page.encoding)));
        }
        assembler.page(page, values);
      }
      if (assembler.rows_seen() != rg.num_rows)
        throw InputError(fmt::format("{}: holds {} rows, the row group says {}", where, assembler.rows_seen(), rg.num_rows));
    }
    ++group;
    next = 0;
  }
};

ParquetRowReader::ParquetRowReader(const std::string& path) : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  impl_->file = pq::open_parquet_file(path, kWhat);
  impl_->columns = Schema(impl_->file, path).columns;
}

ParquetRowReader::~ParquetRowReader() = default;

bool ParquetRowReader::next_row(nlohmann::ordered_json& row) {
  Impl& m = *impl_;
  while (m.next >= m.rows.size()) {
    m.group_first_row += static_cast<int64_t>(m.rows.size());
    m.rows.clear();
    m.next = 0;
    if (m.group >= m.file.meta.row_groups.size()) return false;
    m.read_group();
  }
  row = std::move(m.rows[m.next++]);
  m.returned = m.group_first_row + static_cast<int64_t>(m.next) - 1;
  return true;
}

int64_t ParquetRowReader::num_rows() const { return impl_->file.meta.num_rows; }

std::string ParquetRowReader::where() const { return fmt::format("{}: row {}", impl_->path, impl_->returned); }

}  // namespace nemotron::io
