#include "data/bpe_model.h"

#include <algorithm>
#include <cstdio>

#include "core/config_tree.h"
#include "core/error.h"
#include "data/tokenizer_utf8.h"

namespace nemotron::data {

using nlohmann::json;

namespace {

constexpr size_t kCacheWords = 1 << 16;
constexpr int32_t kMaxId = 1 << 26;  // ids index dense tables

// The merge loop's symbols: a doubly linked list over the word's initial symbols.
struct Symbol {
  int32_t c;     // token id
  int32_t prev;  // index of the previous live symbol, -1 at the start
  int32_t next;  // index of the next live symbol, -1 at the end
  int32_t len;   // bytes covered; 0 = merged into its left neighbour
};

// A candidate merge of the symbol at `pos` with its right neighbour; lowest rank first, then
// leftmost (HF's ordering).
struct Candidate {
  int32_t rank;
  int32_t pos;
  int32_t new_id;
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

}  // namespace

std::unique_ptr<BpeModel> BpeModel::from_json(const json& model, const JsonAt& at) {
  if (!model.is_object()) at.expected("a model mapping", model);
  if (model.contains("type")) {
    const std::string type = json_string(model, "type", at);
    if (type != "BPE")
      at.key("type").fail(fmt::format("unsupported model {} (supported: BPE)", describe_value(type)));
  }
  std::unique_ptr<BpeModel> m(new BpeModel());
  BpeOptions& o = m->options_;
  o.unk_token = json_opt_string(model, "unk_token", at);
  o.continuing_subword_prefix = json_opt_string(model, "continuing_subword_prefix", at);
  o.end_of_word_suffix = json_opt_string(model, "end_of_word_suffix", at);
  o.fuse_unk = json_bool_or(model, "fuse_unk", false, at);
  o.byte_fallback = json_bool_or(model, "byte_fallback", false, at);
  o.ignore_merges = json_bool_or(model, "ignore_merges", false, at);
  if (auto it = model.find("dropout"); it != model.end() && !it->is_null()) {
    if (!it->is_number()) at.key("dropout").expected("a number or null", *it);
    if (it->get<double>() != 0.0)
      at.key("dropout").fail(fmt::format("BPE dropout is not supported (encoding must be deterministic), got {}",
                                         describe_value(*it)));
  }

  const json& vocab = json_require(model, "vocab", at);
  const JsonAt vocab_at = at.key("vocab");
  if (!vocab.is_object()) vocab_at.expected(R"(a mapping {"token": id, ...})", vocab);
  m->vocab_.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it)
    m->vocab_[it.key()] = json_id(it.value(), vocab_at.key(describe_value(it.key())));
  m->index_vocab(vocab_at);

  const json& merges = json_require(model, "merges", at);
  const JsonAt merges_at = at.key("merges");
  if (!merges.is_array()) merges_at.expected("a list of merges", merges);
  int32_t rank = 0;
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& e = merges[i];
    const JsonAt e_at = merges_at.index(i);
    if (e.is_string()) {
      const std::string s = e.get<std::string>();
      if (s.rfind("#version", 0) == 0) continue;  // header line of legacy merges.txt files
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        e_at.expected(R"("a b" (two tokens separated by one space))", e);
      m->add_merge(s.substr(0, sp), s.substr(sp + 1), rank++, e_at);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      m->add_merge(e[0].get<std::string>(), e[1].get<std::string>(), rank++, e_at);
    } else {
      e_at.expected(R"("a b" or ["a","b"])", e);
    }
  }
  m->cache_ = std::make_unique<BpeWordCache>(kCacheWords);
  return m;
}

void BpeModel::index_vocab(const JsonAt& at) {
  int32_t limit = 0;
  for (const auto& [tok, id] : vocab_) {
    if (id >= kMaxId)
      at.key(describe_value(tok)).fail(fmt::format("id {} is too large (ids must be below {})", id, kMaxId));
    limit = std::max(limit, id + 1);
  }
  tokens_.assign(limit, std::string());
  present_.assign(limit, false);
  char_id_.fill(-1);
  for (const auto& [tok, id] : vocab_) {
    if (present_[id]) {
      const auto [first, second] = std::minmax(tokens_[id], tok);
      at.fail(fmt::format("id {} is given to both {} and {}", id, describe_value(first), describe_value(second)));
    }
    tokens_[id] = tok;
    present_[id] = true;
    if (!tok.empty()) {
      size_t i = 0;
      const uint32_t cp = utf8_next(tok, i);
      if (i == tok.size() && cp < char_id_.size()) char_id_[cp] = id;
    }
  }
}

