#include "core/algorithms/gcra.h"

#include <gtest/gtest.h>

#include <random>

#include "core/time.h"
#include "test_support.h"

namespace rlimit::core::algorithms {
namespace {

constexpr TimeUs kStart = 1'700'000'000 * kUsPerSecond;  // any epoch will do

// The README's example: CL.THROTTLE user123 15 30 60 on a new key.
TEST(GcraTest, RedisCellReadmeExample) {
  const Gcra::Params p{15, 30, 60 * kUsPerSecond};
  Gcra::State s = Gcra::fresh(p, kStart);
  const Verdict v = Gcra::evaluate(s, p, 1, kStart);
  EXPECT_EQ(Gcra::cell_reply(v), (Gcra::CellReply{0, 16, 15, -1, 2}));
  Gcra::commit(s, p, 1, kStart);
  // Exactly as redis-cell: 16 at once (the limit), then one every 2 seconds.
  for (int i = 1; i < 16; ++i) {
    ASSERT_TRUE(Gcra::evaluate(s, p, 1, kStart).allowed) << i;
    Gcra::commit(s, p, 1, kStart);
  }
  const Verdict denied = Gcra::evaluate(s, p, 1, kStart);
  EXPECT_EQ(Gcra::cell_reply(denied), (Gcra::CellReply{1, 16, 0, 2, 32}));
  EXPECT_EQ(denied.retry_after_us, 2 * kUsPerSecond);
  EXPECT_TRUE(Gcra::evaluate(s, p, 1, kStart + 2 * kUsPerSecond).allowed);
}

// redis-cell replies with whole seconds, a partial second of a millisecond
// or more rounded up (so a caller never retries early), less dropped.
TEST(GcraTest, CellReplyRoundsPartialSecondsUpAsRedisCellDoes) {
  EXPECT_EQ(Gcra::cell_seconds(0), 0);
  EXPECT_EQ(Gcra::cell_seconds(999), 0);
  EXPECT_EQ(Gcra::cell_seconds(1'000), 1);
  EXPECT_EQ(Gcra::cell_seconds(200'000), 1);
  EXPECT_EQ(Gcra::cell_seconds(kUsPerSecond), 1);
  EXPECT_EQ(Gcra::cell_seconds(kUsPerSecond + 999), 1);
  EXPECT_EQ(Gcra::cell_seconds(kUsPerSecond + 1'000), 2);
  // 5 per second, burst 1 (max_burst 0): T = 200 ms. Allowed, the TAT is
  // 200 ms ahead: reset_after 1 s (was 0); then refused for 200 ms: retry 1 s.
  const Gcra::Params p{0, 5, kUsPerSecond};
  Gcra::State s = Gcra::fresh(p, kStart);
  const Verdict first = Gcra::evaluate(s, p, 1, kStart);
  EXPECT_EQ(first.reset_after_us, 200'000);
  EXPECT_EQ(Gcra::cell_reply(first), (Gcra::CellReply{0, 1, 0, -1, 1}));
  Gcra::commit(s, p, 1, kStart);
  const Verdict denied = Gcra::evaluate(s, p, 1, kStart + 50'000);
  EXPECT_EQ(denied.retry_after_us, 150'000);
  EXPECT_EQ(Gcra::cell_reply(denied), (Gcra::CellReply{1, 1, 0, 1, 1}));
}

// redis-cell's own table (src/cell/mod.rs, it_rate_limits): limit 5
// (max_burst 4), one per second. Each row: offset, quantity, limited,
// remaining, reset_after, retry_after (-1: allowed or never).
TEST(GcraTest, RedisCellRateLimitsTable) {
  struct Row {
    std::int64_t at_ms, quantity;
    bool limited;
    std::int64_t remaining, reset_after_ms, retry_after_ms;
  };
  const Row rows[] = {
      {0, 6, true, 5, 0, -1},  // never larger than the maximum
      {0, 1, false, 4, 1000, -1},     {0, 1, false, 3, 2000, -1},
      {0, 1, false, 2, 3000, -1},     {0, 1, false, 1, 4000, -1},
      {0, 1, false, 0, 5000, -1},     {0, 1, true, 0, 5000, 1000},
      {3000, 1, false, 2, 3000, -1},  {3100, 1, false, 1, 3900, -1},
      {4000, 1, false, 1, 4000, -1},  {8000, 1, false, 4, 1000, -1},
      {9500, 1, false, 4, 1000, -1},  {9500, 0, false, 4, 1000, -1},  // a zero quantity peeks
      {9500, 2, false, 2, 3000, -1},                                  // a larger quantity uses more
      {9500, 5, true, 2, 3000, 3000},                                 // and cannot exceed the limit
  };
  const Gcra::Params p{4, 1, kUsPerSecond};
  Gcra::State s = Gcra::fresh(p, kStart);
  int i = 0;
  for (const Row& row : rows) {
    SCOPED_TRACE("case " + std::to_string(i++));
    const TimeUs now = kStart + row.at_ms * kUsPerMs;
    const Verdict v = Gcra::evaluate(s, p, row.quantity, now);
    EXPECT_EQ(!v.allowed, row.limited);
    EXPECT_EQ(v.limit, 5);
    EXPECT_EQ(v.remaining, row.remaining);
    EXPECT_EQ(v.reset_after_us, row.reset_after_ms * kUsPerMs);
    EXPECT_EQ(v.allowed ? -1 : v.retry_after_us,
              row.retry_after_ms < 0 ? -1 : row.retry_after_ms * kUsPerMs);
    if (v.allowed) Gcra::commit(s, p, row.quantity, now);
  }
}

// redis-cell's algorithm as written (integer microseconds; valid when the
// emission interval is a whole number of microseconds): the reference.
struct RedisCellModel {
  std::int64_t dvt, interval, limit;
  TimeUs tat;
  bool have = false;

  Verdict rate_limit(std::int64_t quantity, TimeUs now) {
    Verdict v;
    v.limit = limit;
    const TimeUs t = have && tat > now ? tat : now;  // redis expires the key at its TAT
    const std::int64_t increment = interval * quantity;
    const TimeUs new_tat = now > t ? now + increment : t + increment;
    const TimeUs allow_at = new_tat - dvt;
    const std::int64_t diff = now - allow_at;
    std::int64_t ttl;
    if (diff < 0) {
      v.retry_after_us = increment <= dvt ? -diff : -1;
      ttl = t - now;
    } else {
      v.allowed = true;
      ttl = new_tat - now;
      tat = new_tat;
      have = true;
    }
    const std::int64_t next = dvt - ttl;
    if (next > -interval) v.remaining = next >= 0 ? next / interval : 0;
    v.reset_after_us = ttl;
    return v;
  }
};

TEST(GcraTest, MatchesRedisCellOnRandomArrivals) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 50; ++trial) {
    const std::int64_t interval = 1 + static_cast<std::int64_t>(rng() % 500'000);
    const std::int64_t count = 1 + static_cast<std::int64_t>(rng() % 20);
    const Gcra::Params p{static_cast<std::int64_t>(rng() % 10), count, interval * count};
    RedisCellModel model{interval * (p.max_burst + 1), interval, p.max_burst + 1, 0};
    Gcra::State s = Gcra::fresh(p, kStart);
    TimeUs now = kStart;
    for (int i = 0; i < 500; ++i) {
      now += static_cast<TimeUs>(rng() % (2 * interval));
      const std::int64_t quantity = static_cast<std::int64_t>(rng() % (p.max_burst + 3));
      Verdict v = Gcra::evaluate(s, p, quantity, now);
      if (v.allowed) {
        Gcra::commit(s, p, quantity, now);
        v.retry_after_us = 0;
      }
      Verdict want = model.rate_limit(quantity, now);
      if (want.allowed) want.retry_after_us = 0;
      // Our excess has no redis-cell counterpart.
      v.excess = 0;
      ASSERT_EQ(v, want) << "trial " << trial << " step " << i;
    }
  }
}

// An obviously correct leaky bucket that drips: the level (in ticks of
// 1/limit us, so exact for any rate) drains by `limit` ticks per microsecond;
// a request pours cost * period ticks in and must not overflow.
TEST(GcraTest, MatchesADrippingBucketForAnyRate) {
  std::mt19937_64 rng(12);
  for (int trial = 0; trial < 100; ++trial) {
    const Gcra::Params p{static_cast<std::int64_t>(rng() % 8),
                         1 + static_cast<std::int64_t>(rng() % 1000),
                         1 + static_cast<std::int64_t>(rng() % 3'000'000)};
    const __int128 size = static_cast<__int128>(p.max_burst + 1) * p.period_us;
    __int128 level = 0;
    TimeUs last = kStart;
    Gcra::State s = Gcra::fresh(p, kStart);
    TimeUs now = kStart;
    const std::int64_t step = 2 * p.period_us / p.count + 2;
    for (int i = 0; i < 500; ++i) {
      now += static_cast<TimeUs>(rng() % step);
      level = std::max<__int128>(0, level - static_cast<__int128>(now - last) * p.count);
      last = now;
      const std::int64_t cost = static_cast<std::int64_t>(rng() % (p.max_burst + 2));
      const bool fits = level + static_cast<__int128>(cost) * p.period_us <= size;
      const Verdict v = Gcra::evaluate(s, p, cost, now);
      ASSERT_EQ(v.allowed, fits) << "trial " << trial << " step " << i;
      ASSERT_EQ(v.remaining,
                static_cast<std::int64_t>(
                    (size - level - (fits ? static_cast<__int128>(cost) * p.period_us : 0)) /
                    p.period_us));
      if (fits) {
        level += static_cast<__int128>(cost) * p.period_us;
        Gcra::commit(s, p, cost, now);
      }
    }
  }
}

TEST(GcraTest, EmissionIntervalThatDoesNotDivideIsExact) {
  // 3 per 10 s: T = 3.333... s, which a microsecond clock cannot hold (redis-
  // cell truncates it to the nanosecond). A greedy caller retrying exactly at
  // retry_after gets the burst of 2 and then one per T, never drifting:
  // 299,999 paced admissions by 300,000 T - 50 ms (a truncated interval would
  // fit a 300,000th).
  const Gcra::Params p{1, 3, 10 * kUsPerSecond};
  const TimeUs end = 1'000'000 * kUsPerSecond - 50'000;
  Gcra::State s = Gcra::fresh(p, 0);
  std::int64_t admitted = 0;
  for (TimeUs now = 0; now <= end;) {
    const Verdict v = Gcra::evaluate(s, p, 1, now);
    if (v.allowed) {
      Gcra::commit(s, p, 1, now);
      ++admitted;
    } else {
      now += v.retry_after_us;
    }
  }
  EXPECT_EQ(admitted, 2 + 299'999);
}

TEST(GcraTest, RemoteChargesMakeDebtThatIsRepaid) {
  const Gcra::Params p{9, 10, kUsPerSecond};  // 10 per second, burst 10
  Gcra::State s = Gcra::fresh(p, 0);
  Gcra::charge_remote(s, p, 25, 0);  // peers consumed 25
  const Verdict v = Gcra::evaluate(s, p, 1, 0);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.remaining, 0);
  EXPECT_EQ(v.retry_after_us, 1'600'000);  // 16 intervals of debt to drain
  EXPECT_EQ(v.excess, 16);
  EXPECT_FALSE(Gcra::evaluate(s, p, 0, 1'499'999).allowed);  // in debt even for a peek
  EXPECT_TRUE(Gcra::evaluate(s, p, 0, 1'500'000).allowed);
  EXPECT_FALSE(Gcra::evaluate(s, p, 1, 1'599'999).allowed);
  EXPECT_TRUE(Gcra::evaluate(s, p, 1, 1'600'000).allowed);
  EXPECT_EQ(Gcra::evaluate(s, p, 0, 0).reset_after_us, 2'500'000);
  EXPECT_FALSE(Gcra::is_idle(s, p, 2'499'999));
  EXPECT_TRUE(Gcra::is_idle(s, p, 2'500'000));
}

TEST(GcraTest, ClockSteppingBackDoesNotMint) {
  const Gcra::Params p{1, 1, kUsPerSecond};
  Gcra::State s = Gcra::fresh(p, 10 * kUsPerSecond);
  Gcra::commit(s, p, 2, 10 * kUsPerSecond);
  EXPECT_FALSE(Gcra::evaluate(s, p, 1, 10 * kUsPerSecond).allowed);
  // Five seconds back: the bucket looks fuller, not emptier.
  const Verdict back = Gcra::evaluate(s, p, 1, 5 * kUsPerSecond);
  EXPECT_FALSE(back.allowed);
  EXPECT_EQ(back.retry_after_us, 6 * kUsPerSecond);
  EXPECT_FALSE(Gcra::is_idle(s, p, 5 * kUsPerSecond));
}

TEST(GcraTest, HugePeriodsAndCosts) {
  // One per 100 years: the second waits a century, and nothing overflows.
  const Gcra::Params slow{0, 1, kMaxPeriod};
  Gcra::State s = Gcra::fresh(slow, 0);
  Gcra::commit(s, slow, 1, 0);
  const Verdict v = Gcra::evaluate(s, slow, 1, 0);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.retry_after_us, kMaxPeriod);
  // Costs up to 2^50 against a burst of 2^50.
  const Gcra::Params big{kMaxCost - 1, kMaxCost, kUsPerSecond};
  Gcra::State b = Gcra::fresh(big, 0);
  EXPECT_TRUE(Gcra::evaluate(b, big, kMaxCost, 0).allowed);
  Gcra::commit(b, big, kMaxCost, 0);
  EXPECT_FALSE(Gcra::evaluate(b, big, 1, 0).allowed);
  EXPECT_EQ(Gcra::evaluate(b, big, kMaxCost, 0).retry_after_us, kUsPerSecond);
  // Endless remote debt saturates kMaxAheadUs ahead instead of overflowing.
  for (int i = 0; i < 1000; ++i) Gcra::charge_remote(s, slow, kMaxCost, 0);
  EXPECT_EQ(Gcra::evaluate(s, slow, 0, 0).reset_after_us, kMaxAheadUs);
}

TEST(GcraTest, ValidatesParameters) {
  EXPECT_EQ(Gcra::validate({15, 30, 60 * kUsPerSecond}), nullptr);
  EXPECT_NE(Gcra::validate({-1, 30, kUsPerSecond}), nullptr);
  EXPECT_NE(Gcra::validate({0, 0, kUsPerSecond}), nullptr);
  EXPECT_NE(Gcra::validate({0, 1, 0}), nullptr);
  EXPECT_NE(Gcra::validate({0, 1, kMaxPeriod + 1}), nullptr);
  EXPECT_NE(Gcra::validate({kMaxCost, 1, kUsPerSecond}), nullptr);
  // A tolerance beyond 2^60 us (2^50 cells at one per 100 years).
  EXPECT_NE(Gcra::validate({kMaxCost - 1, 1, kMaxPeriod}), nullptr);
}

}  // namespace
}  // namespace rlimit::core::algorithms
