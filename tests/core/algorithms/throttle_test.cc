#include "core/algorithms/throttle.h"

#include <gtest/gtest.h>

#include "core/algorithms/concurrency.h"
#include "core/algorithms/fixed_window.h"
#include "core/algorithms/gcra.h"
#include "core/algorithms/leaky_bucket.h"
#include "core/time.h"
#include "test_support.h"

namespace rlimit::core::algorithms {
namespace {

Verdict allowed_with_delay(std::int64_t delay_us) {
  Verdict v;
  v.allowed = true;
  v.limit = 100;
  v.remaining = 10;
  v.delay_us = delay_us;
  return v;
}

Verdict denied_by(std::int64_t excess) {
  Verdict v;
  v.allowed = false;
  v.limit = 100;
  v.excess = excess;
  v.retry_after_us = 1000;
  v.delay_us = 777;
  return v;
}

TEST(ThrottleTest, HardIsTheVerdict) {
  const ThrottleParams hard{};
  EXPECT_EQ(apply_throttle(allowed_with_delay(5), hard, 0),
            (ThrottleDecision{true, true, false, 5}));
  EXPECT_EQ(apply_throttle(denied_by(1), hard, 0), (ThrottleDecision{false, false, true, 0}));
}

TEST(ThrottleTest, SoftAdmitsAPercentageOver) {
  const ThrottleParams soft{ThrottleMode::kSoft, 10};
  EXPECT_EQ(apply_throttle(denied_by(10), soft, 0), (ThrottleDecision{true, true, true, 777}));
  EXPECT_EQ(apply_throttle(denied_by(11), soft, 0), (ThrottleDecision{false, false, true, 0}));
  EXPECT_TRUE(apply_throttle(allowed_with_delay(0), soft, 0).charge);
}

TEST(ThrottleTest, ShadowAlwaysAdmitsAndChargesOnlyWhatHardWould) {
  const ThrottleParams shadow{ThrottleMode::kShadow};
  EXPECT_EQ(apply_throttle(allowed_with_delay(5), shadow, 0),
            (ThrottleDecision{true, true, false, 0}));  // observes, never delays
  EXPECT_EQ(apply_throttle(denied_by(50), shadow, 0), (ThrottleDecision{true, false, true, 0}));
}

TEST(ThrottleTest, ElasticAdmitsBeyondWhileLoadIsLow) {
  const ThrottleParams elastic{ThrottleMode::kElastic, 0, 700};
  EXPECT_EQ(apply_throttle(denied_by(50), elastic, 699), (ThrottleDecision{true, false, true, 0}));
  EXPECT_EQ(apply_throttle(denied_by(50), elastic, 700), (ThrottleDecision{false, false, true, 0}));
  EXPECT_EQ(apply_throttle(allowed_with_delay(3), elastic, 1000),
            (ThrottleDecision{true, true, false, 3}));
}

TEST(ThrottleTest, Validates) {
  EXPECT_EQ(validate(ThrottleParams{}), nullptr);
  EXPECT_EQ(validate(ThrottleParams{ThrottleMode::kSoft, 100}), nullptr);
  EXPECT_NE(validate(ThrottleParams{ThrottleMode::kSoft, 101}), nullptr);
  EXPECT_NE(validate(ThrottleParams{ThrottleMode::kSoft, -1}), nullptr);
  EXPECT_NE(validate(ThrottleParams{ThrottleMode::kElastic, 0, -1}), nullptr);
  EXPECT_NE(validate(ThrottleParams{static_cast<ThrottleMode>(9)}), nullptr);
  EXPECT_STREQ(throttle_mode_name(ThrottleMode::kShadow), "shadow");
}

// Drives one algorithm through one throttle mode: evaluate, decide, commit
// what the decision says to charge. Returns how many unit requests passed.
template <class A>
int drive(const typename A::Params& p, const ThrottleParams& t, std::int64_t load, int requests,
          typename A::State& s, TimeUs now, int* over = nullptr) {
  int passed = 0;
  for (int i = 0; i < requests; ++i) {
    const ThrottleDecision d = apply_throttle(A::evaluate(s, p, 1, now), t, load);
    if (d.allowed) ++passed;
    if (d.allowed && d.charge) A::commit(s, p, 1, now);
    if (over != nullptr && d.over_limit) ++*over;
  }
  return passed;
}

TEST(ThrottleTest, SoftOvershootIsDebt) {
  // 100 per window with 10% soft: 110 pass in the first window, and the 10
  // are repaid in the next: soft widens the burst, not the rate.
  const FixedWindow::Params p{100, kUsPerSecond};
  const ThrottleParams soft{ThrottleMode::kSoft, 10};
  FixedWindow::State s = FixedWindow::fresh(p, 0);
  EXPECT_EQ(drive<FixedWindow>(p, soft, 0, 200, s, 0), 110);
  EXPECT_EQ(drive<FixedWindow>(p, soft, 0, 200, s, kUsPerSecond), 100);
  // The same for GCRA: a burst of 11 instead of 10, then the rate (one per
  // 100 ms) and no more.
  const Gcra::Params g{9, 10, kUsPerSecond};
  const ThrottleParams gsoft{ThrottleMode::kSoft, 10};
  Gcra::State gs = Gcra::fresh(g, 0);
  EXPECT_EQ(drive<Gcra>(g, gsoft, 0, 50, gs, 0), 11);
  EXPECT_EQ(drive<Gcra>(g, gsoft, 0, 50, gs, 99'999), 0);
  EXPECT_EQ(drive<Gcra>(g, gsoft, 0, 50, gs, 100'000), 1);
  EXPECT_EQ(drive<Gcra>(g, gsoft, 0, 50, gs, 200'000), 1);
}

TEST(ThrottleTest, ShadowStateEvolvesAsIfEnforced) {
  const FixedWindow::Params p{10, kUsPerSecond};
  FixedWindow::State shadow = FixedWindow::fresh(p, 0);
  FixedWindow::State hard = FixedWindow::fresh(p, 0);
  int would_deny = 0;
  EXPECT_EQ(
      drive<FixedWindow>(p, ThrottleParams{ThrottleMode::kShadow}, 0, 25, shadow, 0, &would_deny),
      25);
  EXPECT_EQ(drive<FixedWindow>(p, ThrottleParams{}, 0, 25, hard, 0), 10);
  EXPECT_EQ(would_deny, 15);
  EXPECT_EQ(shadow.count, hard.count);
}

TEST(ThrottleTest, ElasticExtraIsFreeAndLeavesNoDebt) {
  const LeakyBucket::Params p{10, kUsPerSecond, 10, LeakyBucket::Mode::kMeter};
  const ThrottleParams elastic{ThrottleMode::kElastic, 0, 800};
  LeakyBucket::State s = LeakyBucket::fresh(p, 0);
  EXPECT_EQ(drive<LeakyBucket>(p, elastic, 100, 50, s, 0), 50);  // load 10%: all pass
  // Load rises: back to the hard limit at once, with no debt to repay.
  EXPECT_EQ(drive<LeakyBucket>(p, elastic, 900, 50, s, 0), 0);
  EXPECT_EQ(drive<LeakyBucket>(p, elastic, 900, 50, s, kUsPerSecond), 10);
}

TEST(ThrottleTest, SoftConcurrencyHoldsExtraLeases) {
  const Concurrency::Params p{10, kUsPerSecond};
  Concurrency::State s = Concurrency::fresh(p, 0);
  EXPECT_EQ(drive<Concurrency>(p, ThrottleParams{ThrottleMode::kSoft, 20}, 0, 50, s, 0), 12);
  EXPECT_EQ(Concurrency::in_flight(s, 0), 12);
}

}  // namespace
}  // namespace rlimit::core::algorithms
