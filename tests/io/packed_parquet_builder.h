// Test-only Parquet shard builder that writes what our writer never does but pyarrow may:
// dictionary pages with bit-packed indices, snappy pages, v2 pages, pages that cut a row in two,
// INT64 values, non-nullable lists, extra columns, and deliberately broken shapes (columns of
// different row lengths, nulls). Built on the same format primitives as the writer, so it tests
// the reader's handling of those shapes, not the primitives (the roundtrip tests do that).
#pragma once
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "io/packed_parquet_format.h"
#include "io/thrift_compact.h"

namespace nemotron::io::pqtest {

namespace pq = ::nemotron::io::parquet;

struct ColumnSpec {
  std::string name;
  int32_t physical = pq::kInt32;
  bool outer_optional = true, element_optional = true;
  bool uint8 = false;
  bool plain_leaf = false;  // an extra non-list INT64 column (its rows hold one value each)
};

struct BuildOptions {
  int32_t codec = pq::kUncompressed;
  bool dictionary = false;
  bool v2 = false;
  bool bitpacked_levels = false;
  size_t levels_per_page = SIZE_MAX;  // small values cut rows across pages, as pyarrow's v1 pages may
  size_t rows_per_group = SIZE_MAX;
  std::optional<int64_t> claim_num_rows = std::nullopt;  // a lying footer
};

using Cell = std::optional<std::vector<int64_t>>;  // nullopt = a null list
using ColumnData = std::vector<Cell>;
// An element value of this marks a null element.
constexpr int64_t kNullElement = INT64_MIN;

inline void append_u32(std::string* s, uint32_t v) {
  char b[4];
  std::memcpy(b, &v, 4);
  s->append(b, 4);
}

// Bit-packed run(s) of the hybrid encoding (padded to groups of 8 with zeros).
inline std::string bitpacked(const std::vector<uint32_t>& v, int bw) {
  const size_t groups = (v.size() + 7) / 8;
  std::string out;
  uint64_t h = (groups << 1) | 1;
  while (h >= 0x80) out.push_back(static_cast<char>((h & 0x7f) | 0x80)), h >>= 7;
  out.push_back(static_cast<char>(h));
  std::string bits(groups * static_cast<size_t>(bw), '\0');
  for (size_t i = 0; i < v.size(); ++i)
    for (int b = 0; b < bw; ++b)
      if ((v[i] >> b) & 1) {
        const size_t bit = i * static_cast<size_t>(bw) + static_cast<size_t>(b);
        bits[bit / 8] = static_cast<char>(bits[bit / 8] | (1 << (bit % 8)));
      }
  return out + bits;
}

inline std::string hybrid(const std::vector<uint32_t>& v, int bw, bool packed) {
  if (packed) return bitpacked(v, bw);
  pq::RleRunEncoder e(bw);
  for (uint32_t x : v) e.add(x, 1);
  return e.finish();
}

// A valid raw snappy stream: greedy matches within 300 bytes back, using all three copy forms.
inline std::string snappy_compress(const std::string& in) {
  std::string out;
  uint64_t n = in.size();
  while (n >= 0x80) out.push_back(static_cast<char>((n & 0x7f) | 0x80)), n >>= 7;
  out.push_back(static_cast<char>(n));
  size_t lit_start = 0, p = 0, copies = 0;
  auto flush_literal = [&](size_t end) {
    size_t len = end - lit_start;
    while (len > 0) {
      const size_t take = std::min<size_t>(len, 300);
      if (take <= 60) {
        out.push_back(static_cast<char>((take - 1) << 2));
      } else {
        out.push_back(static_cast<char>(61 << 2));  // 2 length bytes follow
        out.push_back(static_cast<char>((take - 1) & 0xff));
        out.push_back(static_cast<char>((take - 1) >> 8));
      }
      out.append(in, lit_start, take);
      lit_start += take, len -= take;
    }
  };
  while (p < in.size()) {
    size_t best = 0, best_off = 0;
    for (size_t off = 1; off <= std::min<size_t>(p, 300); ++off) {
      size_t l = 0;
      while (p + l < in.size() && l < 64 && in[p + l] == in[p + l - off]) ++l;
      if (l > best) best = l, best_off = off;
    }
    if (best < 4) {
      ++p;
      continue;
    }
    flush_literal(p);
    const int form = static_cast<int>(copies++ % 3);
    if (form == 0 && best_off < 2048) {
      best = std::min<size_t>(best, 11);
      out.push_back(static_cast<char>(1 | ((best - 4) << 2) | ((best_off >> 8) << 5)));
      out.push_back(static_cast<char>(best_off & 0xff));
    } else if (form == 1) {
      out.push_back(static_cast<char>(2 | ((best - 1) << 2)));
      out.push_back(static_cast<char>(best_off & 0xff));
      out.push_back(static_cast<char>(best_off >> 8));
    } else {
      out.push_back(static_cast<char>(3 | ((best - 1) << 2)));
      for (int b = 0; b < 4; ++b) out.push_back(static_cast<char>((best_off >> (8 * b)) & 0xff));
    }
    p += best;
    lit_start = p;
  }
  flush_literal(in.size());
  return out;
}

inline std::string compress(int32_t codec, const std::string& s) {
  if (codec == pq::kZstd) return pq::zstd_compress(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  if (codec == pq::kSnappy) return snappy_compress(s);
  return s;
}

class ShardBuilder {
 public:
  ShardBuilder(std::vector<ColumnSpec> cols, BuildOptions o) : cols_(std::move(cols)), o_(o) {}

  // data[c][row]: the rows of column c (all columns the same number of rows).
  std::string build(const std::vector<ColumnData>& data) {
    out_ = "PAR1";
    pq::FileMetaData meta;
    const size_t rows = data.empty() ? 0 : data[0].size();
    for (size_t r0 = 0; r0 < rows; r0 += std::min(o_.rows_per_group, rows - r0)) {
      const size_t r1 = r0 + std::min(o_.rows_per_group, rows - r0);
      pq::RowGroup g;
      g.num_rows = static_cast<int64_t>(r1 - r0);
      for (size_t c = 0; c < cols_.size(); ++c) {
        g.columns.push_back(chunk(c, data[c], r0, std::min(r1, data[c].size())));
        g.total_byte_size += g.columns.back().meta_data->total_uncompressed_size;
      }
      meta.row_groups.push_back(g);
    }
    meta.num_rows = o_.claim_num_rows.value_or(static_cast<int64_t>(rows));
    meta.schema = schema();
    meta.created_by = "parquet-cpp-arrow version 17.0.0";
    std::string footer = pq::encode_file_metadata(meta);
    out_ += footer;
    append_u32(&out_, static_cast<uint32_t>(footer.size()));
    out_ += "PAR1";
    return out_;
  }

 private:
  std::vector<pq::SchemaElement> schema() const {
    std::vector<pq::SchemaElement> s(1);
    s[0].name = "schema";
    s[0].num_children = static_cast<int32_t>(cols_.size());
    for (const auto& c : cols_) {
      if (c.plain_leaf) {
        pq::SchemaElement e;
        e.name = c.name, e.type = pq::kInt64, e.repetition = pq::kRequired;
        s.push_back(e);
        continue;
      }
      pq::SchemaElement outer, rep, elem;
      outer.name = c.name, outer.repetition = c.outer_optional ? pq::kOptional : pq::kRequired;
      outer.num_children = 1, outer.converted_type = pq::kConvertedList, outer.logical = pq::kLogicalList;
      rep.name = "list", rep.repetition = pq::kRepeated, rep.num_children = 1;
      elem.name = "element", elem.type = c.physical, elem.repetition = c.element_optional ? pq::kOptional : pq::kRequired;
      if (c.uint8) elem.converted_type = pq::kConvertedUint8, elem.logical = pq::kLogicalInteger, elem.int_bit_width = 8, elem.int_signed = false;
      s.push_back(outer), s.push_back(rep), s.push_back(elem);
    }
    return s;
  }

  void put_value(std::string* s, int32_t physical, int64_t v) const {
    if (physical == pq::kInt64) {
      s->append(reinterpret_cast<const char*>(&v), 8);
    } else {
      const auto w = static_cast<int32_t>(v);
      s->append(reinterpret_cast<const char*>(&w), 4);
    }
  }

  void page(int32_t type, const std::string& body_levels, const std::string& body_values, int32_t num_values,
            int32_t num_rows, int32_t encoding, size_t rep_len, size_t def_len, pq::ColumnMetaData* m) {
    pq::PageHeader h;
    h.type = type;
    h.num_values = num_values;
    h.encoding = encoding;
    std::string body;
    size_t uncompressed;
    if (type == pq::kDataPageV2) {
      body = body_levels + compress(o_.codec, body_values);
      uncompressed = body_levels.size() + body_values.size();
      h.v2_num_rows = num_rows;
      h.v2_repetition_levels_byte_length = static_cast<int32_t>(rep_len);
      h.v2_definition_levels_byte_length = static_cast<int32_t>(def_len);
    } else {
      body = compress(o_.codec, body_levels + body_values);
      uncompressed = body_levels.size() + body_values.size();
    }
    h.uncompressed_page_size = static_cast<int32_t>(uncompressed);
    h.compressed_page_size = static_cast<int32_t>(body.size());
    const std::string header = type == pq::kDataPageV2 ? encode_v2_header(h) : pq::encode_page_header(h);
    out_ += header + body;
    m->total_uncompressed_size += static_cast<int64_t>(header.size() + uncompressed);
    m->total_compressed_size += static_cast<int64_t>(header.size() + body.size());
  }

  // Our encoder writes v1 and dictionary headers only; the v2 header is spelled out here.
  static std::string encode_v2_header(const pq::PageHeader& h);

  pq::ColumnChunk chunk(size_t c, const ColumnData& col, size_t r0, size_t r1) {
    const ColumnSpec& spec = cols_[c];
    pq::ColumnMetaData m;
    m.type = spec.plain_leaf ? pq::kInt64 : spec.physical;
    m.path_in_schema = spec.plain_leaf ? std::vector<std::string>{spec.name}
                                       : std::vector<std::string>{spec.name, "list", "element"};
    m.codec = o_.codec;
    m.encodings = {pq::kPlain, pq::kRle};
    const int empty_def = spec.outer_optional ? 1 : 0;
    const int max_def = spec.plain_leaf ? 0 : empty_def + 1 + (spec.element_optional ? 1 : 0);
    const int max_rep = spec.plain_leaf ? 0 : 1;
    std::vector<uint32_t> rep, def;
    std::vector<int64_t> values;
    for (size_t r = r0; r < r1; ++r) {
      const Cell& cell = col[r];
      if (!cell) {
        rep.push_back(0), def.push_back(0);
        continue;
      }
      if (spec.plain_leaf) {
        rep.push_back(0), def.push_back(0), values.push_back(cell->at(0));
        continue;
      }
      if (cell->empty()) rep.push_back(0), def.push_back(static_cast<uint32_t>(empty_def));
      for (size_t i = 0; i < cell->size(); ++i) {
        rep.push_back(i == 0 ? 0 : 1);
        const bool null_elem = (*cell)[i] == kNullElement;
        def.push_back(static_cast<uint32_t>(null_elem ? max_def - 1 : max_def));
        if (!null_elem) values.push_back((*cell)[i]);
      }
    }
    // Dictionary: sorted unique values, PLAIN.
    std::map<int64_t, uint32_t> dict;
    const bool use_dict = o_.dictionary && !spec.plain_leaf;
    if (use_dict) {
      for (int64_t v : values) dict.emplace(v, 0);
      uint32_t k = 0;
      for (auto& [v, idx] : dict) idx = k++;
      std::string body;
      for (const auto& [v, idx] : dict) put_value(&body, m.type, v);
      m.dictionary_page_offset = static_cast<int64_t>(out_.size());
      m.encodings.push_back(pq::kRleDictionary);
      pq::PageHeader h;
      h.type = pq::kDictionaryPage;
      h.num_values = static_cast<int32_t>(dict.size());
      h.encoding = pq::kPlain;
      const std::string compressed = compress(o_.codec, body);
      h.uncompressed_page_size = static_cast<int32_t>(body.size());
      h.compressed_page_size = static_cast<int32_t>(compressed.size());
      const std::string header = pq::encode_page_header(h);
      out_ += header + compressed;
      m.total_uncompressed_size += static_cast<int64_t>(header.size() + body.size());
      m.total_compressed_size += static_cast<int64_t>(header.size() + compressed.size());
    }
    m.data_page_offset = static_cast<int64_t>(out_.size());
    m.num_values = static_cast<int64_t>(rep.size());
    size_t vi = 0;
    for (size_t l0 = 0; l0 < rep.size();) {
      const size_t l1 = std::min(rep.size(), l0 + std::max<size_t>(1, o_.levels_per_page));
      std::vector<uint32_t> prep(rep.begin() + l0, rep.begin() + l1), pdef(def.begin() + l0, def.begin() + l1);
      std::string levels, vals;
      size_t rep_len = 0, def_len = 0;
      const std::string r = max_rep ? hybrid(prep, 1, o_.bitpacked_levels) : "";
      const std::string d = max_def ? hybrid(pdef, pq::bit_width_of(static_cast<uint32_t>(max_def)), o_.bitpacked_levels) : "";
      if (o_.v2) {
        levels = r + d, rep_len = r.size(), def_len = d.size();
      } else {
        if (max_rep) append_u32(&levels, static_cast<uint32_t>(r.size())), levels += r;
        if (max_def) append_u32(&levels, static_cast<uint32_t>(d.size())), levels += d;
      }
      std::vector<uint32_t> idx;
      for (size_t l = l0; l < l1; ++l) {
        if (static_cast<int>(def[l]) != max_def) continue;
        if (use_dict) idx.push_back(dict.at(values[vi]));
        else put_value(&vals, m.type, values[vi]);
        ++vi;
      }
      if (use_dict) {
        const int bw = pq::bit_width_of(static_cast<uint32_t>(std::max<size_t>(dict.size(), 1) - 1));
        vals.push_back(static_cast<char>(bw));
        vals += bitpacked(idx, bw);
      }
      int32_t rows_in_page = 0;
      for (size_t l = l0; l < l1; ++l) rows_in_page += rep[l] == 0;
      page(o_.v2 ? pq::kDataPageV2 : pq::kDataPage, levels, vals, static_cast<int32_t>(l1 - l0), rows_in_page,
           use_dict ? pq::kRleDictionary : pq::kPlain, rep_len, def_len, &m);
      l0 = l1;
    }
    pq::ColumnChunk ch;
    ch.file_offset = m.dictionary_page_offset.value_or(m.data_page_offset);
    ch.meta_data = m;
    return ch;
  }

  std::vector<ColumnSpec> cols_;
  BuildOptions o_;
  std::string out_;
};

inline std::string ShardBuilder::encode_v2_header(const pq::PageHeader& h) {
  thrift::Writer w;
  w.field_i32(1, h.type);
  w.field_i32(2, h.uncompressed_page_size);
  w.field_i32(3, h.compressed_page_size);
  w.begin_struct_field(8);
  w.field_i32(1, h.num_values);
  w.field_i32(2, 0);
  w.field_i32(3, h.v2_num_rows);
  w.field_i32(4, h.encoding);
  w.field_i32(5, h.v2_definition_levels_byte_length);
  w.field_i32(6, h.v2_repetition_levels_byte_length);
  w.field_bool(7, true);
  w.end_struct();
  w.end_message();
  return w.take();
}

}  // namespace nemotron::io::pqtest
