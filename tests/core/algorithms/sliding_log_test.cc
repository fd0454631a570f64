#include "core/algorithms/sliding_log.h"

#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <vector>

#include "core/time.h"
#include "test_support.h"

namespace rlimit::core::algorithms {
namespace {

using Entry = SlidingLog::Entry;

std::vector<Entry> log_of(const SlidingLog::State& s) {
  const auto log = SlidingLog::log(s);
  return {log.begin(), log.end()};
}

// The rolling window from the seed notes: two messages a second, sent at
// 300 ms and 400 ms, count until 1.3 s and 1.4 s.
TEST(SlidingLogTest, RollingWindowExample) {
  const SlidingLog::Params p{2, kUsPerSecond, 16};
  SlidingLog::State s = SlidingLog::fresh(p, 0);
  SlidingLog::commit(s, p, 1, 300'000);
  SlidingLog::commit(s, p, 1, 400'000);
  const Verdict v = SlidingLog::evaluate(s, p, 1, 1'200'000);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.retry_after_us, 100'000);  // the 300 ms message leaves at 1.3 s
  EXPECT_EQ(v.reset_after_us, 200'000);  // the log is empty at 1.4 s
  EXPECT_FALSE(SlidingLog::evaluate(s, p, 1, 1'299'999).allowed);
  EXPECT_TRUE(SlidingLog::evaluate(s, p, 1, 1'300'000).allowed);
  EXPECT_EQ(SlidingLog::evaluate(s, p, 2, 1'300'000).retry_after_us, 100'000);
  EXPECT_TRUE(SlidingLog::is_idle(s, p, 1'400'000));
}

// The reference: an unbounded log of admitted (time, cost), summed afresh.
TEST(SlidingLogTest, MatchesAnUnboundedLogWhileWithinTheBound) {
  std::mt19937_64 rng(51);
  for (int trial = 0; trial < 100; ++trial) {
    const std::int64_t limit = 1 + static_cast<std::int64_t>(rng() % 12);
    const SlidingLog::Params p{limit, 1 + static_cast<std::int64_t>(rng() % 2'000'000), limit};
    std::deque<Entry> log;
    TimeUs now = static_cast<TimeUs>(rng() % 1'000'000'000);
    SlidingLog::State s = SlidingLog::fresh(p, now);
    for (int i = 0; i < 400; ++i) {
      now += static_cast<TimeUs>(rng() % (p.period_us / 3 + 2));
      while (!log.empty() && log.front().at_us <= now - p.period_us) log.pop_front();
      std::int64_t in_window = 0;
      for (const Entry& e : log) in_window += e.units;
      const std::int64_t cost = static_cast<std::int64_t>(rng() % (limit + 2));
      const bool fits = in_window + cost <= limit;
      Verdict want;
      want.allowed = fits;
      want.limit = limit;
      want.remaining = limit - in_window - (fits ? cost : 0);
      const TimeUs newest =
          fits && cost > 0 ? now : (log.empty() ? now - p.period_us : log.back().at_us);
      want.reset_after_us = std::max<TimeUs>(0, newest + p.period_us - now);
      if (!fits) {
        want.excess = in_window + cost - limit;
        if (cost > limit) {
          want.retry_after_us = -1;
        } else {
          std::int64_t left = in_window;
          for (const Entry& e : log) {
            left -= e.units;
            if (left + cost <= limit) {
              want.retry_after_us = e.at_us + p.period_us - now;
              break;
            }
          }
        }
      }
      ASSERT_EQ(SlidingLog::evaluate(s, p, cost, now), want) << "trial " << trial << " step " << i;
      if (fits) {
        if (cost > 0) log.push_back({now, cost});
        SlidingLog::commit(s, p, cost, now);
        ASSERT_LE(static_cast<std::int64_t>(SlidingLog::log(s).size()), limit);
      }
    }
  }
}

TEST(SlidingLogTest, AtTheBoundTheCheapestNeighboursCoalesceForward) {
  const SlidingLog::Params p{100, kUsPerSecond, 3};
  SlidingLog::State s = SlidingLog::fresh(p, 0);
  SlidingLog::commit(s, p, 1, 0);
  SlidingLog::commit(s, p, 1, 10);
  SlidingLog::commit(s, p, 1, 1000);
  SlidingLog::commit(s, p, 1, 1001);  // merging 1000 into 1001 moves 1 unit by 1 us
  EXPECT_EQ(log_of(s), (std::vector<Entry>{{0, 1}, {10, 1}, {1001, 2}}));
  SlidingLog::commit(s, p, 5, 500'000);  // now 0 -> 10 is cheapest (1 unit, 10 us)
  EXPECT_EQ(log_of(s), (std::vector<Entry>{{10, 2}, {1001, 2}, {500'000, 5}}));
  EXPECT_EQ(s.total, 9);
  // Conservative: the unit logged at 0 now leaves at 10 + 1 s, not at 1 s.
  EXPECT_EQ(SlidingLog::units_in_window(s, p, kUsPerSecond), 9);
  EXPECT_EQ(SlidingLog::units_in_window(s, p, kUsPerSecond + 10), 7);
}

// The most admitted in any span of one period.
std::int64_t max_in_any_period(const std::vector<Entry>& admitted, std::int64_t period_us) {
  std::deque<Entry> span;
  std::int64_t sum = 0;
  std::int64_t most = 0;
  for (const Entry& e : admitted) {
    span.push_back(e);
    sum += e.units;
    while (span.front().at_us <= e.at_us - period_us) {
      sum -= span.front().units;
      span.pop_front();
    }
    most = std::max(most, sum);
  }
  return most;
}

TEST(SlidingLogTest, ABoundBelowTheLimitStaysConservative) {
  std::mt19937_64 rng(52);
  for (int trial = 0; trial < 60; ++trial) {
    const std::int64_t limit = 5 + static_cast<std::int64_t>(rng() % 60);
    const SlidingLog::Params bounded{limit, kUsPerSecond,
                                     1 + static_cast<std::int64_t>(rng() % (limit / 2))};
    const SlidingLog::Params exact{limit, kUsPerSecond, limit};
    SlidingLog::State b = SlidingLog::fresh(bounded, 0);
    SlidingLog::State e = SlidingLog::fresh(exact, 0);
    std::vector<Entry> admitted;
    std::int64_t exact_admitted = 0;
    TimeUs now = 0;
    while (now < 50 * kUsPerSecond) {
      now += static_cast<TimeUs>(rng() % (3 * kUsPerSecond / limit));
      const std::int64_t cost = 1 + static_cast<std::int64_t>(rng() % 3);
      if (SlidingLog::evaluate(b, bounded, cost, now).allowed) {
        SlidingLog::commit(b, bounded, cost, now);
        admitted.push_back({now, cost});
      }
      ASSERT_LE(static_cast<std::int64_t>(SlidingLog::log(b).size()), bounded.max_entries);
      if (SlidingLog::evaluate(e, exact, cost, now).allowed) {
        SlidingLog::commit(e, exact, cost, now);
        exact_admitted += cost;
      }
    }
    std::int64_t total = 0;
    for (const Entry& a : admitted) total += a.units;
    SCOPED_TRACE("trial " + std::to_string(trial));
    EXPECT_LE(max_in_any_period(admitted, kUsPerSecond), limit);  // never over
    EXPECT_LE(total, exact_admitted + limit);
    EXPECT_GT(total, exact_admitted / 2);  // and still useful
  }
}

TEST(SlidingLogTest, RemoteConsumptionIsLoggedWhenLearned) {
  const SlidingLog::Params p{10, kUsPerSecond, 10};
  SlidingLog::State s = SlidingLog::fresh(p, 0);
  SlidingLog::commit(s, p, 4, 0);
  SlidingLog::charge_remote(s, p, 15, 200'000);  // debt: 19 of 10
  const Verdict v = SlidingLog::evaluate(s, p, 1, 300'000);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.excess, 12);               // and 2 of the 9 over the limit held (the next test)
  EXPECT_EQ(v.retry_after_us, 900'000);  // both entries gone at 1.2 s
  EXPECT_EQ(SlidingLog::units_in_window(s, p, kUsPerSecond), 15);
  // Both entries gone at 1.2 s, but 9 overshot the limit: 2 of them (a
  // quarter of 10) are held there (the next test).
  EXPECT_TRUE(SlidingLog::evaluate(s, p, 8, 1'200'000).allowed);
  EXPECT_FALSE(SlidingLog::evaluate(s, p, 9, 1'200'000).allowed);
}

// In a cluster a window may hold more than the limit (news of what others
// admitted unheard of this node). In a run's first period (the units
// logged since the window was last empty: a cold start) the overshoot is
// carried: held a quarter of the limit a period from a period after the run
// began, the periods counting while the run's entries are live; what they
// did not hold waits for the next run, which holds it from its start, for
// up to kCarryWaitsPeriods from the last run's start. So the periods after
// admit that much less, as the buckets repay an overshoot as a debt. Later
// in a run it is not carried: the older entries leaving while the window
// is over the limit repay it. At most a limit in all; news already out of
// the window at `now`, or a node alone (commits never overshoot), carries
// nothing.
TEST(SlidingLogTest, AnOvershootInARunsFirstPeriodIsHeldAQuarterOfTheLimitAPeriod) {
  const SlidingLog::Params p{8, kUsPerSecond, 16};
  SlidingLog::State s = SlidingLog::fresh(p, 0);
  SlidingLog::commit(s, p, 6, 100'000);                  // the run begins
  SlidingLog::charge_remote(s, p, 5, 150'000, 200'000);  // 11 of 8: 3 over
  EXPECT_EQ(s.carried, 3);
  // Held from now, where it costs nothing (the window is over the limit
  // until the run's first units leave at 1.1 s), so that time only helps;
  // the run's entries leave by 1.15 s, before a holding period ends: all 3
  // wait for the next run, 2 held meanwhile, until forgotten at 16.1 s.
  EXPECT_EQ(SlidingLog::held_units(s, p, 200'000), 2);  // a quarter of 8
  EXPECT_EQ(SlidingLog::held_units(s, p, 1'100'000), 2);
  EXPECT_EQ(SlidingLog::held_units(s, p, 5'000'000), 2);
  EXPECT_EQ(SlidingLog::held_units(s, p, 16'100'000), 0);
  EXPECT_TRUE(SlidingLog::evaluate(s, p, 6, 1'200'000).allowed);
  const Verdict v = SlidingLog::evaluate(s, p, 7, 1'200'000);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.retry_after_us, 14'900'000);
  EXPECT_EQ(v.reset_after_us, 14'900'000);
  EXPECT_FALSE(SlidingLog::is_idle(s, p, 2'500'000));
  EXPECT_TRUE(SlidingLog::is_idle(s, p, 16'100'000));
  // The next run, at 3.2 s, holds it from its start: 2 in its first period;
  // its entry live through it, 1 in the next.
  SlidingLog::commit(s, p, 1, 3'200'000);
  EXPECT_EQ(s.carried, 3);
  EXPECT_EQ(SlidingLog::held_units(s, p, 3'300'000), 2);
  EXPECT_TRUE(SlidingLog::evaluate(s, p, 5, 3'300'000).allowed);
  EXPECT_FALSE(SlidingLog::evaluate(s, p, 6, 3'300'000).allowed);
  SlidingLog::commit(s, p, 1, 4'150'000);  // live through 5.15 s
  EXPECT_EQ(SlidingLog::held_units(s, p, 4'300'000), 1);
  // Its second holding period did not end while an entry was live: the 1
  // left waits for the next run, and is forgotten 16 periods after this
  // run's start, at 19.2 s.
  EXPECT_EQ(SlidingLog::held_units(s, p, 5'300'000), 1);
  SlidingLog::commit(s, p, 1, 6'000'000);
  EXPECT_EQ(s.carried, 1);
  EXPECT_EQ(SlidingLog::held_units(s, p, 6'100'000), 1);
  SlidingLog::State quiet = s;
  SlidingLog::commit(quiet, p, 1, 30'000'000);  // after 16 periods: forgotten
  EXPECT_EQ(quiet.carried, 0);

  // In a run's second period: not carried.
  SlidingLog::State t = SlidingLog::fresh(p, 0);
  for (TimeUs at = 0; at < 800'000; at += 100'000) SlidingLog::commit(t, p, 1, at);
  SlidingLog::commit(t, p, 1, 1'050'000);                    // the first unit left at 1 s
  SlidingLog::charge_remote(t, p, 2, 1'050'000, 1'060'000);  // 10 of 8
  EXPECT_EQ(t.carried, 0);
  EXPECT_EQ(SlidingLog::units_in_window(t, p, 1'060'000), 10);

  // At most a limit in all; nothing for news already out of the window, or
  // for a node's own commits.
  SlidingLog::State big = SlidingLog::fresh(p, 0);
  SlidingLog::charge_remote(big, p, 100, 0, 0);
  EXPECT_EQ(big.carried, 8);
  SlidingLog::State old = SlidingLog::fresh(p, 0);
  SlidingLog::charge_remote(old, p, 100, 0, kUsPerSecond);
  EXPECT_EQ(old.carried, 0);
  SlidingLog::State alone = SlidingLog::fresh(p, 0);
  for (TimeUs at = 0; at < 10 * kUsPerSecond; at += 10'000) {
    if (SlidingLog::evaluate(alone, p, 1, at).allowed) SlidingLog::commit(alone, p, 1, at);
  }
  EXPECT_EQ(alone.carried, 0);
}

TEST(SlidingLogTest, ClockSteppingBackStampsAtTheNewestTime) {
  const SlidingLog::Params p{3, kUsPerSecond, 8};
  SlidingLog::State s = SlidingLog::fresh(p, 0);
  SlidingLog::commit(s, p, 1, 5 * kUsPerSecond);
  SlidingLog::commit(s, p, 1, 4 * kUsPerSecond);  // the clock went back a second
  EXPECT_EQ(log_of(s), (std::vector<Entry>{{5 * kUsPerSecond, 2}}));
  // Entries ahead of the clock still count.
  EXPECT_EQ(SlidingLog::units_in_window(s, p, 4 * kUsPerSecond), 2);
  EXPECT_FALSE(SlidingLog::evaluate(s, p, 2, 4 * kUsPerSecond).allowed);
  EXPECT_EQ(SlidingLog::evaluate(s, p, 2, 4 * kUsPerSecond).retry_after_us, 2 * kUsPerSecond);
  EXPECT_FALSE(SlidingLog::is_idle(s, p, 4 * kUsPerSecond));
}

TEST(SlidingLogTest, ZeroLargeAndHuge) {
  const SlidingLog::Params p{kMaxCost, kMaxPeriod, 4};
  SlidingLog::State s = SlidingLog::fresh(p, 0);
  EXPECT_TRUE(SlidingLog::evaluate(s, p, 0, 0).allowed);
  SlidingLog::commit(s, p, 0, 0);
  EXPECT_TRUE(SlidingLog::log(s).empty());  // a zero cost logs nothing
  EXPECT_TRUE(SlidingLog::evaluate(s, p, kMaxCost, 0).allowed);
  SlidingLog::commit(s, p, kMaxCost, 0);
  EXPECT_EQ(SlidingLog::evaluate(s, p, 1, 1).retry_after_us, kMaxPeriod - 1);
  EXPECT_EQ(SlidingLog::evaluate(s, p, kMaxCost + 0, 1).retry_after_us, kMaxPeriod - 1);
  for (int i = 0; i < 10'000; ++i) SlidingLog::charge_remote(s, p, kMaxCost, i);
  EXPECT_LE(static_cast<std::int64_t>(SlidingLog::log(s).size()), 4);
  EXPECT_EQ(s.total, std::int64_t{1} << 62);  // saturated, not overflowed
  EXPECT_FALSE(SlidingLog::evaluate(s, p, 0, 10'000).allowed);
  EXPECT_NE(SlidingLog::validate({1, kUsPerSecond, 0}), nullptr);
  EXPECT_NE(SlidingLog::validate({1, kUsPerSecond, SlidingLog::kMaxEntriesBound + 1}), nullptr);
  EXPECT_NE(SlidingLog::validate({0, kUsPerSecond, 1}), nullptr);
}

}  // namespace
}  // namespace rlimit::core::algorithms
