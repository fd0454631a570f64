#include "load/key_picker.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace rlimit::bench {
namespace {

TEST(KeyPickerTest, UniformStaysInRangeAndCoversIt) {
  KeyPicker picker(100, Skew::kUniform, 1.0, 1);
  std::vector<int> seen(100);
  for (int i = 0; i < 100'000; ++i) {
    const std::uint64_t k = picker.next();
    ASSERT_LT(k, 100u);
    ++seen[k];
  }
  for (int count : seen) EXPECT_NEAR(count, 1000, 200);
}

TEST(KeyPickerTest, ZipfFollowsOneOverRank) {
  constexpr std::uint64_t kKeys = 1000;
  KeyPicker picker(kKeys, Skew::kZipf, 1.0, 2);
  std::vector<int> seen(kKeys);
  constexpr int kDraws = 400'000;
  for (int i = 0; i < kDraws; ++i) {
    const std::uint64_t k = picker.next();
    ASSERT_LT(k, kKeys);
    ++seen[k];
  }
  double harmonic = 0;
  for (std::uint64_t k = 1; k <= kKeys; ++k) harmonic += 1.0 / static_cast<double>(k);
  for (std::uint64_t rank : {1u, 2u, 10u, 100u}) {
    const double expected = kDraws / (static_cast<double>(rank) * harmonic);
    EXPECT_NEAR(seen[rank - 1], expected, 5 * std::sqrt(expected) + 0.02 * expected) << rank;
  }
}

TEST(KeyPickerTest, SequentialWalksEveryKeyFromItsStart) {
  KeyPicker picker(5, Skew::kSequential, 1.0, 3, 3);
  std::vector<std::uint64_t> keys;
  for (int i = 0; i < 7; ++i) keys.push_back(picker.next());
  EXPECT_EQ(keys, (std::vector<std::uint64_t>{3, 4, 0, 1, 2, 3, 4}));
}

TEST(KeyPickerTest, SameSeedSameKeys) {
  KeyPicker a(1'000'000, Skew::kZipf, 0.9, 42), b(1'000'000, Skew::kZipf, 0.9, 42);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(a.next(), b.next());
}

TEST(KeyPickerTest, Names) {
  std::string name;
  key_name(0, name);
  EXPECT_EQ(name, "bench-0");
  key_name(1234567, name);
  EXPECT_EQ(name, "bench-1234567");
  Skew skew;
  EXPECT_TRUE(parse_skew("zipf", skew));
  EXPECT_EQ(skew, Skew::kZipf);
  EXPECT_FALSE(parse_skew("pareto", skew));
}

}  // namespace
}  // namespace rlimit::bench
