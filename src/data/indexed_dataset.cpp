#include "data/indexed_dataset.h"

#include <limits>

#include "core/error.h"

namespace nemotron::data {

namespace {

std::string hex_bytes(const unsigned char* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += fmt::format("{}{:02x}", i ? " " : "", p[i]);
  return s;
}

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw InputError(fmt::format("{}: {}", file, what));
}

}  // namespace

IndexedDataset IndexedDataset::open(const std::string& prefix) {
  IndexedDataset ds;
  ds.prefix_ = prefix;
  const std::string ipath = idx_path(prefix), bpath = bin_path(prefix);
  ds.idx_ = io::MappedFile::open(ipath);
  ds.bin_ = io::MappedFile::open(bpath);
  const unsigned char* p = ds.idx_->data();
  const size_t size = ds.idx_->size();

  if (size < kIdxHeaderBytes)
    fail(ipath, fmt::format("header: the file has {} bytes, expected at least {} (truncated)", size,
                            kIdxHeaderBytes));
  if (std::memcmp(p, kIdxMagic, sizeof(kIdxMagic)) != 0)
    fail(ipath, fmt::format("magic: expected 4d 4d 49 44 49 44 58 00 00 (\"MMIDIDX\\0\\0\"), got {}",
                            hex_bytes(p, sizeof(kIdxMagic))));
  const uint64_t version = load_le<uint64_t>(p + 9);
  if (version != kIdxVersion) fail(ipath, fmt::format("version: expected {}, got {}", kIdxVersion, version));
  const uint8_t code = p[17];
  auto dtype = token_dtype_from_code(code);
  if (!dtype) fail(ipath, fmt::format("dtype code: expected 1..8, got {}", code));
  if (!is_token_dtype(*dtype))
    fail(ipath, fmt::format("dtype code: {} ({}) cannot hold token ids; expected an integer dtype "
                            "(4 = int32, 8 = uint16, ...)", code, token_dtype_name(*dtype)));
  ds.dtype_ = *dtype;
  const uint64_t seq_count = load_le<uint64_t>(p + 18);
  const uint64_t doc_count = load_le<uint64_t>(p + 26);
  const unsigned __int128 needed =
      static_cast<unsigned __int128>(kIdxHeaderBytes) + static_cast<unsigned __int128>(seq_count) * 12 +
      static_cast<unsigned __int128>(doc_count) * 8;
  if (needed > size) {
    const std::string need = needed > std::numeric_limits<uint64_t>::max()
                                 ? std::string("more than 2^64")
                                 : std::to_string(static_cast<uint64_t>(needed));
    fail(ipath, fmt::format("sequence_count {} and document_count {} need {} bytes, the file has {} "
                            "(truncated, or corrupt counts)", seq_count, doc_count, need, size));
  }
  if (doc_count == 0) fail(ipath, "document_count: expected at least 1 (the leading 0 of document_indices), got 0");
  ds.num_sequences_ = static_cast<int64_t>(seq_count);
  ds.num_document_indices_ = static_cast<int64_t>(doc_count);
  ds.lengths_at_ = kIdxHeaderBytes;
  ds.pointers_at_ = ds.lengths_at_ + 4 * seq_count;
  ds.doc_indices_at_ = ds.pointers_at_ + 8 * seq_count;

  // Lengths and pointers: every sequence must lie inside `.bin`, after the previous one.
  const int64_t item = static_cast<int64_t>(token_dtype_size(ds.dtype_));
  const int64_t bin_size = static_cast<int64_t>(ds.bin_->size());
  int64_t prev_end = 0, tokens = 0;
  for (int64_t i = 0; i < ds.num_sequences_; ++i) {
    const int32_t len = load_le<int32_t>(p + ds.lengths_at_ + 4 * i);
    const int64_t ptr = load_le<int64_t>(p + ds.pointers_at_ + 8 * i);
    if (len < 0) fail(ipath, fmt::format("sequence_lengths[{}]: expected >= 0, got {}", i, len));
    if (i == 0 && ptr < 0) fail(ipath, fmt::format("sequence_pointers[0]: expected >= 0, got {}", ptr));
    if (ptr < prev_end)
      fail(ipath, fmt::format("sequence_pointers[{}]: expected >= {} (the end of sequence {}), got {} "
                              "(pointers must increase and sequences must not overlap)",
                              i, prev_end, i - 1, ptr));
    if (ptr > bin_size || static_cast<int64_t>(len) * item > bin_size - ptr)
      fail(bpath, fmt::format("the file has {} bytes, but sequence {} (sequence_pointers[{}] = {}, "
                              "length {} x {} bytes) ends at byte {} (.bin truncated?)",
                              bin_size, i, i, ptr, len, item, ptr + static_cast<int64_t>(len) * item));
    prev_end = ptr + static_cast<int64_t>(len) * item;
    tokens += len;
  }
  ds.num_tokens_ = tokens;

  // Document indices: CSR offsets over sequences, 0 first, non-decreasing, sequence_count last.
  int64_t prev = 0;
  for (int64_t k = 0; k < ds.num_document_indices_; ++k) {
    const int64_t v = load_le<int64_t>(p + ds.doc_indices_at_ + 8 * k);
    if (k == 0 && v != 0) fail(ipath, fmt::format("document_indices[0]: expected 0, got {}", v));
    if (v < prev)
      fail(ipath, fmt::format("document_indices[{}]: expected >= {} (non-decreasing), got {}", k, prev, v));
    if (v > ds.num_sequences_)
      fail(ipath, fmt::format("document_indices[{}]: expected <= {} (sequence_count), got {}", k,
                              ds.num_sequences_, v));
    prev = v;
  }
  if (prev != ds.num_sequences_)
    fail(ipath, fmt::format("document_indices[{}]: expected {} (= sequence_count), got {}",
                            ds.num_document_indices_ - 1, ds.num_sequences_, prev));
  return ds;
}

