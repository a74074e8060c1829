// Added tokens (special and not): strings matched in the raw text before pre-tokenization and
// never split, with Hugging Face semantics: leftmost-longest matching, tokens that are not
// `normalized` matched first over the whole text, then `normalized` ones inside what remains;
// `single_word` (no word character on either side), `lstrip` / `rstrip` (swallow the whitespace
// on that side). Ids follow HF's rule: a token in the model vocabulary keeps that id, others get
// ids counting up from the model's vocabulary size.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace nemotron::data {

class BpeModel;

struct AddedToken {
  std::string content;
  int32_t id = -1;  // assigned by AddedVocabulary::add
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

// A run of the input: an added token (id >= 0) or plain text to pre-tokenize (id == -1).
struct TextSegment {
  uint32_t begin, end;
  int32_t id;
};

class AddedVocabulary {
 public:
  // Adds tokens in order with HF's id assignment (see above); empty contents are ignored, and a
  // token identical to one already added is skipped.
  void add(const std::vector<AddedToken>& tokens, const BpeModel& model);

  // Cuts `text` (valid UTF-8) into segments covering it, in order; empty segments are left out.
  void split(std::string_view text, std::vector<TextSegment>& out) const;

  const AddedToken* by_id(int32_t id) const;
  std::optional<int32_t> id_of(std::string_view content) const;
  bool is_special(std::string_view content) const { return special_.count(std::string(content)) > 0; }
  // All tokens, by id.
  std::vector<AddedToken> sorted() const;
  bool empty() const { return by_id_.empty(); }

 private:
  struct Trie {
    struct Node {
      std::vector<std::pair<uint8_t, int32_t>> kids;  // byte -> node
      int32_t id = -1;                                 // token ending here
    };
    std::vector<Node> nodes;     // nodes[0] = root
    int32_t root_kid[256];       // root's children, -1 = none
    bool empty() const { return nodes.size() <= 1; }
  };
  static Trie build_trie(const std::vector<const AddedToken*>& tokens);
  // HF AddedVocabulary::find_matches over `text`, appended to `out` (offsets relative to `base`).
  void find_matches(std::string_view text, uint32_t base, const Trie& trie, std::vector<TextSegment>& out) const;

  std::unordered_map<std::string, int32_t> id_by_content_;
  std::unordered_map<int32_t, AddedToken> by_id_;
  std::unordered_set<std::string> special_;
  Trie raw_trie_, normalized_trie_;
};

}  // namespace nemotron::data
