#include "core/token_bucket.h"

#include <gtest/gtest.h>

#include <random>

#include "core/time.h"

namespace rlimit::core {
namespace {

constexpr BucketParams kTenPerSecond{10, kUsPerSecond, 10};

TEST(TokenBucketTest, StartsFullAndTakes) {
  TokenBucket b = TokenBucket::full(kTenPerSecond, 0);
  EXPECT_EQ(b.tokens(), 10);
  EXPECT_TRUE(b.allows(10));
  EXPECT_FALSE(b.allows(11));
  b.charge(10);
  EXPECT_EQ(b.tokens(), 0);
  EXPECT_FALSE(b.allows(1));
}

// Balances learned from peers only ever raise, never past the burst, and
// drop the fraction (a raise to n whole tokens is at most n).
TEST(TokenBucketTest, RaiseToNeverLowersAndStopsAtTheBurst) {
  const BucketParams p{10, kUsPerSecond, 10};
  TokenBucket b = TokenBucket::full(p, 0);
  b.charge(15);
  EXPECT_EQ(b.tokens(), -5);
  EXPECT_EQ(b.raise_to(p, -7), 0);
  EXPECT_EQ(b.raise_to(p, -5), 0);
  EXPECT_EQ(b.tokens(), -5);
  EXPECT_EQ(b.raise_to(p, 2), 7);
  EXPECT_EQ(b.tokens(), 2);
  b.refill(p, kUsPerSecond / 20);  // half a token
  EXPECT_EQ(b.raise_to(p, 2), 0);  // 2.5 is above 2 already
  EXPECT_EQ(b.raise_to(p, 3), 1);
  EXPECT_EQ(b.retry_after_us(p, 4), kUsPerSecond / 10);  // the fraction went
  EXPECT_EQ(b.raise_to(p, 1'000), 7);
  EXPECT_TRUE(b.is_full(p));
}

// What a bucket accrues over a span, from the fraction it holds: the whole
// tokens and the fraction refill() would add below the burst, and past it
// too (not capped), the fraction in 2^-16.
TEST(TokenBucketTest, AccrualOverASpanStartsFromTheFractionHeld) {
  TokenBucket b = TokenBucket::full(kTenPerSecond, 0);
  b.charge(10);
  b.refill(kTenPerSecond, 37'000);  // 0.37 of a token held
  ASSERT_EQ(b.tokens(), 0);
  const TokenBucket::Accrual a = b.accrual_over(kTenPerSecond, 100'000, 16);
  EXPECT_EQ(a.tokens, 1);                // 1.37 tokens
  EXPECT_EQ(a.fraction, 24'248u);        // floor(0.37 x 65536)
  TokenBucket later = b;
  later.refill(kTenPerSecond, 137'000);
  EXPECT_EQ(later.tokens(), a.tokens);
  EXPECT_EQ(later.retry_after_us(kTenPerSecond, 2), 63'000);  // 0.37 held at 137 ms
  EXPECT_EQ(b.accrual_over(kTenPerSecond, 10 * kUsPerSecond, 16).tokens, 100);  // not capped
  EXPECT_EQ(b.accrual_over(kTenPerSecond, 0, 16).fraction, 24'248u);
}

TEST(TokenBucketTest, RefillsAtBoundaries) {
  TokenBucket b = TokenBucket::full(kTenPerSecond, 0);
  b.charge(10);
  b.refill(kTenPerSecond, 99'999);  // one token takes 100 ms
  EXPECT_EQ(b.tokens(), 0);
  EXPECT_EQ(b.retry_after_us(kTenPerSecond, 1), 1);
  b.refill(kTenPerSecond, 100'000);
  EXPECT_EQ(b.tokens(), 1);
  EXPECT_EQ(b.retry_after_us(kTenPerSecond, 1), 0);
  b.refill(kTenPerSecond, 10 * kUsPerSecond);
  EXPECT_EQ(b.tokens(), 10);  // capped at burst
  EXPECT_EQ(b.reset_after_us(kTenPerSecond), 0);
}

TEST(TokenBucketTest, ManySmallRefillsNeitherMintNorLose) {
  // 7 tokens per 3 seconds: no integer number of microseconds per token.
  const BucketParams params{7, 3 * kUsPerSecond, 1'000'000};
  TokenBucket stepped = TokenBucket::full(params, 0);
  stepped.charge(2'000'000);  // into debt: refill must be exact below zero too
  TokenBucket once = stepped;
  std::mt19937_64 rng(42);
  TimeUs now = 0;
  const TimeUs end = 3600 * kUsPerSecond;  // one hour
  while (now < end) {
    now = std::min(end, now + static_cast<TimeUs>(rng() % 50'000));
    stepped.refill(params, now);
  }
  once.refill(params, end);
  EXPECT_EQ(stepped.tokens(), once.tokens());
  EXPECT_EQ(stepped.tokens(), -1'000'000 + 7 * 1200);  // exactly 8400 tokens accrued
}

// Refill takes shortcuts (less than a token accrued, enough to fill) around
// its division: against an exact model of the balance in 1/period_us units,
// over random rules, steps and charges, nothing is minted or lost.
TEST(TokenBucketTest, RefillMatchesAnExactModel) {
  std::mt19937_64 rng(7);
  for (int rule = 0; rule < 200; ++rule) {
    const BucketParams params{static_cast<std::int64_t>(rng() % 5000),
                              1 + static_cast<std::int64_t>(rng() % (10 * kUsPerSecond)),
                              static_cast<std::int64_t>(rng() % 200)};
    TokenBucket bucket = TokenBucket::full(params, 0);
    const __int128 full = static_cast<__int128>(params.burst) * params.period_us;
    __int128 balance = full;  // exact, in units
    TimeUs now = 0;
    for (int step = 0; step < 500; ++step) {
      const TimeUs dt =
          static_cast<TimeUs>(rng() % 4 == 0 ? rng() % (20 * kUsPerSecond) : rng() % 2000);
      now += dt;
      bucket.refill(params, now);
      if (balance < full) {
        balance = std::min<__int128>(full, balance + static_cast<__int128>(dt) * params.limit);
      }
      const std::int64_t cost = static_cast<std::int64_t>(rng() % 5);
      if (rng() % 2 == 0) {
        bucket.charge(cost);
        balance -= static_cast<__int128>(cost) * params.period_us;
      }
      // Floor of the balance in whole tokens.
      __int128 whole = balance / params.period_us;
      if (balance < 0 && balance % params.period_us != 0) --whole;
      ASSERT_EQ(bucket.tokens(), static_cast<std::int64_t>(whole)) << rule << " " << step;
      if (params.limit > 0) {
        const __int128 missing = full - balance;
        const __int128 reset = missing <= 0 ? 0 : (missing + params.limit - 1) / params.limit;
        ASSERT_EQ(bucket.reset_after_us(params), static_cast<std::int64_t>(reset))
            << rule << " " << step;
        // The precomputed divider gives the same waits as the division.
        const Divider limit_divider(static_cast<std::uint64_t>(params.limit));
        ASSERT_EQ(bucket.reset_after_us(params, &limit_divider), static_cast<std::int64_t>(reset))
            << rule << " " << step;
        for (std::int64_t wanted = 0; wanted < 6; ++wanted) {
          ASSERT_EQ(bucket.retry_after_us(params, wanted, &limit_divider),
                    bucket.retry_after_us(params, wanted))
              << rule << " " << step;
        }
      }
    }
  }
}

// A limit of 0 never refills: the Limiter passes Divider() (divides by 1)
// for it, and the waits must still say "never".
TEST(TokenBucketTest, ZeroLimitNeverRefillsWithADivider) {
  const BucketParams params{0, kUsPerSecond, 5};
  TokenBucket bucket = TokenBucket::full(params, 0);
  bucket.charge(7);
  bucket.refill(params, 10 * kUsPerSecond);
  EXPECT_EQ(bucket.tokens(), -2);
  const Divider by_one;
  EXPECT_EQ(bucket.reset_after_us(params, &by_one), -1);
  EXPECT_EQ(bucket.retry_after_us(params, 1, &by_one), -1);
  EXPECT_EQ(bucket.reset_after_us(params), -1);
}

TEST(TokenBucketTest, NegativeBalanceIsRepaidBeforeAllowing) {
  TokenBucket b = TokenBucket::full(kTenPerSecond, 0);
  b.charge(25);  // remote consumption can overdraw
  EXPECT_EQ(b.tokens(), -15);
  EXPECT_FALSE(b.allows(0));
  EXPECT_EQ(b.retry_after_us(kTenPerSecond, 1), 1'600'000);  // 16 tokens at 100 ms each
  b.refill(kTenPerSecond, 1'500'000);
  EXPECT_EQ(b.tokens(), 0);
  EXPECT_TRUE(b.allows(0));
  EXPECT_FALSE(b.allows(1));
  EXPECT_EQ(b.reset_after_us(kTenPerSecond), kUsPerSecond);
}

TEST(TokenBucketTest, CostAboveBurstNeverSucceeds) {
  TokenBucket b = TokenBucket::full(kTenPerSecond, 0);
  EXPECT_FALSE(b.allows(11));
  EXPECT_EQ(b.retry_after_us(kTenPerSecond, 11), -1);
}

TEST(TokenBucketTest, ZeroLimitNeverRefills) {
  const BucketParams blocked{0, kUsPerSecond, 0};
  TokenBucket b = TokenBucket::full(blocked, 0);
  EXPECT_FALSE(b.allows(1));
  EXPECT_TRUE(b.allows(0));
  EXPECT_EQ(b.retry_after_us(blocked, 1), -1);
  const BucketParams once{0, kUsPerSecond, 1};
  TokenBucket c = TokenBucket::full(once, 0);
  c.charge(1);
  c.refill(once, 1000 * kUsPerSecond);
  EXPECT_EQ(c.tokens(), 0);
  EXPECT_EQ(c.reset_after_us(once), -1);
}

TEST(TokenBucketTest, ClockSteppingBackMintsNothing) {
  TokenBucket b = TokenBucket::full(kTenPerSecond, 10 * kUsPerSecond);
  b.charge(10);
  b.refill(kTenPerSecond, 5 * kUsPerSecond);  // stepped back 5 s
  EXPECT_EQ(b.tokens(), 0);
  EXPECT_EQ(b.last_refill_us(), 10 * kUsPerSecond);
  b.refill(kTenPerSecond, 10 * kUsPerSecond + 100'000);  // refill resumes from the latest time
  EXPECT_EQ(b.tokens(), 1);
}

TEST(TokenBucketTest, HugeAndTinyPeriods) {
  // A yearly quota of 1e12: arithmetic stays exact and in range.
  const BucketParams yearly{1'000'000'000'000, 365LL * 86400 * kUsPerSecond, 1'000'000'000'000};
  TokenBucket y = TokenBucket::full(yearly, 0);
  y.charge(1'000'000'000'000);
  y.refill(yearly, 365LL * 86400 * kUsPerSecond / 2);
  EXPECT_EQ(y.tokens(), 500'000'000'000);
  // One token per microsecond.
  const BucketParams fast{1, 1, 5};
  TokenBucket f = TokenBucket::full(fast, 0);
  f.charge(5);
  f.refill(fast, 3);
  EXPECT_EQ(f.tokens(), 3);
  // The largest accepted values do not overflow.
  const BucketParams extreme{kMaxTokens, kMaxPeriodUs, kMaxTokens};
  ASSERT_EQ(validate(extreme), nullptr);
  TokenBucket e = TokenBucket::full(extreme, 0);
  e.charge(kMaxTokens);
  e.charge(kMaxTokens);
  EXPECT_EQ(e.tokens(), -kMaxTokens);
  EXPECT_GT(e.retry_after_us(extreme, 1), 0);
  e.refill(extreme, kMaxPeriodUs);
  EXPECT_EQ(e.tokens(), 0);
}

TEST(TokenBucketTest, ValidateNamesTheProblem) {
  EXPECT_NE(validate({-1, kUsPerSecond, 1}), nullptr);
  EXPECT_NE(validate({1, 0, 1}), nullptr);
  EXPECT_NE(validate({1, kUsPerSecond, -1}), nullptr);
  EXPECT_NE(validate({kMaxTokens + 1, kUsPerSecond, 1}), nullptr);
  EXPECT_NE(validate({1, kMaxPeriodUs + 1, 1}), nullptr);
  EXPECT_EQ(validate({0, 1, 0}), nullptr);
}

}  // namespace
}  // namespace rlimit::core
