// Pre-tokenization: cuts a piece of text (what lies between added tokens) into the words BPE sees.
// Supports Hugging Face `Split` (regex or literal, five delimiter behaviours, invert) and
// `ByteLevel` (optional prefix space, optional GPT-2 regex, then bytes -> byte-level characters),
// alone or in a `Sequence`, with HF's semantics: each stage runs on every piece the previous stage
// produced, and empty pieces are dropped.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/pretokenizer_regex.h"
#include "data/tokenizer_json.h"

namespace nemotron::data {

// Bump storage for text made during one encode call (prefixed or byte-level pieces): strings handed
// out stay valid until clear(), which keeps the memory for the next call.
class TextArena {
 public:
  char* alloc(size_t n);
  // Returns unused bytes at the end of the last alloc (n <= its size) to the arena.
  void give_back(size_t n) { used_ -= n; }
  void clear() {
    current_ = 0;
    used_ = 0;
  }

 private:
  std::vector<std::pair<std::unique_ptr<char[]>, size_t>> chunks_;  // memory, capacity
  size_t current_ = 0, used_ = 0;
};

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct PretokStage {
  enum class Kind { kSplit, kByteLevel } kind = Kind::kSplit;
  std::shared_ptr<const PretokRegex> regex;  // kSplit
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  bool add_prefix_space = false;  // kByteLevel
  bool use_regex = true;
};

// Reusable per-call buffers (one per thread in batch encoding).
struct PretokScratch {
  TextArena arena;
  std::vector<std::string_view> cur, next;
  std::vector<std::pair<uint32_t, uint32_t>> matches;
  void clear() { arena.clear(); }
};

class PreTokenizer {
 public:
  PreTokenizer() = default;  // none: a piece is one word
  // `node` is the tokenizer.json "pre_tokenizer" value (null = none); `at` its location.
  static PreTokenizer from_json(const nlohmann::json& node, const JsonAt& at);
  // Sequence[Split(pattern, Isolated), ByteLevel(add_prefix_space=false, use_regex=false)], the
  // Llama-3 / Nemotron arrangement that train_bpe uses.
  static PreTokenizer split_then_byte_level(const std::string& pattern);

  // The JSON this pre-tokenizer was made from (written back by Tokenizer::save).
  const nlohmann::json& to_json() const { return spec_; }
  // True when a ByteLevel stage maps bytes to byte-level characters.
  bool byte_level() const;
  const std::vector<PretokStage>& stages() const { return stages_; }

  // Appends the words of `piece` (valid UTF-8, not empty) to `words`. The views point into
  // `piece` or into s.arena; s.cur / s.next / s.matches are clobbered.
  void run(std::string_view piece, PretokScratch& s, std::vector<std::string_view>& words) const;

 private:
  void add_stage(const nlohmann::json& node, const JsonAt& at);
  void run_split(const PretokStage& st, std::string_view piece, PretokScratch& s,
                 std::vector<std::string_view>& out) const;
  void run_byte_level(const PretokStage& st, std::string_view piece, PretokScratch& s,
                      std::vector<std::string_view>& out) const;

  nlohmann::json spec_;  // null = none
  std::vector<PretokStage> stages_;
};

// Splits `text` by `regex` into (piece, is_match) runs covering it, combined by `behavior` as HF
// NormalizedString::split does; appends the kept non-empty pieces to `out`.
void split_by_regex(const PretokRegex& regex, SplitBehavior behavior, bool invert, std::string_view text,
                    std::vector<std::pair<uint32_t, uint32_t>>& matches, std::vector<std::string_view>& out);

}  // namespace nemotron::data
