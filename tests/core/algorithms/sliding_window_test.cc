#include "core/algorithms/sliding_window.h"

#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <vector>

#include "core/algorithms/sliding_log.h"
#include "core/time.h"
#include "test_support.h"

namespace rlimit::core::algorithms {
namespace {

constexpr std::int64_t kMinute = 60 * kUsPerSecond;

// Cloudflare's example ("How we built rate limiting capable of scaling to
// millions of domains"): 50 per minute, 42 in the previous minute, 18 so far
// in this one, 15 s into it: 42 * 45/60 + 18 = 49.5. Room for half a request:
// a peek fits, a request does not (we count the request itself), until the
// previous minute's weight has fallen enough.
TEST(SlidingWindowTest, CloudflareExample) {
  const SlidingWindow::Params p{50, kMinute};
  const SlidingWindow::State s{.window = 1, .previous = 42, .carry_steps = 0, .current = 18};
  const TimeUs now = kMinute + 15 * kUsPerSecond;
  const Verdict peek = SlidingWindow::evaluate(s, p, 0, now);
  EXPECT_TRUE(peek.allowed);
  EXPECT_EQ(peek.remaining, 0);  // floor(50 - 49.5)
  const Verdict v = SlidingWindow::evaluate(s, p, 1, now);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.excess, 1);  // 50.5 - 50, rounded up
  // 42 * (60 - e) / 60 + 19 <= 50 from e = 15.714286 s.
  EXPECT_EQ(v.retry_after_us, 714'286);
  EXPECT_TRUE(SlidingWindow::evaluate(s, p, 1, now + 714'286).allowed);
  EXPECT_EQ(v.reset_after_us, 2 * kMinute - 15 * kUsPerSecond);  // both counts gone
}

TEST(SlidingWindowTest, TheEdgeIsSmoothedNotDoubled) {
  // Where a fixed window lets 2 * limit through around an edge, the sliding
  // window admits the next window's requests only as the previous fades.
  const SlidingWindow::Params p{10, kUsPerSecond};
  SlidingWindow::State s = SlidingWindow::fresh(p, 0);
  SlidingWindow::commit(s, p, 10, 999'999);
  EXPECT_FALSE(SlidingWindow::evaluate(s, p, 1, kUsPerSecond).allowed);
  EXPECT_EQ(SlidingWindow::evaluate(s, p, 1, kUsPerSecond).retry_after_us, 100'000);
  EXPECT_TRUE(SlidingWindow::evaluate(s, p, 5, 1'500'000).allowed);
  EXPECT_FALSE(SlidingWindow::evaluate(s, p, 6, 1'500'000).allowed);
}

// The reference: the full history of admitted requests, from which the two
// counts are summed afresh at every decision.
TEST(SlidingWindowTest, MatchesCountsSummedFromTheHistory) {
  std::mt19937_64 rng(41);
  for (int trial = 0; trial < 100; ++trial) {
    const SlidingWindow::Params p{1 + static_cast<std::int64_t>(rng() % 12),
                                  1 + static_cast<std::int64_t>(rng() % 2'000'000)};
    std::vector<std::pair<TimeUs, std::int64_t>> history;
    TimeUs now = static_cast<TimeUs>(rng() % 1'000'000'000);
    SlidingWindow::State s = SlidingWindow::fresh(p, now);
    for (int i = 0; i < 300; ++i) {
      now += static_cast<TimeUs>(rng() % (p.period_us / 3 + 2));
      const std::int64_t window = now / p.period_us;
      __int128 previous = 0;
      __int128 current = 0;
      for (const auto& [t, c] : history) {
        if (t / p.period_us == window) current += c;
        if (t / p.period_us == window - 1) previous += c;
      }
      const __int128 offset = now - window * p.period_us;
      const std::int64_t cost = static_cast<std::int64_t>(rng() % (p.limit + 2));
      const __int128 estimate = previous * (p.period_us - offset) + current * p.period_us;
      const __int128 wanted = estimate + static_cast<__int128>(cost) * p.period_us;
      const bool fits = wanted <= static_cast<__int128>(p.limit) * p.period_us;
      const Verdict v = SlidingWindow::evaluate(s, p, cost, now);
      ASSERT_EQ(v.allowed, fits) << "trial " << trial << " step " << i;
      const __int128 room =
          static_cast<__int128>(p.limit) * p.period_us - (fits ? wanted : estimate);
      ASSERT_EQ(v.remaining, room < 0 ? 0 : static_cast<std::int64_t>(room / p.period_us));
      if (fits) {
        history.emplace_back(now, cost);
        SlidingWindow::commit(s, p, cost, now);
      }
    }
  }
}

// The most admitted in any span of one period.
std::int64_t max_in_any_period(const std::vector<TimeUs>& admitted, std::int64_t period_us) {
  std::deque<TimeUs> span;
  std::int64_t most = 0;
  for (const TimeUs t : admitted) {
    span.push_back(t);
    while (span.front() <= t - period_us) span.pop_front();
    most = std::max<std::int64_t>(most, static_cast<std::int64_t>(span.size()));
  }
  return most;
}

// The stated tolerance. The estimate assumes the previous window's requests
// were spread evenly; when they were not, the true count over the last period
// exceeds the limit, but stays below 2 * limit (it is at most
// limit + previous * e / P with e < P). In total, on the same random traffic
// (one to four times the limit), it admits about one request per window fewer
// than the exact log (the fraction of a request the estimate leaves is never
// used: the request itself must fit), and never more than 2% more.
TEST(SlidingWindowTest, AccuracyAgainstTheExactLog) {
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 40; ++trial) {
    const std::int64_t limit = 5 + static_cast<std::int64_t>(rng() % 50);
    const std::int64_t period = kUsPerSecond;
    const SlidingWindow::Params wp{limit, period};
    const SlidingLog::Params lp{limit, period, limit};
    SlidingWindow::State w = SlidingWindow::fresh(wp, 0);
    SlidingLog::State l = SlidingLog::fresh(lp, 0);
    std::vector<TimeUs> window_admitted;
    std::vector<TimeUs> log_admitted;
    // Offered load: 1 to 4 times the limit, in bursts and lulls.
    const std::int64_t mean_gap = period / (limit * (1 + static_cast<std::int64_t>(rng() % 4)));
    TimeUs now = 0;
    while (now < 200 * period) {
      now += static_cast<TimeUs>(rng() % (2 * mean_gap + 1));
      if (SlidingWindow::evaluate(w, wp, 1, now).allowed) {
        SlidingWindow::commit(w, wp, 1, now);
        window_admitted.push_back(now);
      }
      if (SlidingLog::evaluate(l, lp, 1, now).allowed) {
        SlidingLog::commit(l, lp, 1, now);
        log_admitted.push_back(now);
      }
    }
    SCOPED_TRACE("trial " + std::to_string(trial) + " limit " + std::to_string(limit));
    EXPECT_EQ(max_in_any_period(log_admitted, period), limit);  // exact
    EXPECT_LE(max_in_any_period(window_admitted, period), 2 * limit - 1);
    const double ratio = static_cast<double>(window_admitted.size()) / log_admitted.size();
    EXPECT_GE(ratio, 1.0 - 1.0 / limit - 0.01);
    EXPECT_LE(ratio, 1.02);
  }
}

TEST(SlidingWindowTest, AdversarialTrafficReachesTheBound) {
  // The previous window's requests all in its last microsecond, then the
  // current window's admitted greedily as that weight fades: the true count
  // over the period ending at 1.999998 s is 10 + 9 = 2 * limit - 1.
  const SlidingWindow::Params p{10, kUsPerSecond};
  SlidingWindow::State s = SlidingWindow::fresh(p, 0);
  std::vector<TimeUs> admitted;
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(SlidingWindow::evaluate(s, p, 1, 999'999).allowed);
    SlidingWindow::commit(s, p, 1, 999'999);
    admitted.push_back(999'999);
  }
  for (TimeUs now = kUsPerSecond; now < 2 * kUsPerSecond; now += 1) {
    if (SlidingWindow::evaluate(s, p, 1, now).allowed) {
      SlidingWindow::commit(s, p, 1, now);
      admitted.push_back(now);
    }
  }
  EXPECT_EQ(admitted[10], 1'100'000);  // the first as soon as a tenth of the weight is gone
  EXPECT_EQ(max_in_any_period(admitted, p.period_us), 2 * p.limit - 1);
}

TEST(SlidingWindowTest, DebtIsCarriedAndRepaid) {
  const SlidingWindow::Params p{10, kUsPerSecond};
  SlidingWindow::State s = SlidingWindow::fresh(p, 0);
  SlidingWindow::charge_remote(s, p, 25, 0);
  const Verdict v = SlidingWindow::evaluate(s, p, 1, 0);
  EXPECT_FALSE(v.allowed);
  // Window 1: previous 10, current 15 carried: no room. Window 2: previous
  // 10, current 5: room for one more once 10 * (1 - e) + 6 <= 10, e >= 0.6 s.
  EXPECT_EQ(v.retry_after_us, 2'600'000);
  EXPECT_FALSE(SlidingWindow::evaluate(s, p, 1, 2'599'999).allowed);
  EXPECT_TRUE(SlidingWindow::evaluate(s, p, 1, 2'600'000).allowed);
  const SlidingWindow::State w1 = SlidingWindow::at(s, p, kUsPerSecond);
  EXPECT_EQ(w1.previous, 10);
  EXPECT_EQ(w1.current, 15);
  const SlidingWindow::State w3 = SlidingWindow::at(s, p, 3 * kUsPerSecond);
  EXPECT_EQ(w3.previous, 5);
  EXPECT_EQ(w3.current, 0);
  EXPECT_EQ(v.reset_after_us, 4 * kUsPerSecond);
}

// The overshoot tests' start (limit 100 a second): window 0 full, then 40
// of window 1 at 1.5 s, where 100 * 0.5 of the previous window counts.
SlidingWindow::State full_then_40(const SlidingWindow::Params& p) {
  SlidingWindow::State s = SlidingWindow::fresh(p, 0);
  SlidingWindow::commit(s, p, 100, 0);
  EXPECT_TRUE(SlidingWindow::evaluate(s, p, 40, 1'500'000).allowed);
  SlidingWindow::commit(s, p, 40, 1'500'000);
  return s;
}

// Late news puts the estimate above the limit while the count is below it:
// the excess moves from the previous window into the next one's count, so it
// weighs fully there instead of 1 - e.
TEST(SlidingWindowTest, AnOvershootOnNewsIsCarriedIntoTheNextWindow) {
  const SlidingWindow::Params p{100, kUsPerSecond};
  SlidingWindow::State s = full_then_40(p);
  // News of 30 more at 1.6 s: 100 * 0.4 + 70 = 110, 10 over.
  SlidingWindow::charge_remote(s, p, 30, 1'600'000);
  EXPECT_EQ(s.carry_steps, 10);
  EXPECT_FALSE(SlidingWindow::evaluate(s, p, 1, 1'600'000).allowed);
  // News that leaves the estimate within the limit notes nothing more.
  SlidingWindow::charge_remote(s, p, 0, 1'900'000);
  EXPECT_EQ(s.carry_steps, 10);
  const SlidingWindow::State next = SlidingWindow::at(s, p, 2 * kUsPerSecond);
  EXPECT_EQ(next.previous, 60);
  EXPECT_EQ(next.current, 10);
  EXPECT_EQ(next.carry_steps, 0);
  // Two windows on, it has been counted as an ordinary count.
  const SlidingWindow::State later = SlidingWindow::at(s, p, 3 * kUsPerSecond);
  EXPECT_EQ(later.previous, 10);
  EXPECT_EQ(later.current, 0);
  // Without the overshoot the next window would have had 70 and 0: at 2.5 s
  // room for 65, with it for 60.
  EXPECT_EQ(SlidingWindow::evaluate(s, p, 0, 2'500'000).remaining, 60);
}

// Admitted again after the overshoot (demand went on pressing, and the
// estimate, holding the excess, held it back), or news admitted within the
// limit after it: the window's own refusals repaid it, nothing is carried.
TEST(SlidingWindowTest, AnOvershootIsNotCarriedOnceTheWindowAdmitsAgain) {
  const SlidingWindow::Params p{100, kUsPerSecond};
  for (const bool own : {true, false}) {
    SCOPED_TRACE(own);
    SlidingWindow::State s = full_then_40(p);
    SlidingWindow::charge_remote(s, p, 30, 1'600'000);  // 10 over
    ASSERT_EQ(s.carry_steps, 10);
    // Refused until 1.7 s; at 1.99 s 100 * 0.01 + 70 leaves room for 29.
    EXPECT_FALSE(SlidingWindow::evaluate(s, p, 1, 1'699'999).allowed);
    ASSERT_TRUE(SlidingWindow::evaluate(s, p, 29, 1'990'000).allowed);
    if (own) {
      SlidingWindow::commit(s, p, 29, 1'990'000);
    } else {
      SlidingWindow::charge_remote(s, p, 29, 1'990'000);
    }
    EXPECT_EQ(s.carry_steps, 0);
    const SlidingWindow::State next = SlidingWindow::at(s, p, 2 * kUsPerSecond);
    EXPECT_EQ(next.previous, 99);
    EXPECT_EQ(next.current, 0);
  }
}

// News is charged at the time it says the consumption happened (the
// Limiter passes it: docs/cluster.md, "The age of news"): the overshoot is
// the estimate's excess then; news from before the state's window counts in
// it in full, and notes nothing.
TEST(SlidingWindowTest, NewsIsMeasuredAtTheTimeItHappened) {
  const SlidingWindow::Params p{100, kUsPerSecond};
  SlidingWindow::State s = full_then_40(p);
  // 30 more that happened at 1.55 s: 100 * 0.45 + 70 = 115, 15 over then
  // (at 1.6 s it would read 10).
  SlidingWindow::charge_remote(s, p, 30, 1'550'000);
  EXPECT_EQ(s.carry_steps, 15);
  SlidingWindow::State later = full_then_40(p);
  // News of 0.9 s, from the previous window: counted in this one, no note.
  SlidingWindow::charge_remote(later, p, 30, 900'000);
  EXPECT_EQ(later.current, 70);
  EXPECT_EQ(later.carry_steps, 0);
}

// An overshoot the window refused nothing after is carried whole, though
// the window's count ends below the limit: the burst that overshot ended
// early in the window, where the previous window still weighed (with the
// carry bounded by the room left at the end, 5 of these 35 were carried).
TEST(SlidingWindowTest, AnOvershootIsCarriedWholeThoughTheCountEndsBelowTheLimit) {
  const SlidingWindow::Params p{100, kUsPerSecond};
  SlidingWindow::State s = full_then_40(p);
  SlidingWindow::charge_remote(s, p, 55, 1'600'000);  // 100 * 0.4 + 95: 35 over
  ASSERT_EQ(s.carry_steps, 35);
  const SlidingWindow::State next = SlidingWindow::at(s, p, 2 * kUsPerSecond);
  EXPECT_EQ(next.previous, 60);
  EXPECT_EQ(next.current, 35);
}

// A request the window refuses after an overshoot was noted lowers it to the
// estimate's excess then (demand pressed while the room opened: the window's
// refusals repaid the rest), and never raises it; the next window's refusal
// leaves the carried count alone, and a state with no overshoot is not
// written.
TEST(SlidingWindowTest, ARefusalLowersTheOvershootToTheExcessThen) {
  const SlidingWindow::Params p{100, kUsPerSecond};
  SlidingWindow::State s = full_then_40(p);
  SlidingWindow::charge_remote(s, p, 30, 1'600'000);  // 100 * 0.4 + 70: 10 over
  ASSERT_EQ(s.carry_steps, 10);
  SlidingWindow::note_refusal(s, p, 1'650'000);  // 100 * 0.35 + 70: 5 over
  EXPECT_EQ(s.carry_steps, 5);
  SlidingWindow::note_refusal(s, p, 1'620'000);  // 8 over: not raised
  EXPECT_EQ(s.carry_steps, 5);
  SlidingWindow::note_refusal(s, p, 1'800'000);  // 100 * 0.2 + 70 = 90: none
  EXPECT_EQ(s.carry_steps, 0);
  SlidingWindow::State next = SlidingWindow::at(s, p, 2 * kUsPerSecond);
  EXPECT_EQ(next.previous, 70);
  EXPECT_EQ(next.current, 0);

  SlidingWindow::State carried = full_then_40(p);
  SlidingWindow::charge_remote(carried, p, 30, 1'600'000);
  SlidingWindow::note_refusal(carried, p, 2'100'000);  // the next window's
  EXPECT_EQ(carried.window, 2);
  EXPECT_EQ(carried.previous, 60);
  EXPECT_EQ(carried.current, 10);
  EXPECT_EQ(carried.carry_steps, 0);

  SlidingWindow::State none = full_then_40(p);
  SlidingWindow::note_refusal(none, p, 2'100'000);
  EXPECT_EQ(none.window, 1);
  EXPECT_EQ(none.previous, 100);
  EXPECT_EQ(none.current, 40);
}

TEST(SlidingWindowTest, AnOvershootAboveTheLimitsStepsIsRoundedUpThenDown) {
  const SlidingWindow::Params p{1'000'000, kUsPerSecond};
  SlidingWindow::State s = SlidingWindow::fresh(p, 0);
  SlidingWindow::commit(s, p, 1'000'000, 0);
  SlidingWindow::commit(s, p, 400'000, 1'500'000);
  SlidingWindow::charge_remote(s, p, 101'234, 1'500'000);  // 500,000 + 501,234: 1,234 over
  // ceil(1234 * 2047 / 10^6) = 3 steps, carried as floor(3 * 10^6 / 2047).
  EXPECT_EQ(s.carry_steps, 3);
  const SlidingWindow::State next = SlidingWindow::at(s, p, 2 * kUsPerSecond);
  EXPECT_EQ(next.current, 1'465);
  EXPECT_EQ(next.previous, 501'234 - 1'465);
  // At most the limit is stored; a count above the limit is carried as ever.
  SlidingWindow::State big = SlidingWindow::fresh(p, 0);
  SlidingWindow::charge_remote(big, p, 5'000'000, 0);
  EXPECT_EQ(big.carry_steps, SlidingWindow::kCarrySteps);
  EXPECT_EQ(SlidingWindow::at(big, p, kUsPerSecond).current, 4'000'000);
}

// A fair share refused what the window had room for (sliding_window.h,
// "Credit"): the room, as known then, moves at the edge from the next
// window's count into the previous one's, as if admitted where it was
// refused, and is given back in the next window; unused there, it lapses.
TEST(SlidingWindowTest, RoomAShareRefusedIsCreditedAtTheEdge) {
  const SlidingWindow::Params p{100, kUsPerSecond};
  SlidingWindow::State s = full_then_40(p);
  // At 1.5 s: 100 * 0.5 + 40 = 90, room for 10.
  SlidingWindow::note_share_refusal(s, p, 1'500'000);
  EXPECT_EQ(s.carry_steps, -10);
  const SlidingWindow::State next = SlidingWindow::at(s, p, 2 * kUsPerSecond);
  EXPECT_EQ(next.previous, 50);
  EXPECT_EQ(next.current, -10);
  EXPECT_EQ(next.carry_steps, 0);
  // At the edge as without it (50 - 10 = 40); by 2.5 s room for 85, not 80.
  EXPECT_EQ(SlidingWindow::evaluate(s, p, 0, 2 * kUsPerSecond).remaining, 60);
  EXPECT_EQ(SlidingWindow::evaluate(s, p, 0, 2'500'000).remaining, 85);
  // Given back when used there: the next edge counts what was admitted
  // less the credit.
  SlidingWindow::State used = next;
  SlidingWindow::commit(used, p, 70, 2'500'000);
  EXPECT_EQ(SlidingWindow::at(used, p, 3 * kUsPerSecond).previous, 60);
  // Unused, it lapses: no count is left below zero.
  const SlidingWindow::State later = SlidingWindow::at(s, p, 3 * kUsPerSecond);
  EXPECT_EQ(later.previous, 0);
  EXPECT_EQ(later.current, 0);
  EXPECT_TRUE(SlidingWindow::is_idle(s, p, 3 * kUsPerSecond));
  // The room a credit leaves is reported as at most the limit.
  EXPECT_EQ(SlidingWindow::evaluate(s, p, 0, 2'999'999).remaining, 100);
}

// Consumption counted after the note took that room: own admissions and news
// within the limit lower the credit; news that reveals an overshoot replaces
// it, and a later refusal replaces that with the room as known then.
TEST(SlidingWindowTest, ACreditIsUsedUpByLaterConsumptionOrReplaced) {
  const SlidingWindow::Params p{100, kUsPerSecond};
  SlidingWindow::State s = full_then_40(p);
  SlidingWindow::note_share_refusal(s, p, 1'500'000);  // room for 10
  SlidingWindow::commit(s, p, 4, 1'600'000);
  EXPECT_EQ(s.carry_steps, -6);
  SlidingWindow::charge_remote(s, p, 3, 1'600'000);  // 100 * 0.4 + 47: within the limit
  EXPECT_EQ(s.carry_steps, -3);
  SlidingWindow::charge_remote(s, p, 3, 1'600'000);
  EXPECT_EQ(s.carry_steps, 0);
  SlidingWindow::note_share_refusal(s, p, 1'700'000);  // 100 * 0.3 + 50: room for 20
  EXPECT_EQ(s.carry_steps, -20);
  SlidingWindow::charge_remote(s, p, 30, 1'550'000);  // 100 * 0.45 + 80: 25 over then
  EXPECT_EQ(s.carry_steps, 25);
  SlidingWindow::note_share_refusal(s, p, 1'950'000);  // 100 * 0.05 + 80: room for 15
  EXPECT_EQ(s.carry_steps, -15);
  // No room, or a clock behind the window: nothing noted.
  SlidingWindow::State full = SlidingWindow::fresh(p, 0);
  SlidingWindow::commit(full, p, 100, 0);
  SlidingWindow::note_share_refusal(full, p, 500'000);
  EXPECT_EQ(full.carry_steps, 0);
  SlidingWindow::State ahead = full_then_40(p);
  SlidingWindow::note_share_refusal(ahead, p, 900'000);
  EXPECT_EQ(ahead.carry_steps, 0);
}

// Carried only as far as the previous count stays within the limit; above
// the limit's steps a credit is rounded down, stored and carried.
TEST(SlidingWindowTest, ACreditIsBoundedByTheLimitAndRoundedDown) {
  const SlidingWindow::Params p{100, kUsPerSecond};
  const SlidingWindow::State s{.window = 1, .previous = 0, .carry_steps = -50, .current = 80};
  const SlidingWindow::State next = SlidingWindow::at(s, p, 2 * kUsPerSecond);
  EXPECT_EQ(next.previous, 100);
  EXPECT_EQ(next.current, -20);

  const SlidingWindow::Params big{1'000'000, kUsPerSecond};
  SlidingWindow::State b = SlidingWindow::fresh(big, 0);
  SlidingWindow::commit(b, big, 1'000'000, 0);
  SlidingWindow::commit(b, big, 400'000, 1'500'000);
  // Room for 100,000: floor(100,000 * 2047 / 10^6) = 204 steps, carried as
  // floor(204 * 10^6 / 2047) = 99,658.
  SlidingWindow::note_share_refusal(b, big, 1'500'000);
  EXPECT_EQ(b.carry_steps, -204);
  const SlidingWindow::State after = SlidingWindow::at(b, big, 2 * kUsPerSecond);
  EXPECT_EQ(after.current, -99'658);
  EXPECT_EQ(after.previous, 400'000 + 99'658);
}

TEST(SlidingWindowTest, ClockSteppingBackWeighsThePreviousWindowFully) {
  const SlidingWindow::Params p{10, kUsPerSecond};
  SlidingWindow::State s{.window = 5, .previous = 10, .carry_steps = 0, .current = 0};
  // At 5.9 s, 10 * 0.1 = 1 of the previous window still counts.
  EXPECT_EQ(SlidingWindow::evaluate(s, p, 0, 5'900'000).remaining, 9);
  // Back to 4.5 s (before the state's window): counted as 5.0 s, all of it.
  const Verdict back = SlidingWindow::evaluate(s, p, 1, 4'500'000);
  EXPECT_FALSE(back.allowed);
  EXPECT_EQ(back.retry_after_us, 500'000 + 100'000);
}

TEST(SlidingWindowTest, ZeroLargeAndHuge) {
  const SlidingWindow::Params huge{kMaxCost, kMaxPeriod};
  SlidingWindow::State h = SlidingWindow::fresh(huge, 0);
  EXPECT_TRUE(SlidingWindow::evaluate(h, huge, kMaxCost, 0).allowed);
  SlidingWindow::commit(h, huge, kMaxCost, 0);
  EXPECT_TRUE(SlidingWindow::evaluate(h, huge, 0, 0).allowed);
  const Verdict v = SlidingWindow::evaluate(h, huge, kMaxCost, kMaxPeriod);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.retry_after_us, 2 * kMaxPeriod - kMaxPeriod);  // the previous window gone
  EXPECT_EQ(SlidingWindow::evaluate(h, huge, kMaxCost, 0).retry_after_us, 2 * kMaxPeriod);
  for (int i = 0; i < 10'000; ++i) SlidingWindow::charge_remote(h, huge, kMaxCost, 0);
  EXPECT_FALSE(SlidingWindow::evaluate(h, huge, 0, 0).allowed);
  EXPECT_NE(SlidingWindow::validate({0, kUsPerSecond}), nullptr);
  EXPECT_NE(SlidingWindow::validate({1, 0}), nullptr);
}

}  // namespace
}  // namespace rlimit::core::algorithms
