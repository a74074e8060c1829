#include "data/indexed_dataset_builder.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "data/indexed_dataset.h"

namespace nemotron::data {

namespace {

std::string tmp_path(const std::string& path) { return path + ".tmp"; }

void sync_and_close(std::FILE* f, const std::string& path) {
  bool ok = std::fflush(f) == 0 && fsync(fileno(f)) == 0;
  int err = errno;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) throw Error(fmt::format("{}: write failed: {}", path, std::strerror(err ? err : errno)));
}

template <class Stored, class T>
void encode_as(std::span<const T> tokens, unsigned char* out) {
  for (size_t i = 0; i < tokens.size(); ++i) store_le<Stored>(out + i * sizeof(Stored), static_cast<Stored>(tokens[i]));
}

}  // namespace

std::vector<unsigned char> encode_index(TokenDType dtype, std::span<const int32_t> lengths,
                                        std::span<const int64_t> document_indices) {
  const size_t s = lengths.size(), d = document_indices.size();
  std::vector<unsigned char> out(kIdxHeaderBytes + 12 * s + 8 * d);
  unsigned char* p = out.data();
  std::memcpy(p, kIdxMagic, sizeof(kIdxMagic));
  store_le<uint64_t>(p + 9, kIdxVersion);
  p[17] = static_cast<uint8_t>(dtype);
  store_le<uint64_t>(p + 18, s);
  store_le<uint64_t>(p + 26, d);
  unsigned char* lengths_at = p + kIdxHeaderBytes;
  unsigned char* pointers_at = lengths_at + 4 * s;
  unsigned char* docs_at = pointers_at + 8 * s;
  const int64_t item = static_cast<int64_t>(token_dtype_size(dtype));
  int64_t ptr = 0;
  for (size_t i = 0; i < s; ++i) {
    store_le<int32_t>(lengths_at + 4 * i, lengths[i]);
    store_le<int64_t>(pointers_at + 8 * i, ptr);
    ptr += static_cast<int64_t>(lengths[i]) * item;
  }
  for (size_t k = 0; k < d; ++k) store_le<int64_t>(docs_at + 8 * k, document_indices[k]);
  return out;
}

IndexedDatasetBuilder::IndexedDatasetBuilder(std::string prefix, TokenDType dtype)
    : prefix_(std::move(prefix)), dtype_(dtype) {
  if (!is_token_dtype(dtype_))
    throw InputError(fmt::format("{}: dtype {} cannot hold token ids", prefix_, token_dtype_name(dtype_)));
  const std::string path = tmp_path(bin_path(prefix_));
  bin_ = std::fopen(path.c_str(), "wb");
  if (!bin_) throw InputError(fmt::format("{}: cannot create: {}", path, std::strerror(errno)));
  std::setvbuf(bin_, nullptr, _IOFBF, 1 << 20);
}

IndexedDatasetBuilder::~IndexedDatasetBuilder() {
  if (finished_) return;
  if (bin_) std::fclose(bin_);
  std::remove(tmp_path(bin_path(prefix_)).c_str());
  std::remove(tmp_path(idx_path(prefix_)).c_str());
}

void IndexedDatasetBuilder::check_open() const {
  NM_CHECK(!finished_, "{}: the builder was already finalized", prefix_);
}

void IndexedDatasetBuilder::write_bytes(const void* data, size_t n) {
  if (n > 0 && std::fwrite(data, 1, n, bin_) != n)
    throw Error(fmt::format("{}: write failed: {}", tmp_path(bin_path(prefix_)), std::strerror(errno)));
}

template <class T>
void IndexedDatasetBuilder::write_tokens(std::span<const T> tokens) {
  check_open();
  const int64_t lo = token_dtype_min(dtype_), hi = token_dtype_max(dtype_);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int64_t v = tokens[i];
    if (v < lo || v > hi)
      throw InputError(fmt::format(
          "{}: token {} of sequence {} is {}, which {} cannot hold ({}..{}){}", bin_path(prefix_), i,
          lengths_.size(), v, token_dtype_name(dtype_), lo, hi,
          dtype_ == TokenDType::u16 ? "; vocabularies of 65500 or more need int32" : ""));
  }
  encode_buf_.resize(tokens.size() * token_dtype_size(dtype_));
  unsigned char* out = encode_buf_.data();
  switch (dtype_) {
    case TokenDType::u8: encode_as<uint8_t>(tokens, out); break;
    case TokenDType::i8: encode_as<int8_t>(tokens, out); break;
    case TokenDType::i16: encode_as<int16_t>(tokens, out); break;
    case TokenDType::u16: encode_as<uint16_t>(tokens, out); break;
    case TokenDType::i32: encode_as<int32_t>(tokens, out); break;
    case TokenDType::i64: encode_as<int64_t>(tokens, out); break;
    default: NM_CHECK(false, "dtype {}", token_dtype_name(dtype_));
  }
  write_bytes(out, encode_buf_.size());
  num_tokens_ += static_cast<int64_t>(tokens.size());
}

