// The BPE model of a tokenizer: vocabulary, ranked merges, and the word -> ids algorithm, with the
// exact semantics of Hugging Face `tokenizers` BPE (chars -> ids with unk / byte fallback, then
// repeatedly apply the lowest-rank merge, leftmost first, via a heap: O(n log n) in the word length).
// `ignore_merges` makes a word that is itself in the vocabulary one token. Results are cached.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/bpe_pair_map.h"
#include "data/bpe_word_cache.h"
#include "data/tokenizer_json.h"

namespace nemotron::data {

struct BpeOptions {
  std::optional<std::string> unk_token;
  std::optional<std::string> continuing_subword_prefix;
  std::optional<std::string> end_of_word_suffix;
  bool fuse_unk = false;
  bool byte_fallback = false;  // chars missing from the vocabulary -> "<0xAB>" byte tokens
  bool ignore_merges = false;
};

class BpeModel {
 public:
  // `model` is tokenizer.json's "model" value; `at` its location. Validates the type, the
  // vocabulary (ids unique, integers) and every merge (both parts and the result in the vocabulary).
  static std::unique_ptr<BpeModel> from_json(const nlohmann::json& model, const JsonAt& at);
  // The "model" value of tokenizer.json: vocabulary by id, merges as [a, b] pairs in rank order.
  nlohmann::ordered_json to_json() const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // nullptr for an id the vocabulary does not have.
  const std::string* id_to_token(int32_t id) const;
  // One more than the largest id.
  int32_t id_limit() const { return static_cast<int32_t>(tokens_.size()); }
  // Number of vocabulary entries (what HF calls the model's vocab size).
  size_t num_tokens() const { return vocab_.size(); }
  size_t num_merges() const { return merges_.size(); }
  const BpeOptions& options() const { return options_; }

  // Appends the ids of one pre-tokenized word (valid UTF-8, not empty). Thread-safe.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;
  // The same without the cache and the ignore_merges shortcut (the reference path).
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;

 private:
  struct MergeRule {
    int32_t rank = 0;
    int32_t new_id = 0;
  };
  struct StrHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  BpeModel() = default;
  void index_vocab(const JsonAt& at);  // fills tokens_/present_/char_id_ from vocab_
  void add_merge(const std::string& a, const std::string& b, int32_t rank, const JsonAt& at);
  std::optional<int32_t> char_id(std::string_view ch) const;

  BpeOptions options_;
  std::unordered_map<std::string, int32_t, StrHash, std::equal_to<>> vocab_;
  std::vector<std::string> tokens_;  // by id; holes are empty and not present_
  std::vector<bool> present_;
  std::array<int32_t, 512> char_id_{};  // id of each one-code-point token below U+0200, or -1
  BpePairMap<MergeRule> merges_;
  std::unique_ptr<BpeWordCache> cache_;
};

}  // namespace nemotron::data
