#include "data/tokenizer_added_tokens.h"

#include <algorithm>
#include <cstring>

#include "data/bpe_model.h"
#include "data/pretokenizer_regex.h"
#include "data/tokenizer_utf8.h"

namespace nemotron::data {

namespace {

bool same_token(const AddedToken& a, const AddedToken& b) {
  return a.content == b.content && a.single_word == b.single_word && a.lstrip == b.lstrip && a.rstrip == b.rstrip &&
         a.normalized == b.normalized && a.special == b.special;
}

// Rust regex's Unicode \w, which HF uses for single_word: Alphabetic, marks, decimal digits,
// connector punctuation, join controls.
bool is_word_char(std::string_view ch) {
  static const PretokRegex re(R"(^[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])", false, "added_tokens",
                              "single_word");
  std::vector<std::pair<uint32_t, uint32_t>> m;
  re.find_all(ch, m);
  return !m.empty();
}

bool ends_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80) --i;
  return is_word_char(s.substr(i));
}

bool starts_with_word(std::string_view s) {
  if (s.empty()) return false;
  return is_word_char(s.substr(0, utf8_char_len(static_cast<uint8_t>(s[0]))));
}

// Start of the whitespace run that ends `s`.
size_t trailing_space_start(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t i = end - 1;
    while (i > 0 && (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80) --i;
    size_t j = i;
    if (!is_unicode_whitespace(utf8_next(s, j))) break;
    end = i;
  }
  return end;
}

// Length of the whitespace run that starts `s`.
size_t leading_space_len(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    if (!is_unicode_whitespace(utf8_next(s, j))) break;
    i = j;
  }
  return i;
}

}  // namespace

void AddedVocabulary::add(const std::vector<AddedToken>& tokens, const BpeModel& model) {
  // HF: ids continue from the larger of the model's vocabulary size and the last added id + 1
  const auto model_size = static_cast<int32_t>(model.num_tokens());
  int32_t next_id = model_size;
  if (!by_id_.empty()) {
    int32_t max_id = -1;
    for (const auto& [id, t] : by_id_) max_id = std::max(max_id, id);
    next_id = (max_id >= model_size || model_size == 0) ? max_id + 1 : model_size;
  }
  for (const AddedToken& tok : tokens) {
    if (tok.content.empty()) continue;
    if (auto it = id_by_content_.find(tok.content); it != id_by_content_.end()) {
      auto cur = by_id_.find(it->second);
      if (cur != by_id_.end() && same_token(cur->second, tok)) continue;
    }
    int32_t id;
    if (auto it = id_by_content_.find(tok.content); it != id_by_content_.end()) {
      id = it->second;
    } else if (auto mid = model.token_to_id(tok.content)) {
      id = *mid;
    } else {
      id = next_id++;
    }
    id_by_content_[tok.content] = id;
    if (tok.special) special_.insert(tok.content);
    AddedToken stored = tok;
    stored.id = id;
    by_id_[id] = std::move(stored);
  }
  std::vector<const AddedToken*> raw, normalized;
  for (const auto& [id, t] : by_id_) (t.normalized ? normalized : raw).push_back(&t);
  raw_trie_ = build_trie(raw);
  normalized_trie_ = build_trie(normalized);
}

AddedVocabulary::Trie AddedVocabulary::build_trie(const std::vector<const AddedToken*>& tokens) {
  Trie t;
  t.nodes.emplace_back();
  std::fill(std::begin(t.root_kid), std::end(t.root_kid), -1);
  for (const AddedToken* tok : tokens) {
    int32_t node = 0;
    for (char ch : tok->content) {
      const auto b = static_cast<uint8_t>(ch);
      int32_t next = -1;
      if (node == 0) {
        next = t.root_kid[b];
      } else {
        for (const auto& [kb, kid] : t.nodes[node].kids)
          if (kb == b) next = kid;
      }
      if (next < 0) {
        next = static_cast<int32_t>(t.nodes.size());
        t.nodes.emplace_back();
        if (node == 0) {
          t.root_kid[b] = next;
        } else {
          t.nodes[node].kids.emplace_back(b, next);
        }
      }
      node = next;
    }
    t.nodes[node].id = tok->id;
  }
  return t;
}

void AddedVocabulary::find_matches(std::string_view text, uint32_t base, const Trie& trie,
                                   std::vector<TextSegment>& out) const {
  const size_t n = text.size();
  auto plain = [&](size_t b, size_t e) {
    if (e > b) out.push_back({static_cast<uint32_t>(base + b), static_cast<uint32_t>(base + e), -1});
  };
  if (trie.empty()) {
    plain(0, n);
    return;
  }
  size_t start_offset = 0;
  size_t i = 0;
  while (i < n) {
    // longest token starting at i
    int32_t node = trie.root_kid[static_cast<uint8_t>(text[i])];
    if (node < 0) {
      ++i;
      continue;
    }
    int32_t id = -1;
    size_t stop = 0;
    for (size_t k = i + 1;; ++k) {
      if (trie.nodes[node].id >= 0) {
        id = trie.nodes[node].id;
        stop = k;
      }
      if (k == n) break;
      int32_t next = -1;
      const auto b = static_cast<uint8_t>(text[k]);
      for (const auto& [kb, kid] : trie.nodes[node].kids)
        if (kb == b) {
          next = kid;
          break;
        }
      if (next < 0) break;
      node = next;
    }
    if (id < 0) {
      ++i;
      continue;
    }
    size_t start = i;
    i = stop;  // matches never overlap, whatever the filters below decide
    const AddedToken& tok = by_id_.at(id);
    if (tok.single_word) {
      const bool start_space = start == 0 || !ends_with_word(text.substr(0, start));
      const bool stop_space = stop == n || !starts_with_word(text.substr(stop));
      if (!start_space || !stop_space) continue;
    }
    if (tok.lstrip) start = std::max(trailing_space_start(text.substr(0, start)), start_offset);
    if (tok.rstrip) stop += leading_space_len(text.substr(stop));
    if (start_offset < start) plain(start_offset, start);
    out.push_back({static_cast<uint32_t>(base + start), static_cast<uint32_t>(base + stop), id});
    start_offset = stop;
  }
  if (start_offset != n) plain(start_offset, n);
}

void AddedVocabulary::split(std::string_view text, std::vector<TextSegment>& out) const {
  if (normalized_trie_.empty()) {
    find_matches(text, 0, raw_trie_, out);
    return;
  }
  std::vector<TextSegment> first;
  find_matches(text, 0, raw_trie_, first);
  for (const TextSegment& seg : first) {
    if (seg.id >= 0) {
      out.push_back(seg);
    } else {  // no normalizer is supported, so the normalized text is the text itself
      find_matches(text.substr(seg.begin, seg.end - seg.begin), seg.begin, normalized_trie_, out);
    }
  }
}

const AddedToken* AddedVocabulary::by_id(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second;
}

std::optional<int32_t> AddedVocabulary::id_of(std::string_view content) const {
  auto it = id_by_content_.find(std::string(content));
  if (it == id_by_content_.end()) return std::nullopt;
  return it->second;
}

std::vector<AddedToken> AddedVocabulary::sorted() const {
  std::vector<AddedToken> v;
  v.reserve(by_id_.size());
  for (const auto& [id, t] : by_id_) v.push_back(t);
  std::sort(v.begin(), v.end(), [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
  return v;
}

}  // namespace nemotron::data
