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
#include "io/packed_parquet.h"
#include "io/packed_parquet_format.h"
#include "io/parquet_pages.h"

namespace nemotron::io {

namespace pq = parquet;

namespace {

constexpr const char* kWhat = "packed Parquet shard";

// One list column as the schema declares it.
struct ListColumn {
  std::string name;
  size_t leaf = 0;  // index among the schema's leaves = index in each row group's columns
  pq::LeafColumn spec;
  int empty_def = 0;  // definition level of an empty (defined, zero-length) list
};

struct Footer {
  pq::ParquetFile pf;
  ListColumn columns[3];
};

[[noreturn]] void bad_file(const std::string& path, const std::string& what) {
  throw InputError(fmt::format("{}: invalid {}: {}", path, kWhat, what));
}

// Finds the three list columns among the schema's top-level fields.
void resolve_schema(Footer* f, const std::string& path) {
  const std::vector<pq::SchemaNode> tree = pq::schema_tree(f->pf, path, kWhat);
  const auto& s = f->pf.meta.schema;
  for (int c = 0; c < 3; ++c) {
    const std::string name = kPackedParquetColumns[c];
    const pq::SchemaNode* top = nullptr;
    for (size_t t : tree[0].children)
      if (s[tree[t].element].name == name) top = &tree[t];
    if (!top) bad_file(path, fmt::format("no column '{}' (a packed shard has input_ids, loss_mask and seq_start_id)", name));
    auto not_list = [&](const std::string& why) {
      bad_file(path, fmt::format("column '{}' is not a list of integers in the 3-level LIST layout: {}", name, why));
    };
    const pq::SchemaElement& outer = s[top->element];
    if (outer.type) not_list("it is a primitive column");
    if (!(outer.converted_type == pq::kConvertedList || outer.logical == pq::kLogicalList)) not_list("no LIST annotation");
    if (outer.repetition == pq::kRepeated) not_list("the list field itself is repeated (legacy 2-level lists are not read)");
    if (top->children.size() != 1) not_list("the list group must have one child");
    const pq::SchemaNode& rep_node = tree[top->children[0]];
    const pq::SchemaElement& rep = s[rep_node.element];
    if (rep.type || rep.repetition != pq::kRepeated || rep_node.children.size() != 1)
      not_list("the list group's child must be a repeated group of one field");
    const pq::SchemaNode& elem_node = tree[rep_node.children[0]];
    const pq::SchemaElement& elem = s[elem_node.element];
    if (!elem.type) not_list("the list element is a group (nested lists are not read)");
    if (elem.repetition == pq::kRepeated) not_list("the list element is repeated");
    if (*elem.type != pq::kInt32 && *elem.type != pq::kInt64)
      not_list(fmt::format("element type {}, expected INT32 or INT64", pq::physical_type_name(*elem.type)));
    ListColumn& col = f->columns[c];
    col.name = name;
    col.leaf = static_cast<size_t>(elem_node.leaf);
    col.spec.physical = *elem.type;
    col.spec.path = {outer.name, rep.name, elem.name};
    const bool outer_optional = outer.repetition.value_or(pq::kRequired) == pq::kOptional;
    const bool element_optional = elem.repetition.value_or(pq::kRequired) == pq::kOptional;
    col.empty_def = outer_optional ? 1 : 0;
    col.spec.max_def = col.empty_def + 1 + (element_optional ? 1 : 0);
    col.spec.max_rep = 1;
  }
}

Footer open_footer(const std::string& path) {
  Footer f;
  f.pf = pq::open_parquet_file(path, kWhat);
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
    pq::ColumnPages pages(f_.pf, chunk, col_.spec, where_);
    pq::DataPage page;
    bool dict_read = false;
    while (pages.next(&page)) {
      if (pages.has_dictionary() && !dict_read) {
        read_dictionary(pages, page.where);
        dict_read = true;
      }
      decode_values(page, dict_read);
      assemble(member, page);
    }
    const int64_t got = row_ + 1;
    if (got != group_rows) throw InputError(fmt::format("{}: holds {} rows, the row group says {}", where_, got, group_rows));
  }

