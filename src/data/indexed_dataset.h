// Reader of Megatron `.bin/.idx` pairs (shared/reference/data-formats.md §1). Both files are
// memory-mapped; open() validates the whole index against both file sizes, so that no later
// read can go out of bounds: a malformed file is an InputError naming the file and the field,
// never a crash. Trailing `.idx` bytes (the multimodal mode array) are ignored, as Megatron does.
#pragma once
#include <memory>
#include <cstdint>
#include <string>
#include <vector>

#include "data/index_format.h"
#include "io/mapped_file.h"
#include "data/token_source.h"

namespace nemotron::data {

class IndexedDataset : public TokenSource {
 public:
  // Opens `prefix.idx` and `prefix.bin`. Throws InputError for a missing or malformed file.
  static IndexedDataset open(const std::string& prefix);

  const std::string& prefix() const { return prefix_; }
  TokenDType dtype() const { return dtype_; }
  int64_t num_sequences() const override { return num_sequences_; }
  // Documents as stored: document_count - 1 (the CSR offsets have a leading 0).
  int64_t num_documents() const { return num_document_indices_ - 1; }
  int64_t num_tokens() const { return num_tokens_; }
  int64_t sequence_length(int64_t i) const override;
  int64_t sequence_pointer(int64_t i) const;  // byte offset in `.bin`
  // Entry k of document_indices, k in [0, num_documents()].
  int64_t document_index(int64_t k) const;
  std::vector<int32_t> sequence_lengths() const override;
  std::vector<int64_t> document_indices() const;

  // Tokens [offset, offset + length) of sequence i; length -1 reads to the end of the sequence.
  // Any on-disk integer dtype is widened; int64 files read as int32 throw InputError for ids
  // outside the int32 range.
  void get(int64_t i, int64_t offset, int64_t length, int32_t* out) const;
  void get(int64_t i, int64_t offset, int64_t length, int64_t* out) const;
  std::vector<int32_t> get(int64_t i, int64_t offset = 0, int64_t length = -1) const;

  void read(int64_t i, int64_t offset, int64_t length, int64_t* out) const override {
    get(i, offset, length, out);
  }
  std::string description() const override { return prefix_; }

 private:
  int64_t checked_length(int64_t i, int64_t offset, int64_t length) const;
  const unsigned char* token_ptr(int64_t i, int64_t offset) const;

  std::string prefix_;
  std::shared_ptr<const io::MappedFile> idx_, bin_;
  TokenDType dtype_ = TokenDType::i32;
  int64_t num_sequences_ = 0, num_document_indices_ = 0, num_tokens_ = 0;
  size_t lengths_at_ = 0, pointers_at_ = 0, doc_indices_at_ = 0;  // byte offsets in `.idx`
};

}  // namespace nemotron::data
