#include "core/key_table.h"

#include "core/token_bucket.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <unordered_map>

namespace rlimit::core {
namespace {

constexpr BucketParams kParams{1, 1'000'000, 1};

// A bucket whose token count names it, to check that the right one comes back.
StateCell bucket_with(std::int64_t tokens) {
  return StateCell::of(TokenBucket::full({1, 1'000'000, tokens}, 0));
}

TEST(KeyTableTest, InsertFindAndBound) {
  KeyTable table(2);
  EXPECT_EQ(table.find("a"), nullptr);
  ASSERT_NE(table.insert("a", StateCell::of(TokenBucket::full(kParams, 0))), nullptr);
  ASSERT_NE(table.insert("b", StateCell::of(TokenBucket::full(kParams, 0))), nullptr);
  EXPECT_EQ(table.insert("c", StateCell::of(TokenBucket::full(kParams, 0))), nullptr);  // full
  EXPECT_NE(table.find("a"), nullptr);
  EXPECT_EQ(table.size(), 2u);
}

// erase(key) removes exactly that key, keeps every other findable (the probe
// runs are shifted back), and prefetch is only a hint.
TEST(KeyTableTest, EraseByKeyKeepsTheRestFindable) {
  KeyTable table(1000);
  for (int i = 0; i < 500; ++i) {
    const std::string key = "k" + std::to_string(i);
    table.prefetch(key);
    ASSERT_NE(table.insert(key, bucket_with(i)), nullptr);
  }
  for (int i = 0; i < 500; i += 3) EXPECT_TRUE(table.erase("k" + std::to_string(i)));
  EXPECT_FALSE(table.erase("k0"));
  EXPECT_FALSE(table.erase("absent"));
  for (int i = 0; i < 500; ++i) {
    const std::string key = "k" + std::to_string(i);
    table.prefetch(key);
    const StateCell* b = table.find(key);
    if (i % 3 == 0) {
      EXPECT_EQ(b, nullptr) << key;
    } else {
      ASSERT_NE(b, nullptr) << key;
      EXPECT_EQ(b->as<TokenBucket>().tokens(), i);
    }
  }
  EXPECT_EQ(table.size(), 500u - 167u);
}

TEST(KeyTableTest, DuplicateAndEmptyKeysAreRefused) {
  KeyTable table(10);
  ASSERT_NE(table.insert("a", bucket_with(1)), nullptr);
  EXPECT_EQ(table.insert("a", bucket_with(2)), nullptr);
  EXPECT_EQ(table.find("a")->as<TokenBucket>().tokens(), 1);
  EXPECT_EQ(table.insert("", bucket_with(3)), nullptr);
  EXPECT_EQ(table.find(""), nullptr);
  EXPECT_EQ(table.size(), 1u);
}

TEST(KeyTableTest, LongKeysLiveOnTheHeapAndAreCounted) {
  KeyTable table(100);
  const std::string inline_key(KeyTable::kInlineKeyBytes, 'x');
  const std::string long_key(KeyTable::kInlineKeyBytes + 1, 'x');
  const std::string longer_key(300, 'y');
  ASSERT_NE(table.insert(inline_key, bucket_with(1)), nullptr);
  const std::size_t before = table.memory_bytes();
  ASSERT_NE(table.insert(long_key, bucket_with(2)), nullptr);
  ASSERT_NE(table.insert(longer_key, bucket_with(3)), nullptr);
  EXPECT_EQ(table.memory_bytes(), before + long_key.size() + longer_key.size());
  EXPECT_EQ(table.find(inline_key)->as<TokenBucket>().tokens(), 1);
  EXPECT_EQ(table.find(long_key)->as<TokenBucket>().tokens(), 2);
  EXPECT_EQ(table.find(longer_key)->as<TokenBucket>().tokens(), 3);
  // Same prefix, different length: a different key.
  EXPECT_EQ(table.find(std::string(KeyTable::kInlineKeyBytes + 2, 'x')), nullptr);
  // Erasing frees them.
  table.sweep(100, [](std::string_view key, const StateCell&) { return key.size() > 32; });
  EXPECT_EQ(table.memory_bytes(), before);
  EXPECT_EQ(table.find(long_key), nullptr);
  EXPECT_NE(table.find(inline_key), nullptr);
}

TEST(KeyTableTest, GrowsByHalfAndStaysBetweenSevenTwelfthsAndSevenEighths) {
  KeyTable table(1'000'000);
  EXPECT_EQ(table.capacity(), 0u);
  EXPECT_EQ(table.memory_bytes(), 0u);
  std::size_t growths = 0;
  for (int i = 0; i < 100'000; ++i) {
    const std::size_t before = table.capacity();
    ASSERT_NE(table.insert("key-" + std::to_string(i), bucket_with(i)), nullptr);
    ASSERT_LE(table.size() * 8, table.capacity() * 7);
    if (table.capacity() != before && before >= 1024) {
      ++growths;
      EXPECT_NEAR(static_cast<double>(table.capacity()) / static_cast<double>(before), 1.5, 0.01);
      EXPECT_GE(static_cast<double>(table.size()) / static_cast<double>(table.capacity()), 0.58);
    }
  }
  EXPECT_GE(growths, 5u);
  for (int i = 0; i < 100'000; ++i) {
    const StateCell* b = table.find("key-" + std::to_string(i));
    ASSERT_NE(b, nullptr) << i;
    EXPECT_EQ(b->as<TokenBucket>().tokens(), i);
  }
  EXPECT_EQ(table.memory_bytes(), table.capacity() * 66);
}

TEST(KeyTableTest, ReserveMeansNoGrowthForThatManyInserts) {
  KeyTable table(1000);
  for (int i = 0; i < 14; ++i) table.insert("k" + std::to_string(i), bucket_with(i));
  EXPECT_EQ(table.capacity(), 16u);  // 14 = 7/8 of 16
  EXPECT_TRUE(table.will_grow(1));
  table.reserve(3);
  EXPECT_FALSE(table.will_grow(3));
  const std::size_t capacity = table.capacity();
  StateCell* kept = table.find("k0");
  for (int i = 14; i < 17; ++i) table.insert("k" + std::to_string(i), bucket_with(i));
  EXPECT_EQ(table.capacity(), capacity);
  EXPECT_EQ(kept, table.find("k0"));  // did not move
}

TEST(KeyTableTest, SweepVisitsEveryEntryAcrossCalls) {
  KeyTable table(10'000);
  for (int i = 0; i < 1000; ++i)
    table.insert("k" + std::to_string(i), StateCell::of(TokenBucket::full(kParams, 0)));
  std::size_t erased = 0;
  // Evict the even keys; 1000 entries, 100 visits per call: a bounded number
  // of calls must reach all of them.
  for (int call = 0; call < 100 && table.size() > 500; ++call) {
    erased += table.sweep(100, [](std::string_view key, const StateCell&) {
      return std::stoi(std::string(key.substr(1))) % 2 == 0;
    });
  }
  EXPECT_EQ(erased, 500u);
  EXPECT_EQ(table.size(), 500u);
  EXPECT_EQ(table.find("k2"), nullptr);
  EXPECT_NE(table.find("k3"), nullptr);
}

TEST(KeyTableTest, SweepIsBoundedPerCall) {
  KeyTable table(10'000);
  for (int i = 0; i < 1000; ++i)
    table.insert("k" + std::to_string(i), StateCell::of(TokenBucket::full(kParams, 0)));
  std::size_t visits = 0;
  table.sweep(10, [&](std::string_view, const StateCell&) {
    ++visits;
    return false;
  });
  EXPECT_EQ(visits, 10u);
  // A sparse table: few entries in many slots still costs a bounded walk.
  table.sweep(100'000, [](std::string_view key, const StateCell&) { return key != "k7"; });
  table.sweep(100'000, [](std::string_view key, const StateCell&) { return key != "k7"; });
  ASSERT_EQ(table.size(), 1u);
  visits = 0;
  table.sweep(1, [&](std::string_view, const StateCell&) {
    ++visits;
    return false;
  });
  EXPECT_LE(visits, 1u);
}

TEST(KeyTableTest, EveryEntryIsVisitedWithinTwoPassesEvenWhileErasing) {
  // Erasing shifts later entries back; one the cursor already passed waits
  // for the next pass, but none waits longer.
  KeyTable table(100'000);
  for (int i = 0; i < 5000; ++i) table.insert("k" + std::to_string(i), bucket_with(i));
  std::set<std::string> seen;
  std::size_t calls = 0;
  // Evict every third entry seen, 64 visits per call.
  while (seen.size() < 5000 && calls < 10'000) {
    ++calls;
    table.sweep(64, [&](std::string_view key, const StateCell&) {
      const bool first_time = seen.insert(std::string(key)).second;
      return first_time && seen.size() % 3 == 0;
    });
  }
  EXPECT_EQ(seen.size(), 5000u);
  EXPECT_LE(calls, 2 * 5000 / 64 + 2);
}

TEST(KeyTableTest, ChurnThroughTheSweepKeepsProbesShort) {
  // A full table whose keys come and go as the sweep makes room for new ones
  // (the Limiter's make-room path: every visited bucket is full again, so
  // evictable). Erasing must not leave dense regions behind, or linear
  // probing slows down by orders of magnitude: sweeping in slot order made
  // runs of thousands of slots here, and a daemon 40 times slower.
  constexpr std::size_t kMaxKeys = 20'000;
  KeyTable table(kMaxKeys);
  std::uint64_t x = 88172645463325252ull;
  std::size_t longest = 0;
  for (int i = 0; i < 200'000; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const std::string key = "user-" + std::to_string(x % 1'000'000);
    if (table.find(key) != nullptr) continue;
    if (table.size() == kMaxKeys) {
      table.sweep(64, [](std::string_view, const StateCell&) { return true; });
    }
    ASSERT_NE(table.insert(key, bucket_with(1)), nullptr);
    // A dense region shows as a long run of occupied slots, which every miss
    // landing in it scans.
    if (i % 10'000 == 0) longest = std::max(longest, table.longest_run());
  }
  EXPECT_LE(longest, 300u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(table.find("absent-" + std::to_string(i)), nullptr);
}

// Random inserts, lookups and sweeps, checked against std::unordered_map.
TEST(KeyTableTest, RandomizedAgainstUnorderedMap) {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 3; ++round) {
    const std::size_t max_keys = round == 0 ? 50 : round == 1 ? 2000 : 100'000;
    KeyTable table(max_keys);
    std::unordered_map<std::string, std::int64_t> model;
    const auto random_key = [&] {
      const std::uint64_t id = rng() % (max_keys * 2);
      // Short (inline) and long (heap) keys, with binary bytes.
      std::string key = "k" + std::to_string(id);
      if (id % 5 == 0) key += std::string(40, static_cast<char>(id % 256));
      if (id % 7 == 0) key.push_back('\0');
      return key;
    };
    for (int step = 0; step < 40'000; ++step) {
      const int op = static_cast<int>(rng() % 10);
      if (op < 5) {
        const std::string key = random_key();
        const auto value = static_cast<std::int64_t>(rng() % 1000);
        StateCell* inserted = table.insert(key, bucket_with(value));
        const bool expect = model.size() < max_keys && model.count(key) == 0;
        ASSERT_EQ(inserted != nullptr, expect) << key;
        if (expect) model[key] = value;
      } else if (op < 9) {
        const std::string key = random_key();
        const StateCell* found = table.find(key);
        const auto it = model.find(key);
        ASSERT_EQ(found != nullptr, it != model.end()) << key;
        if (found != nullptr) {
          ASSERT_EQ(found->as<TokenBucket>().tokens(), it->second);
        }
      } else {
        const std::uint64_t modulus = 2 + rng() % 5;
        table.sweep(1 + rng() % 200, [&](std::string_view key, const StateCell& b) {
          EXPECT_EQ(model.at(std::string(key)), b.as<TokenBucket>().tokens());
          if (static_cast<std::uint64_t>(b.as<TokenBucket>().tokens()) % modulus != 0) return false;
          model.erase(std::string(key));
          return true;
        });
      }
      ASSERT_EQ(table.size(), model.size());
    }
    for (const auto& [key, value] : model) {
      const StateCell* found = table.find(key);
      ASSERT_NE(found, nullptr) << key;
      EXPECT_EQ(found->as<TokenBucket>().tokens(), value);
    }
  }
}

TEST(KeyTableTest, HashIsStable) {
  // The table's layout does not leave the process, but a changed hash would
  // change sweep order and benchmark figures silently: pin it.
  EXPECT_EQ(hash_key(""), hash_key(std::string_view()));
  EXPECT_NE(hash_key("a"), hash_key("b"));
  EXPECT_NE(hash_key(std::string(17, 'a')), hash_key(std::string(18, 'a')));
  std::set<std::uint64_t> distinct;
  for (int i = 0; i < 10'000; ++i) distinct.insert(hash_key("user-" + std::to_string(i)));
  EXPECT_EQ(distinct.size(), 10'000u);
}

}  // namespace
}  // namespace rlimit::core