int64_t IndexedDataset::sequence_length(int64_t i) const {
  NM_CHECK(i >= 0 && i < num_sequences_, "sequence {} of {}", i, num_sequences_);
  return load_le<int32_t>(idx_->data() + lengths_at_ + 4 * i);
}

int64_t IndexedDataset::sequence_pointer(int64_t i) const {
  NM_CHECK(i >= 0 && i < num_sequences_, "sequence {} of {}", i, num_sequences_);
  return load_le<int64_t>(idx_->data() + pointers_at_ + 8 * i);
}

int64_t IndexedDataset::document_index(int64_t k) const {
  NM_CHECK(k >= 0 && k < num_document_indices_, "document index {} of {}", k, num_document_indices_);
  return load_le<int64_t>(idx_->data() + doc_indices_at_ + 8 * k);
}

std::vector<int32_t> IndexedDataset::sequence_lengths() const {
  std::vector<int32_t> v(static_cast<size_t>(num_sequences_));
  if (!v.empty()) std::memcpy(v.data(), idx_->data() + lengths_at_, 4 * v.size());
  return v;
}

std::vector<int64_t> IndexedDataset::document_indices() const {
  std::vector<int64_t> v(static_cast<size_t>(num_document_indices_));
  std::memcpy(v.data(), idx_->data() + doc_indices_at_, 8 * v.size());
  return v;
}

int64_t IndexedDataset::checked_length(int64_t i, int64_t offset, int64_t length) const {
  const int64_t n = sequence_length(i);
  if (length < 0) length = n - offset;
  NM_CHECK(offset >= 0 && offset <= n && length >= 0 && length <= n - offset,
           "read of [{}, {}+{}) from sequence {} of length {} in {}", offset, offset, length, i, n, prefix_);
  return length;
}

const unsigned char* IndexedDataset::token_ptr(int64_t i, int64_t offset) const {
  return bin_->data() + sequence_pointer(i) + offset * static_cast<int64_t>(token_dtype_size(dtype_));
}

void IndexedDataset::get(int64_t i, int64_t offset, int64_t length, int64_t* out) const {
  length = checked_length(i, offset, length);
  if (length > 0) decode_tokens(dtype_, token_ptr(i, offset), length, out);
}

void IndexedDataset::get(int64_t i, int64_t offset, int64_t length, int32_t* out) const {
  length = checked_length(i, offset, length);
  if (length == 0) return;
  const unsigned char* src = token_ptr(i, offset);
  if (dtype_ != TokenDType::i64) return decode_tokens(dtype_, src, length, out);
  for (int64_t j = 0; j < length; ++j) {
    const int64_t v = load_le<int64_t>(src + 8 * j);
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
      fail(bin_path(prefix_), fmt::format("sequence {} token {}: {} does not fit int32", i, offset + j, v));
    out[j] = static_cast<int32_t>(v);
  }
}

std::vector<int32_t> IndexedDataset::get(int64_t i, int64_t offset, int64_t length) const {
  length = checked_length(i, offset, length);
  std::vector<int32_t> v(static_cast<size_t>(length));
  get(i, offset, length, v.data());
  return v;
}

}  // namespace nemotron::data