void BpeModel::add_merge(const std::string& a, const std::string& b, int32_t rank, const JsonAt& at) {
  auto fail = [&](const std::string& what, const std::string& tok) {
    at.fail(fmt::format("{} {} is not in model.vocab", what, describe_value(tok)));
  };
  auto ia = vocab_.find(a);
  if (ia == vocab_.end()) fail("token", a);
  auto ib = vocab_.find(b);
  if (ib == vocab_.end()) fail("token", b);
  // HF drops the continuing-subword prefix's length from the right part, present or not
  const size_t skip = options_.continuing_subword_prefix ? options_.continuing_subword_prefix->size() : 0;
  const std::string merged = a + (skip <= b.size() ? b.substr(skip) : std::string());
  auto im = vocab_.find(merged);
  if (im == vocab_.end()) fail("merged token", merged);
  merges_.set(bpe_pair_key(ia->second, ib->second), MergeRule{rank, im->second});  // a repeated pair keeps its last rank
}

nlohmann::ordered_json BpeModel::to_json() const {
  using ojson = nlohmann::ordered_json;
  ojson m;
  m["type"] = "BPE";
  m["dropout"] = nullptr;
  auto opt = [](const std::optional<std::string>& s) { return s ? ojson(*s) : ojson(nullptr); };
  m["unk_token"] = opt(options_.unk_token);
  m["continuing_subword_prefix"] = opt(options_.continuing_subword_prefix);
  m["end_of_word_suffix"] = opt(options_.end_of_word_suffix);
  m["fuse_unk"] = options_.fuse_unk;
  m["byte_fallback"] = options_.byte_fallback;
  m["ignore_merges"] = options_.ignore_merges;
  ojson vocab = ojson::object();
  // ordered_map's own insert searches the keys (quadratic for 100k tokens); they are unique here,
  // so append to the vector it is made of
  auto& entries = static_cast<std::vector<std::pair<const std::string, ojson>>&>(vocab.get_ref<ojson::object_t&>());
  entries.reserve(vocab_.size());
  for (size_t id = 0; id < tokens_.size(); ++id)
    if (present_[id]) entries.emplace_back(tokens_[id], id);
  m["vocab"] = std::move(vocab);
  std::vector<std::pair<int32_t, uint64_t>> ranked;
  ranked.reserve(merges_.size());
  merges_.for_each([&](uint64_t key, const MergeRule& r) { ranked.emplace_back(r.rank, key); });
  std::sort(ranked.begin(), ranked.end());
  ojson merges = ojson::array();
  for (const auto& [rank, key] : ranked)
    merges.push_back(ojson::array({tokens_[key >> 32], tokens_[key & 0xFFFFFFFFu]}));
  m["merges"] = std::move(merges);
  return m;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || id >= id_limit() || !present_[id]) return nullptr;
  return &tokens_[id];
}

