#include "data/pretokenizer.h"

#include <algorithm>
#include <cstring>

#include "core/config_tree.h"
#include "core/error.h"
#include "data/byte_level.h"

namespace nemotron::data {

using nlohmann::json;

char* TextArena::alloc(size_t n) {
  while (current_ < chunks_.size() && used_ + n > chunks_[current_].second) {
    ++current_;
    used_ = 0;
  }
  if (current_ == chunks_.size()) {
    const size_t cap = std::max<size_t>({n, 16384, chunks_.empty() ? 0 : 2 * chunks_.back().second});
    chunks_.emplace_back(std::make_unique<char[]>(cap), cap);
    used_ = 0;
  }
  char* p = chunks_[current_].first.get() + used_;
  used_ += n;
  return p;
}

namespace {

struct Seg {
  uint32_t b, e;
  bool match;
};

const PretokRegex& gpt2_regex() {
  static const PretokRegex re(kGpt2Pattern, false, "ByteLevel", "use_regex");
  return re;
}

SplitBehavior parse_behavior(const json& node, const JsonAt& at) {
  const std::string b = json_string(node, "behavior", at);
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  at.key("behavior").fail(fmt::format(
      "expected one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous, got {}",
      describe_value(b)));
}

}  // namespace

void split_by_regex(const PretokRegex& regex, SplitBehavior behavior, bool invert, std::string_view text,
                    std::vector<std::pair<uint32_t, uint32_t>>& matches, std::vector<std::string_view>& out) {
  matches.clear();
  regex.find_all(text, matches);
  const auto n = static_cast<uint32_t>(text.size());
  auto emit = [&](uint32_t b, uint32_t e) {
    if (e > b) out.push_back(text.substr(b, e - b));
  };
  // (piece, is_match) runs covering the text, in order
  std::vector<Seg> segs;
  segs.reserve(2 * matches.size() + 1);
  uint32_t prev = 0;
  for (auto [s, e] : matches) {
    if (prev != s) segs.push_back({prev, s, invert});
    segs.push_back({s, e, !invert});
    prev = e;
  }
  if (prev != n || n == 0) segs.push_back({prev, n, invert});

  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const Seg& g : segs) emit(g.b, g.e);
      return;
    case SplitBehavior::kRemoved:
      for (const Seg& g : segs)
        if (!g.match) emit(g.b, g.e);
      return;
    case SplitBehavior::kContiguous:
    case SplitBehavior::kMergedWithPrevious: {
      std::vector<Seg> acc;
      bool prev_match = false;
      for (const Seg& g : segs) {
        const bool join = behavior == SplitBehavior::kContiguous ? g.match == prev_match : g.match && !prev_match;
        if (join && !acc.empty()) {
          acc.back().e = g.e;
        } else {
          acc.push_back(g);
        }
        prev_match = g.match;
      }
      for (const Seg& g : acc) emit(g.b, g.e);
      return;
    }
    case SplitBehavior::kMergedWithNext: {
      std::vector<Seg> acc;
      bool prev_match = false;
      for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
        if (it->match && !prev_match && !acc.empty()) {
          acc.back().b = it->b;
        } else {
          acc.push_back(*it);
        }
        prev_match = it->match;
      }
      for (auto it = acc.rbegin(); it != acc.rend(); ++it) emit(it->b, it->e);
      return;
    }
  }
}

PreTokenizer PreTokenizer::from_json(const json& node, const JsonAt& at) {
  PreTokenizer p;
  if (node.is_null()) return p;
  p.spec_ = node;
  p.add_stage(node, at);
  return p;
}

PreTokenizer PreTokenizer::split_then_byte_level(const std::string& pattern) {
  json spec = {{"type", "Sequence"},
               {"pretokenizers",
                json::array({{{"type", "Split"},
                              {"pattern", {{"Regex", pattern}}},
                              {"behavior", "Isolated"},
                              {"invert", false}},
                             {{"type", "ByteLevel"},
                              {"add_prefix_space", false},
                              {"trim_offsets", true},
                              {"use_regex", false}}})}};
  const std::string source = "train_bpe";
  return from_json(spec, JsonAt{source, "pre_tokenizer"});
}

