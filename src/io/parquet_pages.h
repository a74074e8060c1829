// What every reader of Parquet columns shares: opening a file (magic, footer, row counts) and
// walking one column chunk's pages down to decoded repetition/definition levels and the bytes of
// its values (decompressed; dictionary pages kept aside). The packed-shard reader and the nested
// chat-row reader decode values and assemble rows their own way on top of it. Strict: every
// offset and length is checked against the file before use; errors are InputErrors naming the
// file, row group and column (and the page's byte offset).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/mapped_file.h"
#include "io/packed_parquet_format.h"

namespace nemotron::io::parquet {

struct ParquetFile {
  std::shared_ptr<const MappedFile> file;
  FileMetaData meta;
  size_t data_end = 0;  // first byte of the footer: column chunks lie in [4, data_end)
};

// Maps `path` and decodes its footer; checks both magics, the footer length and that the row
// groups' rows add up to the footer's. Errors read "<path>: invalid <what>: ...".
ParquetFile open_parquet_file(const std::string& path, const std::string& what);

// The flattened schema as a tree: node 0 is the root, each node's children in file order, and
// each leaf's index among the leaves (= its column chunk in every row group). Walked without
// recursion (its depth is whatever the file says); InputError "<path>: invalid <what>: ..." when
// the child counts do not add up or a row group's chunk count differs from the leaf count.
struct SchemaNode {
  size_t element = 0;  // index in meta.schema
  std::vector<size_t> children;
  int64_t leaf = -1;  // -1 for groups
};
std::vector<SchemaNode> schema_tree(const ParquetFile& f, const std::string& path, const std::string& what);

// The leaf column a chunk must hold, as the schema declares it.
struct LeafColumn {
  int32_t physical = kInt32;
  std::vector<std::string> path;  // path_in_schema
  int max_rep = 0, max_def = 0;
};

// One data page, decoded down to its levels and value bytes. The pointers stay valid until the
// next call to ColumnPages::next.
struct DataPage {
  int32_t encoding = kPlain;
  size_t num_levels = 0;
  const uint8_t* rep = nullptr;  // num_levels repetition levels (all 0 when max_rep is 0)
  const uint8_t* def = nullptr;  // num_levels definition levels
  const uint8_t* values = nullptr;
  size_t values_size = 0;
  size_t num_values = 0;  // levels equal to max_def: the values the page holds
  std::string where;      // "<file>: row group G, column 'c', page at byte B"
};

class ColumnPages {
 public:
  // `where` names the chunk in errors ("<file>: row group G, column 'c'"). Checks the chunk's
  // metadata (type, path, bounds) against `col` first.
  ColumnPages(const ParquetFile& f, const ColumnChunk& chunk, const LeafColumn& col, std::string where);
  // The next data page; false once the chunk's num_values levels have all been read. Index pages
  // are skipped; a dictionary page (at most one, before the data) is kept for dictionary().
  bool next(DataPage* page);

  bool has_dictionary() const { return dict_ != nullptr; }
  // The decompressed dictionary page: dictionary_count() PLAIN values in dictionary_size() bytes.
  const uint8_t* dictionary_data() const { return dict_; }
  size_t dictionary_size() const { return dict_size_; }
  size_t dictionary_count() const { return dict_count_; }
  const std::string& where() const { return where_; }
  [[noreturn]] void fail(const std::string& what) const;

 private:
  size_t read_levels_v1(const uint8_t* d, size_t size, int32_t encoding, int max_level, size_t count, uint8_t* out,
                        const std::string& where, const char* what);

  const ParquetFile& f_;
  LeafColumn col_;
  std::string where_;
  int32_t codec_ = 0;
  size_t pos_ = 0, end_ = 0;
  int64_t num_values_ = 0, levels_seen_ = 0;
  bool data_seen_ = false;
  const uint8_t* dict_ = nullptr;
  size_t dict_size_ = 0, dict_count_ = 0;
  std::vector<uint8_t> scratch_, dict_scratch_, rep_, def_;
};

// Dictionary indices of a dictionary-encoded page (a bit-width byte, then the RLE/bit-packed
// hybrid), each checked below `dict_count`.
void decode_dictionary_indices(const DataPage& page, size_t dict_count, std::vector<uint32_t>* out);

}  // namespace nemotron::io::parquet