std::optional<int32_t> BpeModel::char_id(std::string_view ch) const {
  auto it = vocab_.find(ch);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (options_.ignore_merges) {
    if (auto it = vocab_.find(word); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const size_t hash = BpeWordCache::hash_of(word);
  if (cache_->get(word, hash, out)) return;
  const size_t first = out.size();
  merge_word(word, out);
  cache_->put(word, hash, out.data() + first, out.size() - first);
}

void BpeModel::merge_word(std::string_view w, std::vector<int32_t>& out) const {
  // 1. characters -> initial symbols
  std::vector<Symbol> syms;
  syms.reserve(w.size());
  auto add = [&](int32_t id, int32_t len) {
    const auto n = static_cast<int32_t>(syms.size());
    if (n > 0) syms.back().next = n;
    syms.push_back({id, n - 1, -1, len});
  };
  const bool affixes = options_.continuing_subword_prefix || options_.end_of_word_suffix;
  int32_t unk_id = -1, unk_len = 0;  // pending unknown run
  std::string s;
  size_t i = 0;
  while (i < w.size()) {
    const size_t start = i;
    const uint32_t cp = utf8_next(w, i);
    const auto byte_len = static_cast<int32_t>(i - start);
    std::optional<int32_t> id;
    if (!affixes && cp < char_id_.size() && char_id_[cp] >= 0) {
      id = char_id_[cp];
    } else {
      s.assign(w.substr(start, i - start));
      if (start > 0 && options_.continuing_subword_prefix) s.insert(0, *options_.continuing_subword_prefix);
      if (i == w.size() && options_.end_of_word_suffix) s += *options_.end_of_word_suffix;
      if (affixes || cp >= char_id_.size()) id = char_id(s);
    }
    if (id) {
      if (unk_id >= 0) {
        add(unk_id, unk_len);
        unk_id = -1;
      }
      add(*id, byte_len);
      continue;
    }
    if (options_.byte_fallback) {  // every byte of s must have a "<0xAB>" token, else none is used
      std::vector<int32_t> bytes;
      char code[8];
      for (char c : s) {
        std::snprintf(code, sizeof code, "<0x%02X>", static_cast<unsigned>(static_cast<uint8_t>(c)));
        auto b = char_id(code);
        if (!b) break;
        bytes.push_back(*b);
      }
      if (bytes.size() == s.size()) {
        for (int32_t b : bytes) add(b, 1);
        continue;
      }
    }
    if (options_.unk_token) {
      auto u = vocab_.find(*options_.unk_token);
      if (u == vocab_.end())
        throw InputError(fmt::format("BPE model: unk_token {} is not in the vocabulary, and the word {} needs it",
                                     describe_value(*options_.unk_token), describe_value(std::string(w))));
      const int32_t unk = u->second;
      if (unk_id >= 0 && options_.fuse_unk) {
        unk_len += byte_len;
      } else {
        if (unk_id >= 0) add(unk_id, unk_len);
        unk_id = unk;
        unk_len = byte_len;
      }
    }
    // no unk token: the character is dropped, as HF does
  }
  if (unk_id >= 0) add(unk_id, unk_len);

  // 2. merges, lowest rank first, leftmost among equals
  if (syms.size() > 1 && merges_.size() > 0) {
    std::vector<Candidate> heap;
    heap.reserve(syms.size());
    const auto greater = [](const Candidate& a, const Candidate& b) { return a > b; };
    for (size_t k = 0; k + 1 < syms.size(); ++k)
      if (const MergeRule* r = merges_.find(bpe_pair_key(syms[k].c, syms[k + 1].c)))
        heap.push_back({r->rank, static_cast<int32_t>(k), r->new_id});
    std::make_heap(heap.begin(), heap.end(), greater);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), greater);
      const Candidate top = heap.back();
      heap.pop_back();
      Symbol& cur = syms[top.pos];
      if (cur.len == 0 || cur.next < 0) continue;
      const Symbol right = syms[cur.next];
      // a stale candidate: the pair changed since it was queued (HF checks only the result id)
      const MergeRule* now = merges_.find(bpe_pair_key(cur.c, right.c));
      if (now == nullptr || now->new_id != top.new_id) continue;
      syms[cur.next].len = 0;
      cur.c = top.new_id;
      cur.len += right.len;
      cur.next = right.next;
      if (right.next >= 0) syms[right.next].prev = top.pos;
      if (cur.prev >= 0) {
        if (const MergeRule* r = merges_.find(bpe_pair_key(syms[cur.prev].c, cur.c))) {
          heap.push_back({r->rank, cur.prev, r->new_id});
          std::push_heap(heap.begin(), heap.end(), greater);
        }
      }
      if (cur.next >= 0) {
        if (const MergeRule* r = merges_.find(bpe_pair_key(cur.c, syms[cur.next].c))) {
          heap.push_back({r->rank, top.pos, r->new_id});
          std::push_heap(heap.begin(), heap.end(), greater);
        }
      }
    }
  }
  for (const Symbol& sym : syms)
    if (sym.len != 0) out.push_back(sym.c);
}

}  // namespace nemotron::data
