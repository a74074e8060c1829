// A flat hash map from a token pair (left id, right id) to a value, for the BPE merge table, which
// the merge loop probes several times per symbol: open addressing with linear probing, keys packed
// into one 64-bit word, no deletion. Ids are < 2^31, so the all-ones key marks an empty slot.
#pragma once
#include <cstdint>
#include <vector>

namespace nemotron::data {

inline uint64_t bpe_pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

template <class V>
class BpePairMap {
 public:
  // Inserts or overwrites.
  void set(uint64_t key, const V& v) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    Slot& s = find_slot(key);
    if (s.key == kEmpty) {
      s.key = key;
      ++size_;
    }
    s.value = v;
  }
  const V* find(uint64_t key) const {
    if (slots_.empty()) return nullptr;
    size_t i = index(key);
    while (true) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == kEmpty) return nullptr;
      i = (i + 1) & mask_;
    }
  }
  size_t size() const { return size_; }
  template <class F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_)
      if (s.key != kEmpty) f(s.key, s.value);
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  struct Slot {
    uint64_t key = kEmpty;
    V value{};
  };
  size_t index(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  Slot& find_slot(uint64_t key) {
    size_t i = index(key);
    while (slots_[i].key != key && slots_[i].key != kEmpty) i = (i + 1) & mask_;
    return slots_[i];
  }
  void grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    const size_t cap = old.empty() ? 64 : 2 * old.size();
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    shift_ = 64;
    for (size_t c = cap; c > 1; c >>= 1) --shift_;
    size_ = 0;
    for (const Slot& s : old)
      if (s.key != kEmpty) {
        find_slot(s.key) = s;
        ++size_;
      }
  }

  std::vector<Slot> slots_;
  size_t size_ = 0, mask_ = 0;
  int shift_ = 64;
};

}  // namespace nemotron::data
