// ReplayWindow: which authenticated peer messages are new (core/replay_window.h).
#include "core/replay_window.h"

#include <gtest/gtest.h>

#include <string>

namespace rlimit::core {
namespace {

constexpr TimeUs kNow = 1'750'000'000 * kUsPerSecond;  // a Unix time
constexpr TimeUs kMaxAge = 60 * kUsPerSecond;

ReplayVerdict check(ReplayWindow& w, std::uint64_t seq, std::uint64_t incarnation = 7,
                    TimeUs sent_at = kNow, TimeUs now = kNow, std::string_view sender = "a") {
  return w.check(sender, incarnation, seq, sent_at, now);
}

TEST(ReplayWindowTest, InOrderMessagesAreTakenAndEveryCopyIsRefused) {
  ReplayWindow w;
  for (std::uint64_t seq = 1; seq <= 2000; ++seq) {
    ASSERT_EQ(check(w, seq), ReplayVerdict::kFresh) << seq;
  }
  EXPECT_EQ(check(w, 2000), ReplayVerdict::kDuplicate);
  EXPECT_EQ(check(w, 2000 - ReplayWindow::kWindowSeqs + 1), ReplayVerdict::kDuplicate);
  EXPECT_EQ(check(w, 2000 - ReplayWindow::kWindowSeqs), ReplayVerdict::kBelowWindow);
  EXPECT_EQ(check(w, 1), ReplayVerdict::kBelowWindow);
  EXPECT_EQ(w.stats().fresh, 2000u);
  EXPECT_EQ(w.stats().duplicates, 2u);
  EXPECT_EQ(w.stats().below_window, 2u);
  EXPECT_EQ(w.stats().refused(), 4u);
}

TEST(ReplayWindowTest, ReorderingWithinTheWindowIsTakenOnce) {
  ReplayWindow w;
  ASSERT_EQ(check(w, 100), ReplayVerdict::kFresh);
  // Earlier messages overtaken by 100 (UDP reordering, or sent to others).
  for (std::uint64_t seq = 99; seq > 100 - ReplayWindow::kWindowSeqs + 1 && seq > 0; seq -= 7) {
    ASSERT_EQ(check(w, seq), ReplayVerdict::kFresh) << seq;
    ASSERT_EQ(check(w, seq), ReplayVerdict::kDuplicate) << seq;
  }
  // A jump past the whole window forgets it: everything below is too old.
  ASSERT_EQ(check(w, 100 + 5 * ReplayWindow::kWindowSeqs), ReplayVerdict::kFresh);
  EXPECT_EQ(check(w, 100), ReplayVerdict::kBelowWindow);
  EXPECT_EQ(check(w, 99 + 5 * ReplayWindow::kWindowSeqs), ReplayVerdict::kFresh);
}

TEST(ReplayWindowTest, ANewIncarnationStartsAgainAndTheOldOneIsRefused) {
  ReplayWindow w;
  for (std::uint64_t seq = 1; seq <= 50; ++seq) ASSERT_EQ(check(w, seq, 7), ReplayVerdict::kFresh);
  // The sender restarted: a larger incarnation, its sequence from 1 again.
  EXPECT_EQ(check(w, 1, 8), ReplayVerdict::kFresh);
  EXPECT_EQ(check(w, 2, 8), ReplayVerdict::kFresh);
  EXPECT_EQ(check(w, 1, 8), ReplayVerdict::kDuplicate);
  // Anything of its previous life (a Leave, a dead report it relayed) is old.
  EXPECT_EQ(check(w, 51, 7), ReplayVerdict::kOldIncarnation);
  EXPECT_EQ(check(w, 3, 7), ReplayVerdict::kOldIncarnation);
  EXPECT_EQ(w.stats().old_incarnation, 2u);
}

TEST(ReplayWindowTest, SendersHaveSeparateWindows) {
  ReplayWindow w;
  EXPECT_EQ(check(w, 5, 7, kNow, kNow, "a"), ReplayVerdict::kFresh);
  EXPECT_EQ(check(w, 5, 7, kNow, kNow, "b"), ReplayVerdict::kFresh);
  EXPECT_EQ(check(w, 5, 7, kNow, kNow, "a"), ReplayVerdict::kDuplicate);
  EXPECT_EQ(w.senders(), 2u);
}

// A receiver that restarted (or never heard of the sender) has no window: the
// clock bounds what it can be made to take.
TEST(ReplayWindowTest, TheClockBoundsWhatAReceiverWithoutStateTakes) {
  ReplayWindow restarted;
  EXPECT_EQ(check(restarted, 10, 7, kNow - kMaxAge - 1), ReplayVerdict::kStale);
  EXPECT_EQ(check(restarted, 10, 7, kNow + kMaxAge + 1), ReplayVerdict::kFuture);
  // Within max_age either way (clock skew between nodes): taken, once.
  EXPECT_EQ(check(restarted, 10, 7, kNow - kMaxAge), ReplayVerdict::kFresh);
  EXPECT_EQ(check(restarted, 11, 7, kNow + kMaxAge), ReplayVerdict::kFresh);
  EXPECT_EQ(check(restarted, 10, 7, kNow - kMaxAge), ReplayVerdict::kDuplicate);
  EXPECT_EQ(restarted.stats().stale, 1u);
  EXPECT_EQ(restarted.stats().future, 1u);
  // Extreme values cannot overflow the comparison.
  EXPECT_EQ(check(restarted, 12, 7, INT64_MIN), ReplayVerdict::kStale);
  EXPECT_EQ(check(restarted, 12, 7, INT64_MAX), ReplayVerdict::kFuture);
  EXPECT_EQ(restarted.check("a", 7, 12, INT64_MAX, INT64_MIN), ReplayVerdict::kFuture);
  EXPECT_EQ(restarted.check("a", 7, 12, INT64_MIN, INT64_MAX), ReplayVerdict::kStale);

  // max_age 0: no clock check; the window alone decides.
  ReplayWindow no_clock({.max_age_us = 0});
  EXPECT_EQ(check(no_clock, 10, 7, 0), ReplayVerdict::kFresh);
  EXPECT_EQ(check(no_clock, 10, 7, 0), ReplayVerdict::kDuplicate);
}

TEST(ReplayWindowTest, UnsequencedMessagesAreRefusedUnlessAllowed) {
  ReplayWindow strict;
  EXPECT_EQ(check(strict, 0), ReplayVerdict::kRefusedUnsequenced);
  EXPECT_EQ(strict.stats().unsequenced_refused, 1u);
  // A rolling upgrade: older nodes send no seq (and no clock).
  ReplayWindow upgrading({.accept_unsequenced = true});
  EXPECT_EQ(check(upgrading, 0, 7, 0), ReplayVerdict::kUnsequenced);
  EXPECT_EQ(check(upgrading, 0, 7, 0), ReplayVerdict::kUnsequenced);
  EXPECT_TRUE(replay_taken(ReplayVerdict::kUnsequenced));
  EXPECT_EQ(upgrading.stats().unsequenced_accepted, 2u);
  // Sequenced messages are still judged.
  EXPECT_EQ(check(upgrading, 1), ReplayVerdict::kFresh);
  EXPECT_EQ(check(upgrading, 1), ReplayVerdict::kDuplicate);
}

TEST(ReplayWindowTest, PastMaxSendersTheLeastRecentlyHeardIsForgottenAndCounted) {
  ReplayWindow w({.max_senders = 3});
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(check(w, 1, 7, kNow, kNow + i, "s" + std::to_string(i)), ReplayVerdict::kFresh);
  }
  ASSERT_EQ(check(w, 2, 7, kNow, kNow + 10, "s0"), ReplayVerdict::kFresh);  // s1 is now oldest
  ASSERT_EQ(check(w, 1, 7, kNow, kNow + 11, "s3"), ReplayVerdict::kFresh);
  EXPECT_EQ(w.senders(), 3u);
  EXPECT_EQ(w.stats().senders_evicted, 1u);
  EXPECT_EQ(check(w, 2, 7, kNow, kNow + 12, "s0"), ReplayVerdict::kDuplicate);  // kept
  // s1 was forgotten: within max_age its message is taken once more (the
  // cost of the bound, documented), and only once.
  EXPECT_EQ(check(w, 1, 7, kNow, kNow + 13, "s1"), ReplayVerdict::kFresh);
  EXPECT_EQ(check(w, 1, 7, kNow, kNow + 14, "s1"), ReplayVerdict::kDuplicate);
}

TEST(ReplayWindowTest, DisabledTakesEverything) {
  ReplayWindow off({.enabled = false});
  EXPECT_EQ(check(off, 1), ReplayVerdict::kFresh);
  EXPECT_EQ(check(off, 1), ReplayVerdict::kFresh);
  EXPECT_EQ(check(off, 0, 7, 0), ReplayVerdict::kFresh);
}

}  // namespace
}  // namespace rlimit::core
