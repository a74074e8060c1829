#include "data/bpe_trainer.h"

#include <algorithm>
#include <exception>
#include <unordered_map>

#include <omp.h>

#include "core/config_tree.h"
#include "core/error.h"
#include "data/byte_level.h"
#include "data/pretokenizer.h"
#include "data/tokenizer_impl.h"
#include "data/tokenizer_utf8.h"

namespace nemotron::data {

using ojson = nlohmann::json;  // key order is irrelevant: the tree is loaded, not written

namespace {

// A queued pair: its count when queued and the words it was seen in then (HF keeps these sets
// with the entry; a stale count is refreshed when the entry reaches the top).
struct QueuedPair {
  int64_t count;
  uint64_t pair;
  std::vector<int32_t> words;
};
// Heap order: highest count on top, then smallest pair.
bool lower_priority(const QueuedPair& a, const QueuedPair& b) {
  return a.count != b.count ? a.count < b.count : a.pair > b.pair;
}

struct PairChange {
  uint64_t pair;
  int32_t delta;
};

// Merges every non-overlapping (a, b) of `w`, left to right, into `merged`; records the changed
// adjacent pairs as HF Word::merge does.
void merge_in_word(std::vector<int32_t>& w, int32_t a, int32_t b, int32_t merged, std::vector<PairChange>& changes) {
  size_t out = 0;
  size_t i = 0;
  const size_t n = w.size();
  while (i < n) {
    if (i + 1 < n && w[i] == a && w[i + 1] == b) {
      if (out > 0) {
        changes.push_back({bpe_pair_key(w[out - 1], a), -1});
        changes.push_back({bpe_pair_key(w[out - 1], merged), +1});
      }
      if (i + 2 < n) {
        changes.push_back({bpe_pair_key(b, w[i + 2]), -1});
        changes.push_back({bpe_pair_key(merged, w[i + 2]), +1});
      }
      w[out++] = merged;
      i += 2;
    } else {
      w[out++] = w[i++];
    }
  }
  w.resize(out);
}

// Word (byte-level string) -> occurrences, counted on all threads.
std::vector<std::pair<std::string, int64_t>> count_words(const std::vector<std::string>& texts,
                                                         const PreTokenizer& pretok) {
  const int threads = std::max(1, omp_get_max_threads());
  std::vector<std::unordered_map<std::string, int64_t>> maps(threads);
  std::exception_ptr error;
  const auto n = static_cast<int64_t>(texts.size());
#pragma omp parallel num_threads(threads)
  {
    auto& counts = maps[omp_get_thread_num()];
    PretokScratch scratch;
    std::vector<std::string_view> words;
#pragma omp for schedule(dynamic, 16)
    for (int64_t i = 0; i < n; ++i) {
      try {
        if (texts[i].empty()) continue;
        words.clear();
        pretok.run(texts[i], scratch, words);
        for (std::string_view w : words) ++counts[std::string(w)];
        scratch.clear();
      } catch (...) {
#pragma omp critical(nemotron_bpe_train_error)
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
  for (int t = 1; t < threads; ++t) {
    for (auto& [w, c] : maps[t]) maps[0][w] += c;
    maps[t].clear();
  }
  std::vector<std::pair<std::string, int64_t>> out(maps[0].begin(), maps[0].end());
  std::sort(out.begin(), out.end());  // word order fixes word indices: no dependence on threads
  return out;
}

}  // namespace

void BpeTrainConfig::validate() const {
  const std::string src = "train_bpe";
  if (vocab_size <= 0)
    throw_config_error(src, "vocab_size", fmt::format("expected a positive integer, got {}", vocab_size));
  if (min_frequency < 0)
    throw_config_error(src, "min_frequency", fmt::format("expected a non-negative integer, got {}", min_frequency));
  for (size_t i = 0; i < special_tokens.size(); ++i)
    if (special_tokens[i].empty() || utf8_invalid_at(special_tokens[i]) != std::string::npos)
      throw_config_error(src, fmt::format("special_tokens[{}]", i),
                         fmt::format("expected a non-empty UTF-8 string, got {}", describe_value(special_tokens[i])));
  if (!bos_token.empty() && std::find(special_tokens.begin(), special_tokens.end(), bos_token) == special_tokens.end())
    throw_config_error(src, "bos_token",
                       fmt::format("{} is not one of special_tokens", describe_value(bos_token)));
  PretokRegex check(pattern, false, src, "pattern");  // compiles, or names the problem
}

Tokenizer train_bpe(const std::vector<std::string>& texts, const BpeTrainConfig& cfg) {
  cfg.validate();
  for (size_t i = 0; i < texts.size(); ++i)
    if (const size_t bad = utf8_invalid_at(texts[i]); bad != std::string::npos)
      throw InputError(fmt::format("train_bpe: texts[{}] is not valid UTF-8 (byte {})", i, bad));
  const PreTokenizer pretok = PreTokenizer::split_then_byte_level(cfg.pattern);
  const std::vector<std::pair<std::string, int64_t>> word_counts = count_words(texts, pretok);

  // ids: special tokens, then the alphabet in code-point order
  std::vector<std::string> id_to_word;
  std::unordered_map<std::string, int32_t> word_to_id;
  auto add_word = [&](const std::string& w) {
    if (word_to_id.count(w)) return;
    word_to_id.emplace(w, static_cast<int32_t>(id_to_word.size()));
    id_to_word.push_back(w);
  };
  for (const std::string& s : cfg.special_tokens) add_word(s);
  std::vector<uint32_t> alphabet;
  for (int b = 0; b < 256; ++b) alphabet.push_back(byte_level_char(static_cast<uint8_t>(b)));
  std::sort(alphabet.begin(), alphabet.end());
  for (uint32_t cp : alphabet) {
    std::string ch;
    utf8_append(ch, cp);
    add_word(ch);
  }

  // words as id sequences; pair counts and where each pair occurs
  std::vector<std::vector<int32_t>> words(word_counts.size());
  std::vector<int64_t> counts(word_counts.size());
  std::unordered_map<uint64_t, int64_t> pair_counts;
  std::unordered_map<uint64_t, std::vector<int32_t>> where;
  for (size_t k = 0; k < word_counts.size(); ++k) {
    const std::string& w = word_counts[k].first;
    counts[k] = word_counts[k].second;
    size_t i = 0;
    while (i < w.size()) {  // byte-level words hold alphabet characters only
      const size_t start = i;
      utf8_next(w, i);
      words[k].push_back(word_to_id.at(w.substr(start, i - start)));
    }
    for (size_t j = 0; j + 1 < words[k].size(); ++j) {
      const uint64_t p = bpe_pair_key(words[k][j], words[k][j + 1]);
      pair_counts[p] += counts[k];
      where[p].push_back(static_cast<int32_t>(k));
    }
  }
  std::vector<QueuedPair> queue;
  auto flush_where = [&]() {
    for (auto& [p, ws] : where) {
      const int64_t c = pair_counts[p];
      if (c <= 0) continue;
      std::sort(ws.begin(), ws.end());
      ws.erase(std::unique(ws.begin(), ws.end()), ws.end());
      queue.push_back({c, p, std::move(ws)});
      std::push_heap(queue.begin(), queue.end(), lower_priority);
    }
    where.clear();
  };
  flush_where();

  // merges
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<PairChange> changes;
  while (static_cast<int32_t>(word_to_id.size()) < cfg.vocab_size && !queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), lower_priority);
    QueuedPair top = std::move(queue.back());
    queue.pop_back();
    const int64_t now = pair_counts[top.pair];
    if (top.count != now) {  // stale: requeue with the current count
      top.count = now;
      queue.push_back(std::move(top));
      std::push_heap(queue.begin(), queue.end(), lower_priority);
      continue;
    }
    if (top.count < 1 || cfg.min_frequency > top.count) break;
    const auto a = static_cast<int32_t>(top.pair >> 32), b = static_cast<int32_t>(top.pair & 0xFFFFFFFFu);
    const std::string merged_word = id_to_word[a] + id_to_word[b];
    add_word(merged_word);
    const int32_t merged = word_to_id.at(merged_word);
    merges.emplace_back(id_to_word[a], id_to_word[b]);
    for (int32_t k : top.words) {
      changes.clear();
      merge_in_word(words[k], a, b, merged, changes);
      for (const PairChange& c : changes) {
        pair_counts[c.pair] += c.delta * counts[k];
        if (c.delta > 0) where[c.pair].push_back(k);
      }
    }
    flush_where();
  }

  // assemble the tokenizer.json tree and load it like any other
  ojson vocab = ojson::object();
  for (size_t id = 0; id < id_to_word.size(); ++id) vocab[id_to_word[id]] = id;
  ojson merge_list = ojson::array();
  for (const auto& [l, r] : merges) merge_list.push_back(ojson::array({l, r}));
  ojson added = ojson::array();
  for (const std::string& s : cfg.special_tokens)
    added.push_back({{"id", word_to_id.at(s)},
                     {"content", s},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  ojson post = nullptr;
  if (!cfg.bos_token.empty()) {
    const int32_t bos = word_to_id.at(cfg.bos_token);
    auto special = [&](const std::string& id) { return ojson{{"SpecialToken", {{"id", id}, {"type_id", 0}}}}; };
    auto seq = [](const char* id, int type) { return ojson{{"Sequence", {{"id", id}, {"type_id", type}}}}; };
    post = {{"type", "TemplateProcessing"},
            {"single", ojson::array({special(cfg.bos_token), seq("A", 0)})},
            {"pair", ojson::array({special(cfg.bos_token), seq("A", 0), special(cfg.bos_token), seq("B", 1)})},
            {"special_tokens",
             {{cfg.bos_token, {{"id", cfg.bos_token}, {"ids", ojson::array({bos})}, {"tokens", ojson::array({cfg.bos_token})}}}}}};
  }
  ojson root;
  root["version"] = "1.0";
  root["truncation"] = nullptr;
  root["padding"] = nullptr;
  root["added_tokens"] = std::move(added);
  root["normalizer"] = nullptr;
  root["pre_tokenizer"] = pretok.to_json();
  root["post_processor"] = std::move(post);
  root["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  root["model"] = {{"type", "BPE"},
                   {"dropout", nullptr},
                   {"unk_token", nullptr},
                   {"continuing_subword_prefix", nullptr},
                   {"end_of_word_suffix", nullptr},
                   {"fuse_unk", false},
                   {"byte_fallback", false},
                   {"ignore_merges", cfg.ignore_merges},
                   {"vocab", std::move(vocab)},
                   {"merges", std::move(merge_list)}};
  return Tokenizer(tokenizer_from_json(root, "train_bpe"));
}

}  // namespace nemotron::data
