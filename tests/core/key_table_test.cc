#include "core/key_table.h"

#include <gtest/gtest.h>

#include <string>

namespace rlimit::core {
namespace {

constexpr BucketParams kParams{1, 1'000'000, 1};

TEST(KeyTableTest, InsertFindAndBound) {
  KeyTable table(2);
  EXPECT_EQ(table.find("a"), nullptr);
  ASSERT_NE(table.insert("a", TokenBucket::full(kParams, 0)), nullptr);
  ASSERT_NE(table.insert("b", TokenBucket::full(kParams, 0)), nullptr);
  EXPECT_EQ(table.insert("c", TokenBucket::full(kParams, 0)), nullptr);  // full
  EXPECT_NE(table.find("a"), nullptr);
  EXPECT_EQ(table.size(), 2u);
}

TEST(KeyTableTest, SweepVisitsEveryEntryAcrossCalls) {
  KeyTable table(10'000);
  for (int i = 0; i < 1000; ++i) table.insert("k" + std::to_string(i), TokenBucket::full(kParams, 0));
  std::size_t erased = 0;
  // Evict the even keys; 1000 entries, 100 visits per call: a bounded number
  // of calls must reach all of them.
  for (int call = 0; call < 100 && table.size() > 500; ++call) {
    erased += table.sweep(100, [](std::string_view key, const TokenBucket&) {
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
  for (int i = 0; i < 1000; ++i) table.insert("k" + std::to_string(i), TokenBucket::full(kParams, 0));
  std::size_t visits = 0;
  table.sweep(10, [&](std::string_view, const TokenBucket&) {
    ++visits;
    return false;
  });
  // Whole hash buckets are visited, so a few more than asked is possible.
  EXPECT_GE(visits, 10u);
  EXPECT_LE(visits, 20u);
}

}  // namespace
}  // namespace rlimit::core