 private:
  [[noreturn]] void fail_at(const std::string& where, const std::string& what) const {
    throw InputError(fmt::format("{}: {}", where, what));
  }

  size_t value_width() const { return col_.spec.physical == pq::kInt64 ? 8 : 4; }

  int64_t plain_value(const uint8_t* p) const {
    if (col_.spec.physical == pq::kInt64) {
      int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }

  void read_dictionary(const pq::ColumnPages& pages, const std::string& where) {
    const size_t n = pages.dictionary_count();
    if (n > pages.dictionary_size() / value_width())
      fail_at(where, fmt::format("dictionary of {} values in {} bytes", n, pages.dictionary_size()));
    dict_.resize(n);
    for (size_t i = 0; i < n; ++i) dict_[i] = plain_value(pages.dictionary_data() + i * value_width());
  }

  void decode_values(const pq::DataPage& page, bool has_dict) {
    const size_t count = page.num_values;
    values_.resize(count);
    if (page.encoding == pq::kPlain) {
      if (count > page.values_size / value_width())
        fail_at(page.where, fmt::format("{} PLAIN values need {} bytes, the page has {}", count, count * value_width(), page.values_size));
      if (col_.spec.physical == pq::kInt32) {
        for (size_t i = 0; i < count; ++i) values_[i] = plain_value(page.values + 4 * i);
      } else {
        std::memcpy(values_.data(), page.values, count * 8);
      }
      return;
    }
    if (page.encoding == pq::kRleDictionary || page.encoding == pq::kPlainDictionary) {
      if (!has_dict) fail_at(page.where, "dictionary-encoded page without a dictionary page");
      pq::decode_dictionary_indices(page, dict_.size(), &index_);
      for (size_t i = 0; i < count; ++i) values_[i] = dict_[index_[i]];
      return;
    }
    fail_at(page.where, fmt::format("value encoding {} is not supported (PLAIN or RLE_DICTIONARY)", pq::encoding_name(page.encoding)));
  }

  // Walks the levels: repetition 0 starts a row, definition max_def carries a value. The values
  // of one row within the page are appended as one run.
  template <class T>
  void assemble(std::vector<T> PackedRow::*member, const pq::DataPage& page) {
    const std::string& where = page.where;
    const int max_def = col_.spec.max_def;
    std::vector<PackedRow>& rows = *rows_;
    const size_t n = page.num_levels;
    const uint8_t* rep = page.rep;
    const uint8_t* defs = page.def;
    size_t vi = 0;
    std::vector<T>* cur = row_ >= 0 ? &(rows[first_row_ + static_cast<size_t>(row_)].*member) : nullptr;
    for (size_t i = 0; i < n;) {
      const int def = defs[i];
      if (rep[i] == 0) {
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
      if (def != max_def) fail_at(where, fmt::format("row {} has a null element", row_));
      size_t j = i + 1;
      while (j < n && rep[j] == 1 && defs[j] == max_def) ++j;
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
  std::vector<int64_t> values_, dict_;
  std::vector<uint32_t> index_;
};

}  // namespace

std::vector<PackedRow> read_packed_parquet(const std::string& path) {
  const Footer f = open_footer(path);
  std::vector<PackedRow> rows;
  for (size_t g = 0; g < f.pf.meta.row_groups.size(); ++g) {
    const pq::RowGroup& rg = f.pf.meta.row_groups[g];
    const size_t first = rows.size();
    ChunkReader(f, f.columns[0], g, path).read(rg.columns[f.columns[0].leaf], rg.num_rows, &rows, first, &PackedRow::input_ids, true);
    ChunkReader(f, f.columns[1], g, path).read(rg.columns[f.columns[1].leaf], rg.num_rows, &rows, first, &PackedRow::loss_mask, false);
    ChunkReader(f, f.columns[2], g, path).read(rg.columns[f.columns[2].leaf], rg.num_rows, &rows, first, &PackedRow::seq_start_id, false);
  }
  for (size_t r = 0; r < rows.size(); ++r) validate_packed_row(rows[r], path, static_cast<int64_t>(r));
  return rows;
}

int64_t packed_parquet_num_rows(const std::string& path) { return open_footer(path).pf.meta.num_rows; }

}  // namespace nemotron::io
