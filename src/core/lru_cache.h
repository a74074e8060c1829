// A bounded map that evicts its least recently used entry: for caches keyed by shapes that vary
// from call to call (the cuBLASLt plan cache in ops/matmul_cuda.cpp sees a new M for every decode
// batch size and every MoE expert's token count), where clearing everything at a size limit would
// make every shape, hot ones included, pay its set-up again. Not thread-safe: callers lock.
#pragma once
#include <cstddef>
#include <functional>
#include <list>
#include <unordered_map>
#include <utility>

namespace nemotron {

template <class K, class V, class Hash = std::hash<K>>
class LruCache {
 public:
  explicit LruCache(size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}

  // The value for `k` (now the most recently used), or null.
  V* find(const K& k) {
    auto it = index_.find(k);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return &it->second->second;
  }
  // Stores `v` under `k` (replacing an entry of that key) as the most recently used, evicting the
  // least recently used one when full. The returned reference stays valid until that entry is
  // evicted or replaced.
  V& insert(const K& k, V v) {
    if (auto it = index_.find(k); it != index_.end()) {
      order_.erase(it->second);
      index_.erase(it);
    }
    if (index_.size() >= capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
      ++evictions_;
    }
    order_.emplace_front(k, std::move(v));
    index_.emplace(k, order_.begin());
    return order_.front().second;
  }
  size_t size() const { return index_.size(); }
  size_t capacity() const { return capacity_; }
  size_t evictions() const { return evictions_; }

 private:
  using Entry = std::pair<K, V>;
  size_t capacity_;
  size_t evictions_ = 0;
  std::list<Entry> order_;  // most recently used first
  std::unordered_map<K, typename std::list<Entry>::iterator, Hash> index_;
};

}  // namespace nemotron
