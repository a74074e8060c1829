// Byte-level BPE training, the algorithm of Hugging Face `tokenizers` BpeTrainer, so that the same
// corpus and settings give the same vocabulary and merges:
//   ids: the special tokens first (in the order given), then the 256 byte-level characters in
//   code-point order, then one id per merge in the order merges are made;
//   each step merges the adjacent pair with the highest count (occurrences weighted by word
//   frequency), ties going to the pair with the smallest (left id, right id); training stops at
//   the vocabulary size, when no pair is left, or when the best count is below min_frequency.
// The result is deterministic: it does not depend on the thread count or on the order of texts.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace nemotron::data {

// The Llama-3 pre-tokenizer regex (also the shape of the Nemotron ones): case-insensitive English
// contractions, letter runs with one optional leading non-letter, digit runs of 1-3, punctuation
// runs with trailing newlines, newline runs, and whitespace that leaves one space for the next word.
inline constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct BpeTrainConfig {
  int32_t vocab_size = 32000;               // all ids: special tokens + 256 bytes + merges
  int64_t min_frequency = 0;                // a merge needs a pair count of at least this
  std::vector<std::string> special_tokens;  // added as special tokens, ids 0.. in this order
  std::string pattern = kLlama3Pattern;     // Split regex, followed by ByteLevel
  bool ignore_merges = true;                // a word already in the vocabulary is one token
  std::string bos_token;                    // if set: a template post-processor "<bos> $A"

  // InputError naming the field (train_bpe.vocab_size: ...) for a value that cannot work.
  void validate() const;
};

// Trains on `texts` (each valid UTF-8; an invalid one is an InputError naming its index) with all
// OpenMP threads for pre-tokenization. The result encodes and saves like a loaded tokenizer.
Tokenizer train_bpe(const std::vector<std::string>& texts, const BpeTrainConfig& cfg);

}  // namespace nemotron::data
