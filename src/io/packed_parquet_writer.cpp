// Writes packed SFT shards as the Arrow schema pyarrow gives Nemotron's writer: three nullable
// list columns in the 3-level LIST layout (<name> optional group (LIST) / list repeated group /
// element optional INT32), loss_mask's element annotated INT(8, unsigned) so it reads back as
// uint8. One data page v1 per ~1 MiB of values, cut at row boundaries; levels RLE, values PLAIN;
// pages zstd-compressed or not. Rows are buffered one row group at a time.
#include <bit>
#include <cstring>

#include "core/error.h"
#include "core/version.h"
#include "io/mapped_file.h"
#include "io/packed_parquet.h"
#include "io/packed_parquet_format.h"

namespace nemotron::io {

namespace pq = parquet;

namespace {

static_assert(std::endian::native == std::endian::little, "Parquet PLAIN values are little-endian");

constexpr size_t kTargetPageValueBytes = 1 << 20;  // Arrow's default data page size
constexpr int32_t kMaxDef = 3;                     // optional list, repeated group, optional element
const char kMagic[4] = {'P', 'A', 'R', '1'};

void put_u32(std::string* s, uint32_t v) {
  char b[4];
  std::memcpy(b, &v, 4);
  s->append(b, 4);
}

std::vector<pq::SchemaElement> packed_schema() {
  std::vector<pq::SchemaElement> s;
  pq::SchemaElement root;
  root.name = "schema";
  root.num_children = 3;
  s.push_back(root);
  for (const char* name : kPackedParquetColumns) {
    pq::SchemaElement list;
    list.name = name;
    list.repetition = pq::kOptional;
    list.num_children = 1;
    list.converted_type = pq::kConvertedList;
    list.logical = pq::kLogicalList;
    pq::SchemaElement repeated;
    repeated.name = "list";
    repeated.repetition = pq::kRepeated;
    repeated.num_children = 1;
    pq::SchemaElement element;
    element.name = "element";
    element.type = pq::kInt32;
    element.repetition = pq::kOptional;
    if (std::string(name) == "loss_mask") {
      element.converted_type = pq::kConvertedUint8;
      element.logical = pq::kLogicalInteger;
      element.int_bit_width = 8;
      element.int_signed = false;
    }
    s.push_back(list);
    s.push_back(repeated);
    s.push_back(element);
  }
  return s;
}

// One column of the row group being filled: the rows' values back to back and each row's length.
struct ColumnBuffer {
  std::vector<int32_t> values;  // loss_mask widened to int32: its physical type is INT32
  std::vector<uint32_t> lengths;
  void clear() {
    values.clear();
    lengths.clear();
  }
};

}  // namespace

struct PackedParquetWriter::Impl {
  std::string path;
  PackedParquetOptions opts;
  AtomicFileWriter file;
  ColumnBuffer columns[3];
  int64_t rows_in_group = 0;
  int64_t rows_written = 0;
  pq::FileMetaData meta;
  bool closed = false;

  Impl(const std::string& p, PackedParquetOptions o) : path(p), opts(o), file(p) {}

  void write(const std::string& bytes) { file.write(bytes.data(), bytes.size()); }

  // Encodes rows [row, row_end) of column `c` as one data page v1 and writes it.
  void write_page(const ColumnBuffer& col, size_t row, size_t row_end, size_t value_begin, size_t value_end,
                  int64_t* num_levels, int64_t* uncompressed_total, int64_t* compressed_total) {
    pq::RleRunEncoder rep(1), def(pq::bit_width_of(kMaxDef));
    int64_t levels = 0;
    for (size_t r = row; r < row_end; ++r) {
      const uint32_t n = col.lengths[r];
      rep.add(0, 1);
      if (n == 0) {  // an empty list: defined up to the outer group only
        def.add(kMaxDef - 2, 1);
        levels += 1;
      } else {
        rep.add(1, n - 1);
        def.add(kMaxDef, n);
        levels += n;
      }
    }
    const std::string& rep_bytes = rep.finish();
    const std::string& def_bytes = def.finish();
    const size_t value_bytes = (value_end - value_begin) * sizeof(int32_t);
    const size_t body_size = 8 + rep_bytes.size() + def_bytes.size() + value_bytes;
    if (body_size > static_cast<size_t>(INT32_MAX) || levels > INT32_MAX)
      throw InputError(fmt::format("{}: a packed row too large for one Parquet page ({} bytes)", path, body_size));
    std::string body;
    body.reserve(body_size);
    put_u32(&body, static_cast<uint32_t>(rep_bytes.size()));
    body += rep_bytes;
    put_u32(&body, static_cast<uint32_t>(def_bytes.size()));
    body += def_bytes;
    body.append(reinterpret_cast<const char*>(col.values.data() + value_begin), value_bytes);
    if (opts.zstd) body = pq::zstd_compress(reinterpret_cast<const uint8_t*>(body.data()), body.size());

    pq::PageHeader h;
    h.type = pq::kDataPage;
    h.uncompressed_page_size = static_cast<int32_t>(body_size);
    h.compressed_page_size = static_cast<int32_t>(body.size());
    h.num_values = static_cast<int32_t>(levels);
    h.encoding = pq::kPlain;
    const std::string header = pq::encode_page_header(h);
    write(header);
    write(body);
    *num_levels += levels;
    *uncompressed_total += static_cast<int64_t>(header.size() + body_size);
    *compressed_total += static_cast<int64_t>(header.size() + body.size());
  }

