#include "core/algorithms/leaky_bucket.h"

#include <gtest/gtest.h>

#include <random>

#include "core/time.h"
#include "test_support.h"

namespace rlimit::core::algorithms {
namespace {

using Mode = LeakyBucket::Mode;

// nginx `limit_req zone=... rate=1r/s burst=5 nodelay`: capacity 6.
TEST(LeakyBucketTest, MeterIsNginxNodelay) {
  const LeakyBucket::Params p{1, kUsPerSecond, 6, Mode::kMeter};
  LeakyBucket::State s = LeakyBucket::fresh(p, 0);
  for (int i = 0; i < 6; ++i) {
    const Verdict v = LeakyBucket::evaluate(s, p, 1, 0);
    ASSERT_TRUE(v.allowed) << i;
    EXPECT_EQ(v.delay_us, 0);
    EXPECT_EQ(v.remaining, 5 - i);
    LeakyBucket::commit(s, p, 1, 0);
  }
  const Verdict full = LeakyBucket::evaluate(s, p, 1, 0);
  EXPECT_FALSE(full.allowed);  // nginx: 503 for the 7th
  EXPECT_EQ(full.retry_after_us, kUsPerSecond);
  EXPECT_EQ(full.reset_after_us, 6 * kUsPerSecond);
  EXPECT_FALSE(LeakyBucket::evaluate(s, p, 1, 999'999).allowed);
  EXPECT_TRUE(LeakyBucket::evaluate(s, p, 1, kUsPerSecond).allowed);
  // A steady 1 r/s passes forever once the burst is spent.
  for (int i = 1; i <= 10; ++i) {
    ASSERT_TRUE(LeakyBucket::evaluate(s, p, 1, i * kUsPerSecond).allowed);
    LeakyBucket::commit(s, p, 1, i * kUsPerSecond);
    ASSERT_FALSE(LeakyBucket::evaluate(s, p, 1, i * kUsPerSecond).allowed);
  }
}

// nginx without nodelay: the burst is queued and released at the rate.
TEST(LeakyBucketTest, ShaperDelaysLikeNginx) {
  const LeakyBucket::Params p{1, kUsPerSecond, 6, Mode::kShaper};
  LeakyBucket::State s = LeakyBucket::fresh(p, 0);
  for (int i = 0; i < 6; ++i) {
    const Verdict v = LeakyBucket::evaluate(s, p, 1, 0);
    ASSERT_TRUE(v.allowed) << i;
    EXPECT_EQ(v.delay_us, i * kUsPerSecond);  // 0 s, 1 s, ..., 5 s
    LeakyBucket::commit(s, p, 1, 0);
  }
  const Verdict full = LeakyBucket::evaluate(s, p, 1, 0);
  EXPECT_FALSE(full.allowed);
  EXPECT_EQ(full.retry_after_us, kUsPerSecond);
  // Half a second later the queue has drained by half a request.
  const Verdict later = LeakyBucket::evaluate(s, p, 1, 1'500'000);
  EXPECT_TRUE(later.allowed);
  EXPECT_EQ(later.delay_us, 4'500'000);
}

TEST(LeakyBucketTest, ShaperRefusesWaitsAboveMaxDelay) {
  const LeakyBucket::Params p{1, kUsPerSecond, 100, Mode::kShaper, 2'500'000};
  LeakyBucket::State s = LeakyBucket::fresh(p, 0);
  for (int i = 0; i < 3; ++i) {
    const Verdict v = LeakyBucket::evaluate(s, p, 1, 0);
    ASSERT_TRUE(v.allowed);
    EXPECT_EQ(v.delay_us, i * kUsPerSecond);
    LeakyBucket::commit(s, p, 1, 0);
  }
  const Verdict v = LeakyBucket::evaluate(s, p, 1, 0);  // would wait 3 s
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.delay_us, 3 * kUsPerSecond);  // what it would wait, for soft mode
  EXPECT_EQ(v.retry_after_us, 500'000);
  EXPECT_EQ(v.excess, 1);  // half a request too late, rounded up
  EXPECT_TRUE(LeakyBucket::evaluate(s, p, 1, 500'000).allowed);
  // A large request waits only for the water ahead of it.
  const Verdict big = LeakyBucket::evaluate(s, p, 50, 500'000);
  EXPECT_TRUE(big.allowed);
  EXPECT_EQ(big.delay_us, 2'500'000);
}

// The meter against an obviously correct dripping bucket, for any rate.
TEST(LeakyBucketTest, MeterMatchesADrippingBucket) {
  std::mt19937_64 rng(21);
  for (int trial = 0; trial < 100; ++trial) {
    const LeakyBucket::Params p{1 + static_cast<std::int64_t>(rng() % 1000),
                                1 + static_cast<std::int64_t>(rng() % 3'000'000),
                                static_cast<std::int64_t>(rng() % 12), Mode::kMeter};
    // Level in ticks of 1/limit us: drains `limit` ticks per us; a unit is
    // `period_us` ticks.
    const __int128 size = static_cast<__int128>(p.capacity) * p.period_us;
    __int128 level = 0;
    TimeUs last = 0;
    TimeUs now = 0;
    LeakyBucket::State s = LeakyBucket::fresh(p, now);
    const std::int64_t step = 2 * p.period_us / p.limit + 2;
    for (int i = 0; i < 400; ++i) {
      now += static_cast<TimeUs>(rng() % step);
      level = std::max<__int128>(0, level - static_cast<__int128>(now - last) * p.limit);
      last = now;
      const std::int64_t cost = static_cast<std::int64_t>(rng() % (p.capacity + 2));
      const __int128 poured = static_cast<__int128>(cost) * p.period_us;
      const bool fits = level + poured <= size;
      const Verdict v = LeakyBucket::evaluate(s, p, cost, now);
      ASSERT_EQ(v.allowed, fits) << "trial " << trial << " step " << i;
      ASSERT_EQ(v.remaining,
                static_cast<std::int64_t>((size - level - (fits ? poured : 0)) / p.period_us));
      if (fits) {
        level += poured;
        LeakyBucket::commit(s, p, cost, now);
      }
    }
  }
}

// The shaper against a queue in front of a server that serves one unit per
// interval: a request starts when the server is free of the work ahead of
// it. The bucket's level is that outstanding work.
TEST(LeakyBucketTest, ShaperMatchesAQueueInFrontOfAServer) {
  std::mt19937_64 rng(22);
  for (int trial = 0; trial < 100; ++trial) {
    const std::int64_t interval = 1 + static_cast<std::int64_t>(rng() % 100'000);
    const std::int64_t capacity = static_cast<std::int64_t>(rng() % 12);
    const std::int64_t max_delay =
        rng() % 2 == 0 ? -1 : static_cast<std::int64_t>(rng() % (capacity * interval + 1));
    const LeakyBucket::Params p{1, interval, capacity, Mode::kShaper, max_delay};
    TimeUs busy_until = 0;  // the server finishes the queued work then
    TimeUs now = 0;
    LeakyBucket::State s = LeakyBucket::fresh(p, now);
    for (int i = 0; i < 400; ++i) {
      now += static_cast<TimeUs>(rng() % (2 * interval + 1));
      const std::int64_t cost = static_cast<std::int64_t>(rng() % (capacity + 2));
      const TimeUs start = std::max(now, busy_until);
      const TimeUs finish = start + cost * interval;
      const bool fits =
          finish - now <= capacity * interval && (max_delay < 0 || start - now <= max_delay);
      const Verdict v = LeakyBucket::evaluate(s, p, cost, now);
      ASSERT_EQ(v.allowed, fits) << "trial " << trial << " step " << i;
      ASSERT_EQ(v.delay_us, start - now);
      if (fits) {
        busy_until = finish;
        LeakyBucket::commit(s, p, cost, now);
      }
    }
  }
}

TEST(LeakyBucketTest, RemoteChargesOverflowAndDrain) {
  const LeakyBucket::Params p{10, kUsPerSecond, 10, Mode::kMeter};
  LeakyBucket::State s = LeakyBucket::fresh(p, 0);
  LeakyBucket::charge_remote(s, p, 30, 0);  // 20 above the brim
  const Verdict v = LeakyBucket::evaluate(s, p, 1, 0);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.retry_after_us, 2'100'000);
  EXPECT_EQ(v.excess, 21);
  EXPECT_EQ(v.reset_after_us, 3 * kUsPerSecond);
  EXPECT_TRUE(LeakyBucket::evaluate(s, p, 1, 2'100'000).allowed);
  EXPECT_TRUE(LeakyBucket::is_idle(s, p, 3 * kUsPerSecond));
  // A shaper in debt makes local requests wait for the remote work too.
  const LeakyBucket::Params shaper{10, kUsPerSecond, 10, Mode::kShaper};
  LeakyBucket::State q = LeakyBucket::fresh(shaper, 0);
  LeakyBucket::charge_remote(q, shaper, 5, 0);
  EXPECT_EQ(LeakyBucket::evaluate(q, shaper, 1, 0).delay_us, 500'000);
}

TEST(LeakyBucketTest, EdgesZeroCostsHugePeriodsAndClockSteps) {
  const LeakyBucket::Params p{3, 10 * kUsPerSecond, 2, Mode::kMeter};  // T = 3.33 s
  LeakyBucket::State s = LeakyBucket::fresh(p, 0);
  EXPECT_TRUE(LeakyBucket::evaluate(s, p, 2, 0).allowed);
  EXPECT_EQ(LeakyBucket::evaluate(s, p, 3, 0).retry_after_us, -1);  // never: above capacity
  LeakyBucket::commit(s, p, 2, 0);
  EXPECT_TRUE(LeakyBucket::evaluate(s, p, 0, 0).allowed);  // a peek fits a full bucket
  const Verdict v = LeakyBucket::evaluate(s, p, 1, 0);
  EXPECT_EQ(v.retry_after_us, 3'333'334);  // 10/3 s, rounded up to a microsecond
  EXPECT_FALSE(LeakyBucket::evaluate(s, p, 1, 3'333'333).allowed);
  EXPECT_TRUE(LeakyBucket::evaluate(s, p, 1, 3'333'334).allowed);
  // Stepping back does not drain.
  LeakyBucket::commit(s, p, 1, 3'333'334);
  EXPECT_FALSE(LeakyBucket::evaluate(s, p, 1, 1'000'000).allowed);
  // Capacity 0 admits only peeks.
  const LeakyBucket::Params closed{1, kUsPerSecond, 0, Mode::kMeter};
  LeakyBucket::State c = LeakyBucket::fresh(closed, 0);
  EXPECT_TRUE(LeakyBucket::evaluate(c, closed, 0, 0).allowed);
  EXPECT_EQ(LeakyBucket::evaluate(c, closed, 1, 0).retry_after_us, -1);
  // One per 100 years.
  const LeakyBucket::Params slow{1, kMaxPeriod, 1, Mode::kShaper};
  LeakyBucket::State h = LeakyBucket::fresh(slow, 0);
  LeakyBucket::commit(h, slow, 1, 0);
  EXPECT_EQ(LeakyBucket::evaluate(h, slow, 1, 0).retry_after_us, kMaxPeriod);
  EXPECT_EQ(LeakyBucket::evaluate(h, slow, 0, 0).delay_us, kMaxPeriod);
}

TEST(LeakyBucketTest, ValidatesParameters) {
  EXPECT_EQ(LeakyBucket::validate({1, kUsPerSecond, 6, Mode::kMeter}), nullptr);
  EXPECT_NE(LeakyBucket::validate({0, kUsPerSecond, 6, Mode::kMeter}), nullptr);
  EXPECT_NE(LeakyBucket::validate({1, 0, 6, Mode::kMeter}), nullptr);
  EXPECT_NE(LeakyBucket::validate({1, kUsPerSecond, -1, Mode::kMeter}), nullptr);
  EXPECT_NE(LeakyBucket::validate({1, kUsPerSecond, 6, Mode::kShaper, -2}), nullptr);
  EXPECT_NE(LeakyBucket::validate({1, kUsPerSecond, 6, static_cast<Mode>(7)}), nullptr);
}

}  // namespace
}  // namespace rlimit::core::algorithms