void PreTokenizer::add_stage(const json& node, const JsonAt& at) {
  if (!node.is_object()) at.expected("a pre-tokenizer mapping", node);
  const std::string type = json_string(node, "type", at);
  if (type == "Sequence") {
    const json& list = json_require(node, "pretokenizers", at);
    if (!list.is_array()) at.key("pretokenizers").expected("a list", list);
    for (size_t i = 0; i < list.size(); ++i) add_stage(list[i], at.key("pretokenizers").index(i));
    return;
  }
  PretokStage st;
  if (type == "Split") {
    st.kind = PretokStage::Kind::kSplit;
    const json& pat = json_object(node, "pattern", at);
    const JsonAt pat_at = at.key("pattern");
    if (pat.contains("Regex")) {
      st.regex = std::make_shared<PretokRegex>(json_string(pat, "Regex", pat_at), false, at.source,
                                               pat_at.key("Regex").path);
    } else if (pat.contains("String")) {
      st.regex = std::make_shared<PretokRegex>(json_string(pat, "String", pat_at), true, at.source,
                                               pat_at.key("String").path);
    } else {
      pat_at.expected(R"({"Regex": "..."} or {"String": "..."})", pat);
    }
    st.behavior = parse_behavior(node, at);
    st.invert = json_bool_or(node, "invert", false, at);
  } else if (type == "ByteLevel") {
    st.kind = PretokStage::Kind::kByteLevel;
    st.add_prefix_space = json_bool_or(node, "add_prefix_space", true, at);
    st.use_regex = json_bool_or(node, "use_regex", true, at);
    json_bool_or(node, "trim_offsets", true, at);  // offsets only; type-checked, unused
  } else {
    at.key("type").fail(fmt::format("unsupported pre-tokenizer {} (supported: Split, ByteLevel, Sequence)",
                                    describe_value(type)));
  }
  stages_.push_back(std::move(st));
}

bool PreTokenizer::byte_level() const {
  return std::any_of(stages_.begin(), stages_.end(),
                     [](const PretokStage& s) { return s.kind == PretokStage::Kind::kByteLevel; });
}

void PreTokenizer::run_split(const PretokStage& st, std::string_view piece, PretokScratch& s,
                             std::vector<std::string_view>& out) const {
  split_by_regex(*st.regex, st.behavior, st.invert, piece, s.matches, out);
}

void PreTokenizer::run_byte_level(const PretokStage& st, std::string_view piece, PretokScratch& s,
                                  std::vector<std::string_view>& out) const {
  std::string_view p = piece;
  if (st.add_prefix_space && (p.empty() || p[0] != ' ')) {
    char* buf = s.arena.alloc(p.size() + 1);
    buf[0] = ' ';
    std::memcpy(buf + 1, p.data(), p.size());
    p = std::string_view(buf, p.size() + 1);
  }
  const size_t first = out.size();
  if (st.use_regex) {
    split_by_regex(gpt2_regex(), SplitBehavior::kIsolated, false, p, s.matches, out);
  } else if (!p.empty()) {
    out.push_back(p);
  }
  // bytes -> byte-level characters, in place of each new piece
  const auto& alpha = byte_level_alphabet();
  for (size_t k = first; k < out.size(); ++k) {
    const std::string_view w = out[k];
    char* buf = s.arena.alloc(2 * w.size());
    size_t len = 0;
    for (char c : w) {
      const std::string& u = alpha[static_cast<uint8_t>(c)];
      std::memcpy(buf + len, u.data(), u.size());
      len += u.size();
    }
    s.arena.give_back(2 * w.size() - len);
    out[k] = std::string_view(buf, len);
  }
}

void PreTokenizer::run(std::string_view piece, PretokScratch& s, std::vector<std::string_view>& words) const {
  if (stages_.empty()) {
    if (!piece.empty()) words.push_back(piece);
    return;
  }
  if (stages_.size() == 1) {
    const PretokStage& st = stages_[0];
    if (st.kind == PretokStage::Kind::kSplit) {
      run_split(st, piece, s, words);
    } else {
      run_byte_level(st, piece, s, words);
    }
    return;
  }
  s.cur.clear();
  s.cur.push_back(piece);
  for (size_t k = 0; k < stages_.size(); ++k) {
    const PretokStage& st = stages_[k];
    std::vector<std::string_view>& dst = k + 1 == stages_.size() ? words : s.next;
    if (&dst == &s.next) s.next.clear();
    for (std::string_view p : s.cur) {
      if (st.kind == PretokStage::Kind::kSplit) {
        run_split(st, p, s, dst);
      } else {
        run_byte_level(st, p, s, dst);
      }
    }
    if (&dst == &s.next) std::swap(s.cur, s.next);
  }
}

}  // namespace nemotron::data
