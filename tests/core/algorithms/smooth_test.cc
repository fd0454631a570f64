// SmoothBursty and SmoothWarmingUp against Guava's documented behaviour
// (RateLimiterTest's worked examples, with its fake stopwatch: a caller that
// is told to wait sleeps exactly that long) and against a port of Guava's
// SmoothRateLimiter on random sequences.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/algorithms/smooth_bursty.h"
#include "core/algorithms/smooth_warming_up.h"
#include "core/time.h"
#include "test_support.h"

namespace rlimit::core::algorithms {
namespace {

// Guava's fake-stopwatch world: acquire() sleeps for its wait.
template <class A>
struct Stopwatch {
  typename A::Params params;
  typename A::State state;
  TimeUs now = 0;

  // acquire(permits): the wait in microseconds; the caller then sleeps it.
  std::int64_t acquire(std::int64_t permits) {
    typename A::Params p = params;
    p.max_wait_us = -1;
    const Verdict v = A::evaluate(state, p, permits, now);
    EXPECT_TRUE(v.allowed);
    A::commit(state, p, permits, now);
    now += v.delay_us;
    return v.delay_us;
  }
  // tryAcquire(permits, timeout): false without reserving when the wait would
  // exceed the timeout.
  bool try_acquire(std::int64_t permits, std::int64_t timeout_us) {
    typename A::Params p = params;
    p.max_wait_us = std::max<std::int64_t>(timeout_us, 0);
    const Verdict v = A::evaluate(state, p, permits, now);
    if (!v.allowed) return false;
    A::commit(state, p, permits, now);
    now += v.delay_us;
    return true;
  }
  void sleep_ms(std::int64_t ms) { now += ms * kUsPerMs; }
  // Waits as Guava's test prints them ("R1.38": %.2f seconds, half up).
  std::vector<std::int64_t> acquire_hundredths(int n) {
    std::vector<std::int64_t> out;
    for (int i = 0; i < n; ++i) out.push_back((acquire(1) + 5'000) / 10'000);
    return out;
  }
};

Stopwatch<SmoothBursty> create(std::int64_t permits_per_second) {
  SmoothBursty::Params p;
  p.permits = permits_per_second;
  return {p, SmoothBursty::empty(p, 0), 0};  // Guava starts with nothing stored
}

Stopwatch<SmoothWarmingUp> create(std::int64_t permits_per_second, std::int64_t warmup_ms,
                                  std::int64_t cold_factor) {
  SmoothWarmingUp::Params p;
  p.permits = permits_per_second;
  p.warmup_us = warmup_ms * kUsPerMs;
  p.cold_factor = cold_factor;
  return {p, SmoothWarmingUp::fresh(p, 0), 0};  // cold, as Guava starts
}

using Waits = std::vector<std::int64_t>;

TEST(SmoothBurstyTest, GuavaSimple) {
  auto limiter = create(5);
  EXPECT_EQ(limiter.acquire(1), 0);  // R0.00, the first request
  EXPECT_EQ(limiter.acquire(1), 200'000);
  EXPECT_EQ(limiter.acquire(1), 200'000);
}

TEST(SmoothBurstyTest, GuavaSimpleWithWait) {
  auto limiter = create(5);
  EXPECT_EQ(limiter.acquire(1), 0);
  limiter.sleep_ms(200);             // ready for the next request...
  EXPECT_EQ(limiter.acquire(1), 0);  // ...granted immediately
  EXPECT_EQ(limiter.acquire(1), 200'000);
}

TEST(SmoothBurstyTest, GuavaEarliestAvailableIsInThePast) {
  auto limiter = create(5);
  EXPECT_EQ(limiter.acquire(1), 0);
  limiter.sleep_ms(400);
  EXPECT_EQ(limiter.acquire(1), 0);
  EXPECT_EQ(limiter.acquire(1), 0);  // one permit stored by the idle 200 ms
  EXPECT_EQ(limiter.acquire(1), 200'000);
}

TEST(SmoothBurstyTest, GuavaOneSecondBurst) {
  auto limiter = create(5);
  limiter.sleep_ms(1000);                  // max capacity reached
  limiter.sleep_ms(1000);                  // this makes no difference
  EXPECT_EQ(limiter.acquire(1), 0);        // the first request
  EXPECT_EQ(limiter.acquire(1), 0);        // from capacity
  EXPECT_EQ(limiter.acquire(3), 0);        // from capacity
  EXPECT_EQ(limiter.acquire(1), 0);        // concluding a burst of 5 permits
  EXPECT_EQ(limiter.acquire(1), 200'000);  // capacity exhausted
}

TEST(SmoothBurstyTest, GuavaSimpleWeights) {
  auto limiter = create(1);
  EXPECT_EQ(limiter.acquire(1), 0);
  EXPECT_EQ(limiter.acquire(1), 1'000'000);  // to repay the previous
  EXPECT_EQ(limiter.acquire(2), 1'000'000);
  EXPECT_EQ(limiter.acquire(4), 2'000'000);
  EXPECT_EQ(limiter.acquire(8), 4'000'000);
  EXPECT_EQ(limiter.acquire(1), 8'000'000);
}

TEST(SmoothBurstyTest, GuavaTryAcquire) {
  {  // no wait allowed
    auto limiter = create(5);
    EXPECT_TRUE(limiter.try_acquire(1, 0));
    EXPECT_FALSE(limiter.try_acquire(1, 0));
    EXPECT_FALSE(limiter.try_acquire(1, 0));
    limiter.sleep_ms(100);
    EXPECT_FALSE(limiter.try_acquire(1, 0));
  }
  {  // some wait allowed
    auto limiter = create(5);
    EXPECT_TRUE(limiter.try_acquire(1, 0));
    EXPECT_TRUE(limiter.try_acquire(1, 200'000));
    EXPECT_FALSE(limiter.try_acquire(1, 100'000));
    limiter.sleep_ms(100);
    EXPECT_TRUE(limiter.try_acquire(1, 100'000));
  }
  {  // an enormous timeout
    auto limiter = create(5);
    EXPECT_TRUE(limiter.try_acquire(1, 0));
    limiter.sleep_ms(100);
    EXPECT_TRUE(limiter.try_acquire(1, kMaxToleranceUs));
  }
  {  // negative timeouts are 0; the cost of a big try is paid by the next
    auto limiter = create(5);
    EXPECT_TRUE(limiter.try_acquire(5, 0));
    limiter.sleep_ms(900);
    EXPECT_FALSE(limiter.try_acquire(1, -1'000'000));
    limiter.sleep_ms(100);
    EXPECT_TRUE(limiter.try_acquire(1, -1));
  }
  {  // RateLimiter.create(1): one immediate permit, not two
    auto limiter = create(1);
    EXPECT_TRUE(limiter.try_acquire(1, 0));
    EXPECT_FALSE(limiter.try_acquire(1, 0));
  }
}

TEST(SmoothBurstyTest, RefusalSaysWhenToRetry) {
  auto limiter = create(5);
  limiter.acquire(3);  // the next caller pays 600 ms
  SmoothBursty::Params p = limiter.params;
  p.max_wait_us = 100'000;
  const Verdict v = SmoothBursty::evaluate(limiter.state, p, 1, limiter.now);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.delay_us, 600'000);
  EXPECT_EQ(v.retry_after_us, 500'000);
  EXPECT_EQ(v.excess, 3);  // 500 ms too long: 2.5 permits, rounded up
  EXPECT_TRUE(SmoothBursty::evaluate(limiter.state, p, 1, limiter.now + 500'000).allowed);
}

// Guava's measureTotalTimeMillis: acquire `permits` in random chunks, then
// one more to repay whatever the last chunk reserved.
template <class A>
std::int64_t measure_total_us(Stopwatch<A>& limiter, std::int64_t permits, std::mt19937_64& rng) {
  const TimeUs start = limiter.now;
  while (permits > 0) {
    const std::int64_t take = std::max<std::int64_t>(1, static_cast<std::int64_t>(rng() % permits));
    permits -= take;
    limiter.acquire(take);
  }
  limiter.acquire(1);
  return limiter.now - start;
}

TEST(SmoothBurstyTest, NeverABurstOfMoreThanOneSecond) {
  // Guava's testWeNeverGetABurstMoreThanOneSec: after idling, a second's
  // worth of permits goes through in at most a second, and the next
  // second's worth takes at least a second.
  std::mt19937_64 rng(61);
  for (const std::int64_t rate : {1000, 1, 10, 1'000'000, 10, 1}) {
    auto limiter = create(rate);
    limiter.sleep_ms(rate * 1000);
    EXPECT_LE(measure_total_us(limiter, rate, rng), kUsPerSecond) << rate;
    EXPECT_GE(measure_total_us(limiter, rate, rng), kUsPerSecond) << rate;
  }
}

// start_empty: fresh() is Guava's create() (nothing stored: the second
// permit waits an interval); by default a fresh key holds its burst.
TEST(SmoothBurstyTest, StartEmptyIsGuavasStartingState) {
  SmoothBursty::Params p;
  p.permits = 5;
  const TimeUs now = 1'000 * kUsPerSecond;
  EXPECT_EQ(SmoothBursty::fresh(p, now).stored, SmoothBursty::shape(p).max_units);
  p.start_empty = true;
  SmoothBursty::State s = SmoothBursty::fresh(p, now);
  EXPECT_EQ(s.stored, SmoothBursty::empty(p, now).stored);
  EXPECT_EQ(SmoothBursty::evaluate(s, p, 1, now).delay_us, 0);
  SmoothBursty::commit(s, p, 1, now);
  EXPECT_EQ(SmoothBursty::evaluate(s, p, 1, now).delay_us, 200'000);
  EXPECT_FALSE(SmoothBursty::is_idle(s, p, now));
  // Idle once the burst is stored again (a second at 5/s, after the wait).
  EXPECT_TRUE(SmoothBursty::is_idle(s, p, now + 1'200'000));
}

TEST(SmoothWarmingUpTest, GuavaWarmUp) {
  auto limiter = create(2, 4000, 3);
  // Exact: 1.375 s, 1.125 s, 0.875 s, 0.625 s along the ramp, then 0.5 s.
  EXPECT_EQ(limiter.acquire(1), 0);
  EXPECT_EQ(limiter.acquire(1), 1'375'000);
  EXPECT_EQ(limiter.acquire(1), 1'125'000);
  EXPECT_EQ(limiter.acquire(1), 875'000);
  EXPECT_EQ(limiter.acquire(1), 625'000);
  EXPECT_EQ(limiter.acquire(1), 500'000);
  EXPECT_EQ(limiter.acquire(1), 500'000);
  EXPECT_EQ(limiter.acquire(1), 500'000);
  limiter.sleep_ms(500);   // to repay for the last acquire
  limiter.sleep_ms(4000);  // becomes cold again
  EXPECT_EQ(limiter.acquire_hundredths(8), (Waits{0, 138, 113, 88, 63, 50, 50, 50}));
  limiter.sleep_ms(500);   // to repay for the last acquire
  limiter.sleep_ms(2000);  // didn't get cold! It would take another 2 seconds
  EXPECT_EQ(limiter.acquire_hundredths(8), (Waits{0, 50, 50, 50, 50, 50, 50, 50}));
}

TEST(SmoothWarmingUpTest, GuavaWarmUpWithColdFactor10) {
  auto limiter = create(5, 4000, 10);
  EXPECT_EQ(limiter.acquire_hundredths(8), (Waits{0, 175, 126, 76, 30, 20, 20, 20}));
  limiter.sleep_ms(200);   // to repay for the last acquire
  limiter.sleep_ms(4000);  // becomes cold again
  EXPECT_EQ(limiter.acquire_hundredths(8), (Waits{0, 175, 126, 76, 30, 20, 20, 20}));
  limiter.sleep_ms(200);   // to repay for the last acquire
  limiter.sleep_ms(1000);  // still warm! It would take another 3 seconds to go cold
  EXPECT_EQ(limiter.acquire_hundredths(8), (Waits{0, 20, 20, 20, 20, 20, 20, 20}));
}

TEST(SmoothWarmingUpTest, GuavaWarmUpWithColdFactor1) {
  auto limiter = create(5, 4000, 1);
  EXPECT_EQ(limiter.acquire_hundredths(8), (Waits{0, 20, 20, 20, 20, 20, 20, 20}));
  limiter.sleep_ms(340);
  EXPECT_EQ(limiter.acquire_hundredths(8), (Waits{0, 20, 20, 20, 20, 20, 20, 20}));
}

TEST(SmoothWarmingUpTest, WarmUpTimeIsHonouredEvenWithWeights) {
  // Guava's test of the same name: with the warm-up chosen so that the ramp
  // (max - threshold) holds 10 permits, spending them from cold in random
  // chunks takes exactly the warm-up period.
  std::mt19937_64 rng(62);
  for (int trial = 0; trial < 20; ++trial) {
    for (const std::int64_t cold : {2, 3, 10}) {
      // qps 4, 2, 1, 0.5 and 0.1 as permits per period.
      for (const auto& [permits, period_s] : {std::pair{4, 1}, {2, 1}, {1, 1}, {1, 2}, {1, 10}}) {
        // warmup = (1 + cold) * 10 permits * stable interval / 2
        const std::int64_t warmup_us = (1 + cold) * 10 * period_s * kUsPerSecond / permits / 2;
        SmoothWarmingUp::Params p{permits, period_s * kUsPerSecond, warmup_us, cold};
        Stopwatch<SmoothWarmingUp> limiter{p, SmoothWarmingUp::fresh(p, 0), 0};
        const std::int64_t spent = measure_total_us(limiter, 10, rng);
        EXPECT_GE(spent, warmup_us);
        EXPECT_LE(spent, warmup_us + 1);  // ramp prices round up to a tick
      }
    }
  }
}

TEST(SmoothWarmingUpTest, TryAcquireOnAWarmLimiterIsAStrictSpacing) {
  // Once warm, stored permits cost the stable interval like fresh ones, so
  // idle time before a request is never won back: try_acquire admits only
  // requests at least one interval apart. Offered 9 ms apart against 10 ms,
  // a warm limiter admits every other one (55/s of 100/s); the bursty one
  // spends what idleness stores and admits 100/s.
  SmoothWarmingUp::Params w{100, kUsPerSecond, 200 * kUsPerMs, 3, 0};
  SmoothBursty::Params b{100, kUsPerSecond, 100 * kUsPerMs, 0};
  SmoothWarmingUp::State ws = SmoothWarmingUp::fresh(w, 0);
  SmoothBursty::State bs = SmoothBursty::empty(b, 0);
  // Warm up first: drain the ramp.
  for (TimeUs t = 0; t < 2 * kUsPerSecond; t += kUsPerMs) {
    if (SmoothWarmingUp::evaluate(ws, w, 1, t).allowed) SmoothWarmingUp::commit(ws, w, 1, t);
  }
  int warm = 0;
  int bursty = 0;
  for (TimeUs t = 2 * kUsPerSecond; t < 12 * kUsPerSecond; t += 9 * kUsPerMs) {
    if (SmoothWarmingUp::evaluate(ws, w, 1, t).allowed) {
      SmoothWarmingUp::commit(ws, w, 1, t);
      ++warm;
    }
    if (SmoothBursty::evaluate(bs, b, 1, t).allowed) {
      SmoothBursty::commit(bs, b, 1, t);
      ++bursty;
    }
  }
  EXPECT_EQ(warm, 556);          // every other request of 1112
  EXPECT_EQ(bursty, 1000 + 10);  // 100/s, and the 100 ms burst stored before
}

// Guava's SmoothRateLimiter, transcribed with doubles: the reference.
struct GuavaModel {
  bool warming;
  double stable, max, threshold = 0, slope = 0, cooldown, stored;
  std::int64_t next_free = 0;

  static GuavaModel bursty(double rate, bool empty) {
    GuavaModel m{false, 1e6 / rate, rate, 0, 0, 1e6 / rate, 0};
    m.stored = empty ? 0 : m.max;
    return m;
  }
  static GuavaModel warming_up(double rate, double warmup_us, double cold_factor) {
    GuavaModel m{true, 1e6 / rate, 0, 0, 0, 0, 0};
    const double cold = m.stable * cold_factor;
    m.threshold = 0.5 * warmup_us / m.stable;
    m.max = m.threshold + 2.0 * warmup_us / (m.stable + cold);
    m.slope = (cold - m.stable) / (m.max - m.threshold);
    m.cooldown = warmup_us / m.max;
    m.stored = m.max;
    return m;
  }
  double permits_to_time(double permits) const { return stable + permits * slope; }
  double stored_wait(double stored_now, double take) const {
    if (!warming) return 0;
    const double above = stored_now - threshold;
    double micros = 0;
    if (above > 0) {
      const double k = std::min(above, take);
      micros = k * (permits_to_time(above) + permits_to_time(above - k)) / 2.0;
      take -= k;
    }
    return micros + stable * take;
  }
  void resync(std::int64_t now) {
    if (now > next_free) {
      stored = std::min(max, stored + (now - next_free) / cooldown);
      next_free = now;
    }
  }
  double reserve(std::int64_t permits, std::int64_t now) {  // the wait, exact-ish
    resync(now);
    const double wait = static_cast<double>(next_free - now);
    const double spend = std::min<double>(permits, stored);
    next_free += std::llround(stored_wait(stored, spend) + (permits - spend) * stable);
    stored -= spend;
    return std::max(0.0, wait);
  }
  bool can_acquire(std::int64_t now, std::int64_t timeout) const {
    return next_free - timeout <= now;
  }
};

template <class A>
void compare_with_guava(GuavaModel model, Stopwatch<A> limiter, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::int64_t drift = 2;  // each ramp price may round differently by a microsecond
  for (int i = 0; i < 300; ++i) {
    const std::int64_t permits = 1 + static_cast<std::int64_t>(rng() % 4);
    switch (rng() % 4) {
      case 0:
        limiter.sleep_ms(static_cast<std::int64_t>(rng() % 3000));
        break;
      case 1: {
        const std::int64_t timeout = static_cast<std::int64_t>(rng() % 1'500'000);
        const TimeUs before = limiter.now;
        const bool want = model.can_acquire(before, timeout);
        const double gap = static_cast<double>(model.next_free - before - timeout);
        const bool got = limiter.try_acquire(permits, timeout);
        if (std::abs(gap) > drift) {
          ASSERT_EQ(got, want) << "seed " << seed << " op " << i;
        }
        if (got) model.reserve(permits, before);
        break;
      }
      default: {
        const TimeUs before = limiter.now;
        const std::int64_t wait = limiter.acquire(permits);
        const double want = model.reserve(permits, before);
        ASSERT_NEAR(static_cast<double>(wait), want, drift) << "seed " << seed << " op " << i;
        drift += 2;
      }
    }
  }
}

TEST(SmoothBurstyTest, MatchesGuavaOnRandomSequences) {
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    for (const std::int64_t rate : {1, 2, 5, 10, 40}) {
      auto limiter = create(rate);
      compare_with_guava(GuavaModel::bursty(static_cast<double>(rate), true), limiter, seed);
    }
  }
}

TEST(SmoothWarmingUpTest, MatchesGuavaOnRandomSequences) {
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    for (const std::int64_t cold : {1, 3, 10}) {
      auto limiter = create(4, 2000, cold);
      compare_with_guava(GuavaModel::warming_up(4, 2e6, static_cast<double>(cold)), limiter, seed);
    }
  }
}

TEST(SmoothTest, RemoteChargesPushTheNextFreeTicket) {
  SmoothBursty::Params p;
  p.permits = 10;
  p.max_wait_us = 0;
  SmoothBursty::State s = SmoothBursty::fresh(p, 0);  // 10 stored
  SmoothBursty::charge_remote(s, p, 25, 0);           // 10 from storage, 15 fresh: 1.5 s
  const Verdict v = SmoothBursty::evaluate(s, p, 1, 0);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.delay_us, 1'500'000);
  EXPECT_EQ(v.retry_after_us, 1'500'000);
  EXPECT_TRUE(SmoothBursty::evaluate(s, p, 1, 1'500'000).allowed);
  EXPECT_EQ(v.reset_after_us, 2'500'000);  // then a second to store the burst again
  // A cluster warms up together: remote consumption spends cold permits too.
  SmoothWarmingUp::Params w;
  w.permits = 2;
  w.warmup_us = 4 * kUsPerSecond;
  SmoothWarmingUp::State c = SmoothWarmingUp::fresh(w, 0);
  SmoothWarmingUp::charge_remote(c, w, 4, 0);  // the whole ramp: 4 s
  EXPECT_EQ(SmoothWarmingUp::evaluate(c, w, 1, 0).delay_us, 4 * kUsPerSecond);
}

TEST(SmoothTest, ClockSteppingBackStoresNothing) {
  SmoothBursty::Params p;
  p.permits = 5;
  SmoothBursty::State s = SmoothBursty::empty(p, 10 * kUsPerSecond);
  SmoothBursty::commit(s, p, 1, 10 * kUsPerSecond);  // next free at 10.2 s
  const Verdict back = SmoothBursty::evaluate(s, p, 1, 9 * kUsPerSecond);
  EXPECT_EQ(back.delay_us, 1'200'000);
  EXPECT_EQ(back.remaining, 0);
  SmoothBursty::commit(s, p, 1, 9 * kUsPerSecond);
  EXPECT_EQ(SmoothBursty::evaluate(s, p, 1, 10 * kUsPerSecond).delay_us, 400'000);
}

TEST(SmoothTest, FreshBurstyIsIdleSinceForever) {
  SmoothBursty::Params p;
  p.permits = 5;
  SmoothBursty::State s = SmoothBursty::fresh(p, 0);
  for (int i = 0; i < 6; ++i) {  // 5 stored, and a 6th paid by the next caller
    const Verdict v = SmoothBursty::evaluate(s, p, 1, 0);
    EXPECT_EQ(v.delay_us, 0) << i;
    EXPECT_EQ(v.remaining, std::max(0, 4 - i));
    SmoothBursty::commit(s, p, 1, 0);
  }
  EXPECT_EQ(SmoothBursty::evaluate(s, p, 1, 0).delay_us, 200'000);
  EXPECT_EQ(SmoothBursty::evaluate(s, p, 0, 0).limit, 5);
}

TEST(SmoothTest, HugePeriodsAndCosts) {
  SmoothBursty::Params p;
  p.permits = 1;
  p.period_us = kMaxPeriod;  // one per century
  p.max_burst_us = 0;
  p.max_wait_us = 0;
  SmoothBursty::State s = SmoothBursty::fresh(p, 0);
  EXPECT_TRUE(SmoothBursty::evaluate(s, p, kMaxCost, 0).allowed);  // paid by the next
  SmoothBursty::commit(s, p, kMaxCost, 0);
  const Verdict v = SmoothBursty::evaluate(s, p, 1, 0);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.retry_after_us, kMaxAheadUs);  // saturated, not overflowed
  EXPECT_FALSE(SmoothBursty::is_idle(s, p, kMaxAheadUs - 1));
  EXPECT_NE(SmoothBursty::validate({0, kUsPerSecond}), nullptr);
  EXPECT_NE(SmoothWarmingUp::validate({1, kUsPerSecond, 0, 0}), nullptr);
  EXPECT_NE(SmoothWarmingUp::validate({1, kUsPerSecond, 0, 101}), nullptr);
  EXPECT_NE(SmoothWarmingUp::validate({kMaxCost, kUsPerSecond, kMaxToleranceUs, 3}), nullptr);
}

}  // namespace
}  // namespace rlimit::core::algorithms
