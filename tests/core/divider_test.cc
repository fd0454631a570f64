#include "core/divider.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>

namespace rlimit::core {
namespace {

constexpr std::uint64_t kLargest = std::numeric_limits<std::uint64_t>::max();

void expect_exact(const Divider& divider, std::uint64_t n) {
  const std::uint64_t d = divider.divisor();
  ASSERT_EQ(divider.quotient(n), n / d) << n << " / " << d;
  ASSERT_EQ(divider.quotient_rounded_up(n), n / d + (n % d != 0 ? 1 : 0)) << n << " / " << d;
}

// A value over every magnitude, not just large ones; at least `floor`.
std::uint64_t any_magnitude(std::mt19937_64& rng, std::uint64_t floor) {
  return std::max(floor, rng() >> (rng() % 64));
}

TEST(DividerTest, ExactAtTheEdges) {
  const std::uint64_t half = std::uint64_t{1} << 63;
  for (const std::uint64_t d :
       {std::uint64_t{1}, std::uint64_t{2}, std::uint64_t{3}, std::uint64_t{7}, std::uint64_t{10},
        std::uint64_t{1000}, std::uint64_t{1'000'000}, std::uint64_t{1} << 50,
        (std::uint64_t{1} << 50) - 1, half - 1, half, half + 1, kLargest - 1, kLargest}) {
    const Divider divider(d);
    for (const std::uint64_t n : {std::uint64_t{0}, std::uint64_t{1}, d - 1, d, d + 1, 2 * d - 1,
                                  2 * d, kLargest - d, half - 1, half, kLargest - 1, kLargest}) {
      expect_exact(divider, n);
    }
  }
  EXPECT_EQ(Divider().quotient(12345), 12345u);  // divides by 1
  EXPECT_EQ(Divider().quotient_rounded_up(kLargest), kLargest);
}

TEST(DividerTest, ExactForRandomOperands) {
  std::mt19937_64 rng(11);
  for (int i = 0; i < 200'000; ++i) {
    const std::uint64_t d = any_magnitude(rng, 1);
    expect_exact(Divider(d), any_magnitude(rng, 0));
  }
}

// Multiples of the divisor and their neighbours, where floor and ceil differ
// by the correction step.
TEST(DividerTest, ExactNextToMultiples) {
  std::mt19937_64 rng(12);
  for (int i = 0; i < 50'000; ++i) {
    const std::uint64_t d = any_magnitude(rng, 1);
    const std::uint64_t most = kLargest / d;  // k * d does not overflow
    const std::uint64_t k = most == kLargest ? rng() : rng() % (most + 1);
    const Divider divider(d);
    const std::uint64_t multiple = k * d;
    expect_exact(divider, multiple);
    if (multiple > 0) expect_exact(divider, multiple - 1);
    if (kLargest - multiple >= d - 1) expect_exact(divider, multiple + (d - 1));
  }
}

}  // namespace
}  // namespace rlimit::core
