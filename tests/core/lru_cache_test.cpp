// LruCache (core/lru_cache.h), the bounded cache behind the cuBLASLt plan cache: a full cache
// evicts only its least recently used entry, so shapes in use survive a stream of new ones.
#include "core/lru_cache.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace nemotron {
namespace {

TEST(LruCache, EvictsTheLeastRecentlyUsedEntryOnly) {
  LruCache<int, std::string> c(3);
  c.insert(1, "one");
  c.insert(2, "two");
  c.insert(3, "three");
  ASSERT_NE(c.find(1), nullptr);  // 1 is now the most recent; 2 the least
  c.insert(4, "four");
  EXPECT_EQ(c.size(), 3u);
  EXPECT_EQ(c.evictions(), 1u);
  EXPECT_EQ(c.find(2), nullptr);
  ASSERT_NE(c.find(1), nullptr);
  EXPECT_EQ(*c.find(1), "one");
  EXPECT_EQ(*c.find(3), "three");
  EXPECT_EQ(*c.find(4), "four");
}

TEST(LruCache, AHotKeySurvivesAStreamOfNewKeys) {
  // The decode pattern: the same few shapes every step, and a new one (a batch size, an expert's
  // token count) now and then. Clearing at the limit would drop the hot ones; LRU never does.
  LruCache<int, std::unique_ptr<int>> c(8);
  for (int hot = 0; hot < 4; ++hot) c.insert(hot, std::make_unique<int>(hot));
  for (int fresh = 100; fresh < 1100; ++fresh) {
    for (int hot = 0; hot < 4; ++hot) ASSERT_NE(c.find(hot), nullptr) << "hot key " << hot << " at " << fresh;
    if (!c.find(fresh)) c.insert(fresh, std::make_unique<int>(fresh));
  }
  EXPECT_EQ(c.size(), 8u);
  EXPECT_EQ(c.evictions(), 1000u - 4u);
}

TEST(LruCache, InsertReplacesAnExistingKeyWithoutEvicting) {
  LruCache<int, int> c(2);
  c.insert(1, 10);
  c.insert(2, 20);
  c.insert(1, 11);
  EXPECT_EQ(c.size(), 2u);
  EXPECT_EQ(c.evictions(), 0u);
  EXPECT_EQ(*c.find(1), 11);
  c.insert(3, 30);  // 2 is the least recent now
  EXPECT_EQ(c.find(2), nullptr);
  EXPECT_EQ(*c.find(1), 11);
}

}  // namespace
}  // namespace nemotron
