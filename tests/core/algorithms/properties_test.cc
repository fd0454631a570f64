// Properties every algorithm must have, checked on random parameters and
// random operation sequences (arrivals, remote charges, time jumps forward
// and back): the verdict describes the state a commit leaves; retry_after and
// reset_after are exact to the microsecond; time and consumption only move
// decisions in the right direction; an idle state is a fresh one; a zero
// cost changes nothing. Per-algorithm reference models are in the sibling
// tests.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "core/algorithms/concurrency.h"
#include "core/algorithms/fixed_window.h"
#include "core/algorithms/gcra.h"
#include "core/algorithms/leaky_bucket.h"
#include "core/algorithms/sliding_log.h"
#include "core/algorithms/sliding_window.h"
#include "core/algorithms/smooth_bursty.h"
#include "core/algorithms/smooth_warming_up.h"
#include "core/time.h"
#include "test_support.h"

namespace rlimit::core::algorithms {
namespace {

using Rng = std::mt19937_64;

std::int64_t pick(Rng& rng, std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}

std::int64_t random_period(Rng& rng) {
  static constexpr std::int64_t kPeriods[] = {
      1, 7, 1000, 999'983, kUsPerSecond, 3'000'001, 60 * kUsPerSecond, kMaxPeriod};
  return kPeriods[pick(rng, 0, std::size(kPeriods) - 1)];
}

// Random parameters per algorithm, and the limit costs are drawn around.
template <class A>
struct Random;

template <>
struct Random<Gcra> {
  static Gcra::Params params(Rng& rng) {
    Gcra::Params p{pick(rng, 0, 20), pick(rng, 1, 1000), random_period(rng)};
    if (pick(rng, 0, 9) == 0) p.count = kMaxCost;
    return p;
  }
  static std::int64_t scale(const Gcra::Params& p) { return p.max_burst + 1; }
};

template <>
struct Random<LeakyBucket> {
  static LeakyBucket::Params params(Rng& rng) {
    LeakyBucket::Params p;
    p.limit = pick(rng, 1, 1000);
    p.period_us = random_period(rng);
    p.capacity = pick(rng, 0, 20);
    p.mode = pick(rng, 0, 1) == 0 ? LeakyBucket::Mode::kMeter : LeakyBucket::Mode::kShaper;
    p.max_delay_us = pick(rng, 0, 1) == 0 ? -1 : pick(rng, 0, 3 * p.period_us / p.limit + 5);
    return p;
  }
  static std::int64_t scale(const LeakyBucket::Params& p) { return p.capacity; }
};

template <>
struct Random<FixedWindow> {
  static FixedWindow::Params params(Rng& rng) { return {pick(rng, 1, 20), random_period(rng)}; }
  static std::int64_t scale(const FixedWindow::Params& p) { return p.limit; }
};

template <>
struct Random<SlidingWindow> {
  static SlidingWindow::Params params(Rng& rng) { return {pick(rng, 1, 20), random_period(rng)}; }
  static std::int64_t scale(const SlidingWindow::Params& p) { return p.limit; }
};

template <>
struct Random<SlidingLog> {
  static SlidingLog::Params params(Rng& rng) {
    return {pick(rng, 1, 20), random_period(rng), pick(rng, 1, 30)};
  }
  static std::int64_t scale(const SlidingLog::Params& p) { return p.limit; }
};

template <>
struct Random<SmoothBursty> {
  static SmoothBursty::Params params(Rng& rng) {
    SmoothBursty::Params p;
    p.permits = pick(rng, 1, 20);
    p.period_us = random_period(rng);
    if (p.period_us == kMaxPeriod) p.period_us = 1000 * kUsPerSecond;
    p.max_burst_us = pick(rng, 0, 3 * p.period_us);
    p.max_wait_us = pick(rng, 0, 2) == 0 ? -1 : pick(rng, 0, 2 * p.period_us);
    return p;
  }
  static std::int64_t scale(const SmoothBursty::Params& p) { return p.permits; }
};

template <>
struct Random<SmoothWarmingUp> {
  static SmoothWarmingUp::Params params(Rng& rng) {
    SmoothWarmingUp::Params p;
    p.permits = pick(rng, 1, 20);
    p.period_us = random_period(rng);
    if (p.period_us == kMaxPeriod) p.period_us = 1000 * kUsPerSecond;
    p.warmup_us = pick(rng, 0, 5 * p.period_us);
    p.cold_factor = 3;  // exact; other factors round towards waiting (smooth_test.cc)
    p.max_wait_us = pick(rng, 0, 2) == 0 ? -1 : pick(rng, 0, 2 * p.period_us);
    return p;
  }
  static std::int64_t scale(const SmoothWarmingUp::Params& p) { return p.permits; }
};

template <>
struct Random<Concurrency> {
  static Concurrency::Params params(Rng& rng) { return {pick(rng, 1, 10), random_period(rng)}; }
  static std::int64_t scale(const Concurrency::Params& p) { return p.max_in_flight; }
};

template <class A>
class AlgorithmPropertiesTest : public ::testing::Test {
 protected:
  using Params = typename A::Params;
  using State = typename A::State;

  std::int64_t random_cost(Rng& rng, const Params& p) {
    const std::int64_t scale = Random<A>::scale(p);
    switch (pick(rng, 0, 9)) {
      case 0:
        return 0;
      case 1:
        return scale + pick(rng, 1, 3);  // above any capacity (the smooth ones reserve it)
      default:
        return pick(rng, 1, std::max<std::int64_t>(1, scale / 2 + 1));
    }
  }

  // A step of the clock: mostly small, sometimes about a period, a long idle,
  // or backwards.
  TimeUs random_step(Rng& rng, const Params& p) {
    const std::int64_t period = std::min<std::int64_t>(period_of(p), 1'000'000'000'000);
    switch (pick(rng, 0, 19)) {
      case 0:
        return -pick(rng, 1, period);  // the clock steps back
      case 1:
        return pick(rng, period, 10 * period);  // idle
      case 2:
        return 0;
      default:
        return pick(rng, 1, std::max<std::int64_t>(1, period / 8));
    }
  }

  static std::int64_t period_of(const Params& p) {
    if constexpr (std::is_same_v<A, Concurrency>) {
      return p.lease_ttl_us;
    } else {
      return p.period_us;
    }
  }

  using i128_t = __int128;
  static bool within_time(i128_t t) { return t > -kMaxTimeUs && t < kMaxTimeUs; }

  // Checks every property at (state, cost, now); returns the verdict.
  Verdict check(const State& state, const Params& p, std::int64_t cost, TimeUs now, Rng& rng) {
    const Verdict v = A::evaluate(state, p, cost, now);
    SCOPED_TRACE(describe(v) + " cost=" + std::to_string(cost) + " now=" + std::to_string(now));
    EXPECT_GE(v.remaining, 0);
    EXPECT_GE(v.reset_after_us, 0);
    EXPECT_GE(v.delay_us, 0);
    if (v.allowed) {
      EXPECT_EQ(v.retry_after_us, 0);
      EXPECT_EQ(v.excess, 0);
      // The verdict describes the state the commit leaves.
      State after = state;
      A::commit(after, p, cost, now);
      const Verdict peek = A::evaluate(after, p, 0, now);
      EXPECT_EQ(peek.remaining, v.remaining);
      EXPECT_EQ(peek.reset_after_us, v.reset_after_us);
      check_reset(after, p, now, v.reset_after_us);
      // Smaller costs are allowed too.
      if (cost > 0) {
        EXPECT_TRUE(A::evaluate(state, p, pick(rng, 0, cost - 1), now).allowed);
      }
    } else {
      EXPECT_GT(v.excess, 0);
      EXPECT_TRUE(v.retry_after_us == -1 || v.retry_after_us > 0);
      check_reset(state, p, now, v.reset_after_us);
      if (v.retry_after_us > 0 && within_time(static_cast<i128_t>(now) + v.retry_after_us)) {
        EXPECT_TRUE(A::evaluate(state, p, cost, now + v.retry_after_us).allowed)
            << "not allowed after retry_after";
        EXPECT_FALSE(A::evaluate(state, p, cost, now + v.retry_after_us - 1).allowed)
            << "allowed before retry_after";
      }
      if (v.retry_after_us == -1) {
        EXPECT_FALSE(A::evaluate(state, p, cost, now + (kMaxTimeUs >> 2)).allowed);
      }
    }
    // Time only helps.
    const TimeUs later = now + pick(rng, 0, 3 * period_of(p));
    if (within_time(later)) {
      const Verdict w = A::evaluate(state, p, cost, later);
      if (v.allowed) {
        EXPECT_TRUE(w.allowed) << "allowed at " << now << " but not at " << later;
      }
      if (w.allowed == v.allowed) {
        EXPECT_GE(w.remaining, v.remaining);
      }
    }
    // Consumption only hurts.
    State charged = state;
    A::charge_remote(charged, p, pick(rng, 0, 2 * Random<A>::scale(p)), now);
    const Verdict c = A::evaluate(charged, p, cost, now);
    if (c.allowed) {
      EXPECT_TRUE(v.allowed);
    }
    if (c.allowed == v.allowed) {
      EXPECT_LE(c.remaining, v.remaining);
    }
    // A zero cost changes nothing.
    State zero = state;
    A::commit(zero, p, 0, now);
    for (const TimeUs t : {now, now + 1, now + pick(rng, 0, 2 * period_of(p))}) {
      if (!within_time(t)) continue;
      EXPECT_EQ(A::evaluate(zero, p, cost, t), A::evaluate(state, p, cost, t));
    }
    // Idle means fresh.
    if (A::is_idle(state, p, now)) {
      const State fresh = A::fresh(p, now);
      for (const TimeUs t : {now, now + pick(rng, 0, 2 * period_of(p))}) {
        if (!within_time(t)) continue;
        EXPECT_TRUE(A::is_idle(state, p, t));
        EXPECT_EQ(A::evaluate(state, p, cost, t), A::evaluate(fresh, p, cost, t));
      }
    }
    return v;
  }

  // reset_after is exact: idle then, and not a microsecond earlier.
  void check_reset(const State& state, const Params& p, TimeUs now, std::int64_t reset) {
    if (!within_time(static_cast<i128_t>(now) + reset)) return;
    EXPECT_TRUE(A::is_idle(state, p, now + reset)) << "not idle after reset_after";
    if (reset > 0) {
      EXPECT_FALSE(A::is_idle(state, p, now + reset - 1)) << "idle before reset_after";
    }
  }

  void run(std::uint64_t seed) {
    Rng rng(seed);
    Params p = Random<A>::params(rng);
    ASSERT_EQ(A::validate(p), nullptr);
    SCOPED_TRACE("seed " + std::to_string(seed));
    TimeUs now = pick(rng, 0, std::int64_t{1} << 40);
    State state = A::fresh(p, now);
    EXPECT_TRUE(A::is_idle(state, p, now));
    for (int step = 0; step < 150 && !HasFailure(); ++step) {
      now = std::max<TimeUs>(0, now + random_step(rng, p));
      const std::int64_t cost = random_cost(rng, p);
      const Verdict v = check(state, p, cost, now, rng);
      switch (pick(rng, 0, 9)) {
        case 0:  // remote consumption, sometimes a large debt
          A::charge_remote(state, p, pick(rng, 0, 3 * Random<A>::scale(p)), now);
          break;
        case 1:  // soft mode: admitted over the limit
          A::commit(state, p, cost, now);
          break;
        default:
          if (v.allowed) A::commit(state, p, cost, now);
      }
    }
  }
};

using Algorithms = ::testing::Types<Gcra, LeakyBucket, FixedWindow, SlidingWindow, SlidingLog,
                                    SmoothBursty, SmoothWarmingUp, Concurrency>;
TYPED_TEST_SUITE(AlgorithmPropertiesTest, Algorithms);

TYPED_TEST(AlgorithmPropertiesTest, RandomSequences) {
  for (std::uint64_t seed = 1; seed <= 200 && !this->HasFailure(); ++seed) this->run(seed);
}

TYPED_TEST(AlgorithmPropertiesTest, FreshStateIsIdleAndAdmitsItsCapacity) {
  Rng rng(7);
  for (int i = 0; i < 200; ++i) {
    const auto p = Random<TypeParam>::params(rng);
    const TimeUs now = pick(rng, 0, std::int64_t{1} << 40);
    const auto fresh = TypeParam::fresh(p, now);
    EXPECT_TRUE(TypeParam::is_idle(fresh, p, now));
    EXPECT_TRUE(TypeParam::evaluate(fresh, p, 0, now).allowed);
    // A full capacity at once, without waiting (a shaper's first request has
    // nothing ahead of it; a smooth limiter's cost is paid by the next caller).
    const Verdict v = TypeParam::evaluate(fresh, p, Random<TypeParam>::scale(p), now);
    EXPECT_TRUE(v.allowed) << describe(v);
    EXPECT_EQ(v.delay_us, 0);
  }
}

TEST(ReplicationTest, WhatEachAlgorithmPromisesAcrossACluster) {
  EXPECT_EQ(Gcra::replication({0, 1, 1}), Replication::kExact);
  EXPECT_EQ(LeakyBucket::replication({1, 1, 1, LeakyBucket::Mode::kMeter}), Replication::kExact);
  EXPECT_EQ(LeakyBucket::replication({1, 1, 1, LeakyBucket::Mode::kShaper}),
            Replication::kApproximate);
  EXPECT_EQ(FixedWindow::replication({1, 1}), Replication::kApproximate);
  EXPECT_EQ(SlidingWindow::replication({1, 1}), Replication::kApproximate);
  EXPECT_EQ(SlidingLog::replication({1, 1, 1}), Replication::kApproximate);
  EXPECT_EQ(SmoothBursty::replication({1, 1, 1, 0}), Replication::kExact);
  EXPECT_EQ(SmoothBursty::replication({1, 1, 1, -1}), Replication::kApproximate);
  EXPECT_EQ(SmoothWarmingUp::replication({1, 1, 1, 3, 0}), Replication::kExact);
  EXPECT_EQ(Concurrency::replication({1, 1}), Replication::kLocalOnly);
  EXPECT_STREQ(replication_name(Replication::kLocalOnly), "local-only");
}

}  // namespace
}  // namespace rlimit::core::algorithms
