// Writer of Megatron `.bin/.idx` pairs, byte for byte what Megatron's IndexedDatasetBuilder
// writes (shared/reference/data-formats.md §1.2, §1.6). Tokens stream to `P.bin.tmp`; finalize()
// writes `P.idx.tmp`, syncs both and renames `.bin` then `.idx` into place, so a crash never leaves
// a half-written file under a final name (readers look for the `.idx`, which appears last).
#pragma once
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "data/index_format.h"

namespace nemotron::data {

class IndexedDatasetBuilder {
 public:
  // Starts `prefix.bin.tmp`; throws InputError when it cannot be created.
  explicit IndexedDatasetBuilder(std::string prefix, TokenDType dtype = TokenDType::i32);
  // Without finalize(), the temporary files are removed and nothing appears under the prefix.
  ~IndexedDatasetBuilder();
  IndexedDatasetBuilder(const IndexedDatasetBuilder&) = delete;
  IndexedDatasetBuilder& operator=(const IndexedDatasetBuilder&) = delete;

  // Appends one sequence (Megatron's add_item). An id the dtype cannot hold is an InputError.
  void add_item(std::span<const int32_t> tokens);
  void add_item(std::span<const int64_t> tokens);
  // Closes the current document: the sequences added since the last boundary (possibly none,
  // which makes an empty document, as Megatron does).
  void end_document();
  // One sequence that is a whole document: add_item + end_document.
  void add_document(std::span<const int32_t> tokens);
  void add_document(std::span<const int64_t> tokens);
  // Megatron's add_document(tensor, lengths): `tokens` split into sequences of `lengths`, one document.
  void add_document(std::span<const int32_t> tokens, std::span<const int32_t> lengths);
  // Appends a whole existing dataset (same dtype): its sequences, its documents, its tokens.
  void add_index(const std::string& prefix);
  // Writes the index and moves both files into place. The builder is finished afterwards.
  void finalize();

  const std::string& prefix() const { return prefix_; }
  TokenDType dtype() const { return dtype_; }
  int64_t num_sequences() const { return static_cast<int64_t>(lengths_.size()); }
  int64_t num_documents() const { return static_cast<int64_t>(document_indices_.size()) - 1; }
  int64_t num_tokens() const { return num_tokens_; }

 private:
  template <class T> void write_tokens(std::span<const T> tokens);
  void write_bytes(const void* data, size_t n);
  void push_length(int64_t n);
  void check_open() const;

  std::string prefix_;
  TokenDType dtype_;
  std::FILE* bin_ = nullptr;
  bool finished_ = false;
  std::vector<int32_t> lengths_;
  std::vector<int64_t> document_indices_{0};
  int64_t num_tokens_ = 0;
  std::vector<unsigned char> encode_buf_;
};

// Serializes an `.idx` (header + arrays) exactly as Megatron's _IndexWriter does; pointers are
// computed from the lengths. Exposed for tests and tools.
std::vector<unsigned char> encode_index(TokenDType dtype, std::span<const int32_t> lengths,
                                        std::span<const int64_t> document_indices);

}  // namespace nemotron::data
