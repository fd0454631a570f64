#include "core/divider.h"

#include <gtest/gtest.h>

#include <random>

namespace rlimit::core {
namespace {

void expect_exact(const Divider& divider, std::uint64_t n) {
  const std::uint64_t d = divider.divisor();
  ASSERT_EQ(divider.quotient(n), n / d) << n << " / " << d;
  ASSERT_EQ(divider.quotient_rounded_up(n), n / d + (n % d != 0 ? 1 : 0)) << n << " / " << d;
}

TEST(DividerTest, ExactAtTheEdges) {
  const std::uint64_t largest = (std::uint64_t{1} << 63) - 1;
  for (const std::uint64_t d :
       {std::uint64_t{1}, std::uint64_t{2}, std::uint64_t{3}, std::uint64_t{7}, std::uint64_t{10},
        std::uint64_t{1000}, std::uint64_t{1'000'000}, std::uint64_t{1} << 50,
        (std::uint64_t{1} << 50) - 1, largest}) {
    const Divider divider(d);
    for (const std::uint64_t n : {std::uint64_t{0}, std::uint64_t{1}, d - 1, d, d + 1, 2 * d - 1,
                                  2 * d, largest - d, largest - 1, largest}) {
      if (n <= largest) expect_exact(divider, n);
    }
  }
  EXPECT_EQ(Divider().quotient(12345), 12345u);  // divides by 1
}

TEST(DividerTest, ExactForRandomOperands) {
  std::mt19937_64 rng(11);
  for (int i = 0; i < 200'000; ++i) {
    // Divisors and numerators over every magnitude, not just large ones.
    const std::uint64_t d = 1 + (rng() >> (1 + rng() % 63));
    const std::uint64_t n = rng() >> (1 + rng() % 63);
    expect_exact(Divider(d), n);
  }
}

// Multiples of the divisor and their neighbours, where floor and ceil differ
// by the correction step.
TEST(DividerTest, ExactNextToMultiples) {
  std::mt19937_64 rng(12);
  for (int i = 0; i < 50'000; ++i) {
    const std::uint64_t d = 1 + (rng() >> (1 + rng() % 63));
    const std::uint64_t k = rng() % ((std::uint64_t{1} << 63) / d);
    const Divider divider(d);
    for (const std::uint64_t n : {k * d, k * d + d - 1, k * d == 0 ? 0 : k * d - 1}) {
      expect_exact(divider, n);
    }
  }
}

}  // namespace
}  // namespace rlimit::core
