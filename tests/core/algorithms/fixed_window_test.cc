#include "core/algorithms/fixed_window.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "core/time.h"
#include "test_support.h"

namespace rlimit::core::algorithms {
namespace {

constexpr FixedWindow::Params kThreePerSecond{3, kUsPerSecond};

TEST(FixedWindowTest, CountsPerAlignedWindow) {
  FixedWindow::State s = FixedWindow::fresh(kThreePerSecond, 500'000);
  for (int i = 0; i < 3; ++i) {
    const Verdict v = FixedWindow::evaluate(s, kThreePerSecond, 1, 500'000);
    ASSERT_TRUE(v.allowed);
    EXPECT_EQ(v.remaining, 2 - i);
    EXPECT_EQ(v.reset_after_us, 500'000);  // the window ends at 1 s
    FixedWindow::commit(s, kThreePerSecond, 1, 500'000);
  }
  const Verdict v = FixedWindow::evaluate(s, kThreePerSecond, 1, 500'000);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.retry_after_us, 500'000);
  EXPECT_EQ(v.excess, 1);
  // The last microsecond of the window, then the first of the next.
  EXPECT_FALSE(FixedWindow::evaluate(s, kThreePerSecond, 1, 999'999).allowed);
  EXPECT_TRUE(FixedWindow::evaluate(s, kThreePerSecond, 3, kUsPerSecond).allowed);
  EXPECT_TRUE(FixedWindow::is_idle(s, kThreePerSecond, kUsPerSecond));
}

TEST(FixedWindowTest, TwiceTheLimitCanPassAcrossAnEdge) {
  // The textbook weakness: 3 at the end of one window and 3 at the start of
  // the next, 2 microseconds apart.
  FixedWindow::State s = FixedWindow::fresh(kThreePerSecond, 0);
  int admitted = 0;
  for (const TimeUs t : {999'999, 999'999, 999'999, 1'000'000, 1'000'000, 1'000'000}) {
    if (FixedWindow::evaluate(s, kThreePerSecond, 1, t).allowed) {
      FixedWindow::commit(s, kThreePerSecond, 1, t);
      ++admitted;
    }
  }
  EXPECT_EQ(admitted, 6);
}

TEST(FixedWindowTest, WindowsAlignToTheEpochOfTheTimeBase) {
  const FixedWindow::Params minute{1, 60 * kUsPerSecond};
  // Negative times floor: [-60 s, 0) is one window.
  FixedWindow::State s = FixedWindow::fresh(minute, -1);
  FixedWindow::commit(s, minute, 1, -1);
  EXPECT_EQ(s.window, -1);
  EXPECT_FALSE(FixedWindow::evaluate(s, minute, 1, -60 * kUsPerSecond).allowed);
  EXPECT_TRUE(FixedWindow::evaluate(s, minute, 1, 0).allowed);
  EXPECT_EQ(FixedWindow::evaluate(s, minute, 1, -30 * kUsPerSecond).retry_after_us,
            30 * kUsPerSecond);
}

// The reference: a map from window index to count.
TEST(FixedWindowTest, MatchesAMapOfWindowsOnRandomArrivals) {
  std::mt19937_64 rng(31);
  for (int trial = 0; trial < 100; ++trial) {
    const FixedWindow::Params p{1 + static_cast<std::int64_t>(rng() % 12),
                                1 + static_cast<std::int64_t>(rng() % 2'000'000)};
    std::map<std::int64_t, std::int64_t> counts;
    TimeUs now = static_cast<TimeUs>(rng() % 1'000'000'000);
    FixedWindow::State s = FixedWindow::fresh(p, now);
    for (int i = 0; i < 400; ++i) {
      now += static_cast<TimeUs>(rng() % (p.period_us / 2 + 2));
      const std::int64_t window = now / p.period_us;
      const std::int64_t cost = static_cast<std::int64_t>(rng() % (p.limit + 2));
      const std::int64_t count = counts[window];
      const bool fits = count + cost <= p.limit;
      const Verdict v = FixedWindow::evaluate(s, p, cost, now);
      ASSERT_EQ(v.allowed, fits) << "trial " << trial << " step " << i;
      ASSERT_EQ(v.remaining, p.limit - count - (fits ? cost : 0));
      const TimeUs window_end = (window + 1) * p.period_us;
      const std::int64_t held = count + (fits ? cost : 0);
      ASSERT_EQ(v.reset_after_us, held == 0 ? 0 : window_end - now);
      if (fits) {
        counts[window] += cost;
        FixedWindow::commit(s, p, cost, now);
      } else {
        ASSERT_EQ(v.retry_after_us, cost > p.limit ? -1 : window_end - now);
      }
    }
  }
}

TEST(FixedWindowTest, DebtIsCarriedIntoLaterWindows) {
  const FixedWindow::Params p{10, kUsPerSecond};
  FixedWindow::State s = FixedWindow::fresh(p, 0);
  FixedWindow::charge_remote(s, p, 25, 100);  // the cluster overspent: 25 of 10
  Verdict v = FixedWindow::evaluate(s, p, 1, 100);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.retry_after_us, 2 * kUsPerSecond - 100);  // 15 carried, then 5
  EXPECT_EQ(v.reset_after_us, 3 * kUsPerSecond - 100);
  EXPECT_FALSE(FixedWindow::evaluate(s, p, 1, kUsPerSecond).allowed);
  v = FixedWindow::evaluate(s, p, 5, 2 * kUsPerSecond);
  EXPECT_TRUE(v.allowed);
  EXPECT_EQ(v.remaining, 0);
  EXPECT_FALSE(FixedWindow::evaluate(s, p, 6, 2 * kUsPerSecond).allowed);
  EXPECT_TRUE(FixedWindow::evaluate(s, p, 10, 3 * kUsPerSecond).allowed);
  // Over the three windows: 25 + 5 = 30 = 3 x the limit.
}

// A node's fair share refused while the window had room (fixed_window.h,
// "Credit"): that room is given back in the next window, and only there.
TEST(FixedWindowTest, RoomAShareRefusedIsGivenBackInTheNextWindow) {
  const FixedWindow::Params p{10, kUsPerSecond};
  FixedWindow::State s = FixedWindow::fresh(p, 0);
  FixedWindow::commit(s, p, 4, 100);
  FixedWindow::note_share_refusal(s, p, 200);  // room for 6
  EXPECT_EQ(s.credit_steps, 6);
  // Nothing changes in this window.
  EXPECT_EQ(FixedWindow::evaluate(s, p, 0, 300).remaining, 6);
  EXPECT_FALSE(FixedWindow::evaluate(s, p, 7, 300).allowed);
  // The next admits 16 (reported as at most the limit) ...
  EXPECT_TRUE(FixedWindow::evaluate(s, p, 16, kUsPerSecond).allowed);
  EXPECT_FALSE(FixedWindow::evaluate(s, p, 17, kUsPerSecond).allowed);
  EXPECT_EQ(FixedWindow::evaluate(s, p, 0, kUsPerSecond).remaining, 10);
  EXPECT_EQ(FixedWindow::evaluate(s, p, 10, kUsPerSecond).remaining, 6);
  EXPECT_FALSE(FixedWindow::is_idle(s, p, kUsPerSecond));
  // ... over the two windows, 4 + 16 = 2 x the limit; unused, it lapses.
  EXPECT_TRUE(FixedWindow::is_idle(s, p, 2 * kUsPerSecond));
  EXPECT_TRUE(FixedWindow::evaluate(s, p, 10, 2 * kUsPerSecond).allowed);
  EXPECT_FALSE(FixedWindow::evaluate(s, p, 11, 2 * kUsPerSecond).allowed);
  // Without the note (a node no share gates never notes one): the textbook
  // counter.
  FixedWindow::State plain = FixedWindow::fresh(p, 0);
  FixedWindow::commit(plain, p, 4, 100);
  EXPECT_TRUE(FixedWindow::evaluate(plain, p, 10, kUsPerSecond).allowed);
  EXPECT_FALSE(FixedWindow::evaluate(plain, p, 11, kUsPerSecond).allowed);
}

// Consumption counted after the note took that room: own admissions and news
// lower the credit (news of consumption from before the note too: the room
// was smaller than the state knew); a later refusal notes the room anew; a
// window whose count reached the limit gives nothing back.
TEST(FixedWindowTest, ACreditIsUsedUpByLaterConsumptionOrReplaced) {
  const FixedWindow::Params p{10, kUsPerSecond};
  FixedWindow::State s = FixedWindow::fresh(p, 0);
  FixedWindow::note_share_refusal(s, p, 100);  // room for 10
  EXPECT_EQ(s.credit_steps, 10);
  FixedWindow::commit(s, p, 3, 200);
  EXPECT_EQ(s.credit_steps, 7);
  FixedWindow::charge_remote(s, p, 5, 300);
  EXPECT_EQ(s.credit_steps, 2);
  EXPECT_EQ(FixedWindow::at(s, p, kUsPerSecond).count, -2);
  FixedWindow::note_share_refusal(s, p, 400);  // room for 2, as known now
  EXPECT_EQ(s.credit_steps, 2);
  FixedWindow::charge_remote(s, p, 4, 500);  // the window overspent: 12 of 10
  EXPECT_EQ(s.credit_steps, 0);
  const FixedWindow::State next = FixedWindow::at(s, p, kUsPerSecond);
  EXPECT_EQ(next.count, 2);  // the debt, not a credit
  EXPECT_EQ(next.credit_steps, 0);
  // A credit given back and refused again is noted again, up to the limit.
  FixedWindow::State again = FixedWindow::fresh(p, 0);
  FixedWindow::note_share_refusal(again, p, 100);
  FixedWindow::note_share_refusal(again, p, kUsPerSecond + 100);  // room for 20
  EXPECT_EQ(again.credit_steps, 10);
  EXPECT_EQ(FixedWindow::at(again, p, 2 * kUsPerSecond).count, -10);
  // Above 2047 the credit is kept in steps of limit / 2047, rounded down:
  // never more given back than was refused.
  const FixedWindow::Params big{1'000'000, kUsPerSecond};
  FixedWindow::State b = FixedWindow::fresh(big, 0);
  FixedWindow::commit(b, big, 1, 100);
  FixedWindow::note_share_refusal(b, big, 200);  // room for 999,999
  EXPECT_EQ(b.credit_steps, 2046);
  EXPECT_EQ(FixedWindow::at(b, big, kUsPerSecond).count, -999'511);
  // The clock behind the state's window notes nothing.
  FixedWindow::State behind = FixedWindow::fresh(p, 5 * kUsPerSecond);
  FixedWindow::commit(behind, p, 1, 5 * kUsPerSecond);
  FixedWindow::note_share_refusal(behind, p, 4 * kUsPerSecond);
  EXPECT_EQ(behind.credit_steps, 0);
}

TEST(FixedWindowTest, ClockSteppingBackKeepsTheLaterWindowsCount) {
  FixedWindow::State s = FixedWindow::fresh(kThreePerSecond, 5 * kUsPerSecond);
  FixedWindow::commit(s, kThreePerSecond, 3, 5 * kUsPerSecond);
  // Back into window 4: still window 5's count, nothing to admit.
  const Verdict back = FixedWindow::evaluate(s, kThreePerSecond, 1, 4'500'000);
  EXPECT_FALSE(back.allowed);
  EXPECT_EQ(back.retry_after_us, 1'500'000);  // window 6 starts at 6 s
  FixedWindow::commit(s, kThreePerSecond, 0, 4'500'000);
  EXPECT_EQ(s.window, 5);
  EXPECT_FALSE(FixedWindow::evaluate(s, kThreePerSecond, 1, 5'999'999).allowed);
  EXPECT_TRUE(FixedWindow::evaluate(s, kThreePerSecond, 1, 6 * kUsPerSecond).allowed);
}

TEST(FixedWindowTest, ZeroLargeAndHuge) {
  FixedWindow::State s = FixedWindow::fresh(kThreePerSecond, 0);
  EXPECT_TRUE(FixedWindow::evaluate(s, kThreePerSecond, 0, 0).allowed);
  FixedWindow::commit(s, kThreePerSecond, 0, 0);
  EXPECT_TRUE(FixedWindow::is_idle(s, kThreePerSecond, 0));
  EXPECT_EQ(FixedWindow::evaluate(s, kThreePerSecond, 4, 0).retry_after_us, -1);
  // A 100-year window with a 2^50 limit.
  const FixedWindow::Params huge{kMaxCost, kMaxPeriod};
  FixedWindow::State h = FixedWindow::fresh(huge, 0);
  EXPECT_TRUE(FixedWindow::evaluate(h, huge, kMaxCost, 0).allowed);
  FixedWindow::commit(h, huge, kMaxCost, 0);
  const Verdict v = FixedWindow::evaluate(h, huge, 1, 1);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.retry_after_us, kMaxPeriod - 1);
  // Endless debt saturates instead of overflowing.
  for (int i = 0; i < 10'000; ++i) FixedWindow::charge_remote(h, huge, kMaxCost, 1);
  EXPECT_FALSE(FixedWindow::evaluate(h, huge, 0, 1).allowed);
}

TEST(FixedWindowTest, ValidatesParameters) {
  EXPECT_EQ(FixedWindow::validate(kThreePerSecond), nullptr);
  EXPECT_NE(FixedWindow::validate({0, kUsPerSecond}), nullptr);
  EXPECT_NE(FixedWindow::validate({kMaxCost + 1, kUsPerSecond}), nullptr);
  EXPECT_NE(FixedWindow::validate({1, 0}), nullptr);
  EXPECT_NE(FixedWindow::validate({1, kMaxPeriod + 1}), nullptr);
}

}  // namespace
}  // namespace rlimit::core::algorithms
