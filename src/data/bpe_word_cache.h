// Bounded, thread-safe cache of word -> token ids for BPE: most words of a corpus repeat, and a
// hit skips the merge loop. Sharded by hash so that batch encoding on all cores rarely contends;
// a full shard is emptied (the working set re-forms quickly), which bounds memory.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace nemotron::data {

class BpeWordCache {
 public:
  // Words of kMaxWordBytes or more are never cached (as in HF).
  static constexpr size_t kMaxWordBytes = 256;

  explicit BpeWordCache(size_t capacity) : per_shard_(capacity / kShards + 1) {}

  // Appends the cached ids of `word` to `out`; false if absent.
  bool get(std::string_view word, size_t hash, std::vector<int32_t>& out) {
    Shard& sh = shards_[hash % kShards];
    std::lock_guard<std::mutex> lock(sh.mu);
    auto it = sh.map.find(word);
    if (it == sh.map.end()) return false;
    out.insert(out.end(), it->second.begin(), it->second.end());
    return true;
  }
  void put(std::string_view word, size_t hash, const int32_t* ids, size_t n) {
    if (word.size() >= kMaxWordBytes) return;
    Shard& sh = shards_[hash % kShards];
    std::lock_guard<std::mutex> lock(sh.mu);
    if (sh.map.size() >= per_shard_) sh.map.clear();
    sh.map.try_emplace(std::string(word), ids, ids + n);
  }
  static size_t hash_of(std::string_view word) { return std::hash<std::string_view>{}(word); }

 private:
  static constexpr size_t kShards = 64;
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string, std::vector<int32_t>, Hash, std::equal_to<>> map;
  };
  std::array<Shard, kShards> shards_;
  size_t per_shard_;
};

}  // namespace nemotron::data