void IndexedDatasetBuilder::push_length(int64_t n) {
  if (n > std::numeric_limits<int32_t>::max())
    throw InputError(fmt::format("{}: sequence {} has {} tokens; the format stores lengths as int32",
                                 prefix_, lengths_.size(), n));
  lengths_.push_back(static_cast<int32_t>(n));
}

void IndexedDatasetBuilder::add_item(std::span<const int32_t> tokens) {
  write_tokens(tokens);
  push_length(static_cast<int64_t>(tokens.size()));
}

void IndexedDatasetBuilder::add_item(std::span<const int64_t> tokens) {
  write_tokens(tokens);
  push_length(static_cast<int64_t>(tokens.size()));
}

void IndexedDatasetBuilder::end_document() {
  check_open();
  document_indices_.push_back(num_sequences());
}

void IndexedDatasetBuilder::add_document(std::span<const int32_t> tokens) {
  add_item(tokens);
  end_document();
}

void IndexedDatasetBuilder::add_document(std::span<const int64_t> tokens) {
  add_item(tokens);
  end_document();
}

void IndexedDatasetBuilder::add_document(std::span<const int32_t> tokens, std::span<const int32_t> lengths) {
  int64_t total = 0;
  for (int32_t n : lengths) {
    NM_CHECK(n >= 0, "negative sequence length {}", n);
    total += n;
  }
  NM_CHECK(total == static_cast<int64_t>(tokens.size()), "lengths sum to {}, document has {} tokens",
           total, tokens.size());
  write_tokens(tokens);
  for (int32_t n : lengths) push_length(n);
  end_document();
}

void IndexedDatasetBuilder::add_index(const std::string& other_prefix) {
  check_open();
  IndexedDataset other = IndexedDataset::open(other_prefix);
  if (other.dtype() != dtype_)
    throw InputError(fmt::format("{}: dtype {} differs from the dtype {} of {} being built",
                                 idx_path(other_prefix), token_dtype_name(other.dtype()),
                                 token_dtype_name(dtype_), prefix_));
  const int64_t offset = num_sequences();
  // Copy the referenced bytes in order, coalescing contiguous sequences into one write.
  const std::shared_ptr<const io::MappedFile> bin = io::MappedFile::open(bin_path(other_prefix));
  const int64_t item = static_cast<int64_t>(token_dtype_size(dtype_));
  int64_t run_begin = 0, run_end = 0;
  for (int64_t i = 0; i < other.num_sequences(); ++i) {
    const int64_t begin = other.sequence_pointer(i), len = other.sequence_length(i);
    if (begin != run_end) {
      write_bytes(bin->data() + run_begin, static_cast<size_t>(run_end - run_begin));
      run_begin = begin;
    }
    run_end = begin + len * item;
    lengths_.push_back(static_cast<int32_t>(len));
  }
  write_bytes(bin->data() + run_begin, static_cast<size_t>(run_end - run_begin));
  num_tokens_ += other.num_tokens();
  for (int64_t k = 1; k <= other.num_documents(); ++k) document_indices_.push_back(offset + other.document_index(k));
}

void IndexedDatasetBuilder::finalize() {
  check_open();
  NM_CHECK(document_indices_.back() == num_sequences(),
           "{}: finalize with {} sequences after the last end_document()", prefix_,
           num_sequences() - document_indices_.back());
  const std::string bin_final = bin_path(prefix_), idx_final = idx_path(prefix_);
  std::FILE* bin = bin_;
  bin_ = nullptr;
  sync_and_close(bin, tmp_path(bin_final));

  const std::vector<unsigned char> index = encode_index(dtype_, lengths_, document_indices_);
  const std::string idx_tmp = tmp_path(idx_final);
  std::FILE* idx = std::fopen(idx_tmp.c_str(), "wb");
  if (!idx) throw InputError(fmt::format("{}: cannot create: {}", idx_tmp, std::strerror(errno)));
  if (std::fwrite(index.data(), 1, index.size(), idx) != index.size()) {
    int err = errno;
    std::fclose(idx);
    throw Error(fmt::format("{}: write failed: {}", idx_tmp, std::strerror(err)));
  }
  sync_and_close(idx, idx_tmp);

  if (std::rename(tmp_path(bin_final).c_str(), bin_final.c_str()) != 0)
    throw Error(fmt::format("{}: rename failed: {}", bin_final, std::strerror(errno)));
  if (std::rename(idx_tmp.c_str(), idx_final.c_str()) != 0)
    throw Error(fmt::format("{}: rename failed: {}", idx_final, std::strerror(errno)));
  finished_ = true;
}

}  // namespace nemotron::data