  pq::ColumnChunk write_column(int c) {
    const ColumnBuffer& col = columns[c];
    pq::ColumnMetaData m;
    m.type = pq::kInt32;
    m.encodings = {pq::kPlain, pq::kRle};
    m.path_in_schema = {kPackedParquetColumns[c], "list", "element"};
    m.codec = opts.zstd ? pq::kZstd : pq::kUncompressed;
    m.data_page_offset = static_cast<int64_t>(file.bytes_written());
    size_t row = 0, value = 0;
    while (row < col.lengths.size()) {
      size_t row_end = row, value_end = value;
      do {
        value_end += col.lengths[row_end++];
      } while (row_end < col.lengths.size() && (value_end - value) * sizeof(int32_t) < kTargetPageValueBytes);
      write_page(col, row, row_end, value, value_end, &m.num_values, &m.total_uncompressed_size,
                 &m.total_compressed_size);
      row = row_end, value = value_end;
    }
    pq::ColumnChunk chunk;
    chunk.file_offset = m.data_page_offset;
    chunk.meta_data = std::move(m);
    return chunk;
  }

  void flush_row_group() {
    if (rows_in_group == 0) return;
    pq::RowGroup g;
    g.num_rows = rows_in_group;
    for (int c = 0; c < 3; ++c) {
      g.columns.push_back(write_column(c));
      g.total_byte_size += g.columns.back().meta_data->total_uncompressed_size;
      columns[c].clear();
    }
    meta.row_groups.push_back(std::move(g));
    rows_in_group = 0;
  }
};

PackedParquetWriter::PackedParquetWriter(const std::string& path, PackedParquetOptions opts) {
  if (opts.rows_per_row_group < 1)
    throw InputError(fmt::format("{}: rows_per_row_group must be at least 1, got {}", path, opts.rows_per_row_group));
  impl_ = std::make_unique<Impl>(path, opts);
  impl_->file.write(kMagic, 4);
}

PackedParquetWriter::~PackedParquetWriter() = default;  // an unclosed writer's AtomicFileWriter removes the temp

void PackedParquetWriter::add(const PackedRow& row) {
  Impl& w = *impl_;
  NM_CHECK(!w.closed, "add() after close() of {}", w.path);
  validate_packed_row(row, w.path, w.rows_written);
  auto push = [](ColumnBuffer& col, const auto& v) {
    col.values.insert(col.values.end(), v.begin(), v.end());
    col.lengths.push_back(static_cast<uint32_t>(v.size()));
  };
  push(w.columns[0], row.input_ids);
  push(w.columns[1], row.loss_mask);
  push(w.columns[2], row.seq_start_id);
  ++w.rows_written;
  if (++w.rows_in_group == w.opts.rows_per_row_group) w.flush_row_group();
}

void PackedParquetWriter::close() {
  Impl& w = *impl_;
  NM_CHECK(!w.closed, "close() twice on {}", w.path);
  w.flush_row_group();
  w.meta.version = 1;
  w.meta.schema = packed_schema();
  w.meta.num_rows = w.rows_written;
  w.meta.created_by = "nemotron-cpp version " NEMOTRON_VERSION;
  std::string footer = pq::encode_file_metadata(w.meta);
  put_u32(&footer, static_cast<uint32_t>(footer.size()));
  footer.append(kMagic, 4);
  w.write(footer);
  w.file.commit();
  w.closed = true;
}

int64_t PackedParquetWriter::rows_written() const { return impl_->rows_written; }

}  // namespace nemotron::io
