// The ledger's history rule: the first sight of an entry that began before
// this process started is history, and a key's bucket is charged with at most
// history_cap of it in total (docs/cluster.md, "Restarts and new nodes").
#include "core/ledger.h"

#include <gtest/gtest.h>

#include <map>
#include <utility>

#include "core/time.h"

namespace rlimit::core {
namespace {

constexpr std::uint64_t kOurIncarnation = 50 * kUsPerSecond;

Ledger started_at(std::uint64_t incarnation) {
  Ledger ledger;
  ledger.set_self("me", incarnation, 0);
  return ledger;
}

TEST(LedgerTest, FirstSightOfAnEntryOlderThanUsIsHistory) {
  Ledger ledger = started_at(kOurIncarnation);
  const std::uint32_t a = ledger.intern_origin("a");
  // Began before we did: its whole value is history.
  Ledger::Merged m = ledger.merge("k", a, kOurIncarnation - 1, 700, 10);
  EXPECT_EQ(m.increase, 700u);
  EXPECT_EQ(m.history, 700u);
  // Its later growth is consumption we are here to see: not history.
  m = ledger.merge("k", a, kOurIncarnation - 1, 750, 20);
  EXPECT_EQ(m.increase, 50u);
  EXPECT_EQ(m.history, 0u);
  // Old news and duplicates raise nothing.
  m = ledger.merge("k", a, kOurIncarnation - 1, 740, 30);
  EXPECT_EQ(m.increase, 0u);
  EXPECT_EQ(m.history, 0u);
  // An entry that began after we did (a new origin, a restart of a peer, a
  // partition's consumption) is charged in full, however large.
  const std::uint32_t b = ledger.intern_origin("b");
  m = ledger.merge("k", b, kOurIncarnation + 1, 5000, 40);
  EXPECT_EQ(m.increase, 5000u);
  EXPECT_EQ(m.history, 0u);
  // So is our own earlier life's entry only if it is older than us: it is.
  m = ledger.merge("k", 0, kOurIncarnation - 10, 30, 50);
  EXPECT_EQ(m.history, 30u);
}

// When the key's newest consumption happened: our own charges' time, a
// peer's news less its age; never moved back by older news.
TEST(LedgerTest, AKeyRemembersWhenItsNewestConsumptionHappened) {
  Ledger ledger = started_at(kOurIncarnation);
  const std::uint32_t a = ledger.intern_origin("a");
  ledger.merge("k", a, kOurIncarnation + 1, 5, 1'000, 900);
  ASSERT_NE(ledger.find("k"), nullptr);
  EXPECT_EQ(ledger.find("k")->consumed_at_us, 900);
  ledger.merge("k", a, kOurIncarnation + 1, 6, 2'000, 500);  // older: kept
  EXPECT_EQ(ledger.find("k")->consumed_at_us, 900);
  ledger.merge("k", a, kOurIncarnation + 1, 6, 3'000, 2'900);  // no increase: no news
  EXPECT_EQ(ledger.find("k")->consumed_at_us, 900);
  ledger.merge("k", a, kOurIncarnation + 1, 7, 3'000);  // no age: when learned
  EXPECT_EQ(ledger.find("k")->consumed_at_us, 3'000);
  ledger.add_local("k", 1, 4'000);
  EXPECT_EQ(ledger.find("k")->consumed_at_us, 4'000);
}

// Origins spending at about the same time: other origins whose newest
// consumption lies within a span of the key's newest; or, given a wake, of
// the newest before it (the last burst), whichever counts more; counted for
// two spans at once. This node's own entry is not counted.
TEST(LedgerTest, RecentOthersAreThoseThatConsumedAtAboutTheSameTime) {
  constexpr TimeUs kSecondUs = kUsPerSecond;
  constexpr TimeUs kBurstUs = 500'000;
  Ledger ledger = started_at(kOurIncarnation);
  const auto merged_at = [&](const char* origin, TimeUs at_us) {
    ledger.merge("k", ledger.intern_origin(origin), kOurIncarnation + 1, 1, at_us, at_us);
  };
  // The last burst: three origins within a second of each other at 10 s,
  // two of them within half a second.
  merged_at("a", 10 * kSecondUs);
  merged_at("b", 10 * kSecondUs - 400'000);
  merged_at("c", 10 * kSecondUs - 900'000);
  merged_at("old", 8 * kSecondUs);  // two seconds before it
  ledger.add_local("k", 1, 10 * kSecondUs);
  const Ledger::KeyState& state = *ledger.find("k");
  const auto counts = [&](TimeUs within_us, TimeUs before_us) {
    const Ledger::RecentOthers r = Ledger::recent_others(state, within_us, kBurstUs, before_us);
    return std::pair{r.within, r.in_burst};
  };
  EXPECT_EQ(counts(kSecondUs, 0), std::pair(3u, 2u));
  EXPECT_EQ(counts(2 * kSecondUs, 0), std::pair(4u, 2u));
  // This burst, 5 s later: one origin heard of so far.
  merged_at("d", 15 * kSecondUs);
  EXPECT_EQ(counts(kSecondUs, 0), std::pair(1u, 1u));
  // A node that woke at 14.9 s counts the last burst's origins as well.
  EXPECT_EQ(counts(kSecondUs, 15 * kSecondUs - 100'000), std::pair(3u, 2u));
  // As more of this burst is heard of, it counts those.
  for (const char* origin : {"e", "f", "g"}) merged_at(origin, 15 * kSecondUs);
  EXPECT_EQ(counts(kSecondUs, 15 * kSecondUs - 100'000), std::pair(4u, 4u));
}

// Where a burst on the key began, from its entries' consumption times, if
// it began within a quiet spell of now: the oldest consumption since then,
// where an older one lies a quiet spell before it; none without such a gap,
// nor once the burst is older than a quiet spell. This node's entry counts
// as any other's.
TEST(LedgerTest, ABurstWokeWhereItsEntriesFollowAQuietSpell) {
  constexpr TimeUs kQuietUs = 100'000;
  constexpr TimeUs kBurstUs = 10 * kUsPerSecond;
  Ledger ledger = started_at(kOurIncarnation);
  std::map<std::string, std::uint64_t> consumed;
  TimeUs now = 0;
  const auto merged_at = [&](const char* origin, TimeUs at_us) {
    now = at_us;
    ledger.merge("k", ledger.intern_origin(origin), kOurIncarnation + 1, ++consumed[origin], at_us,
                 at_us);
  };
  const auto woke = [&] { return Ledger::burst_woke_us(*ledger.find("k"), now, kQuietUs); };
  // The last burst: three origins 40 ms apart. Nothing before it.
  merged_at("a", kBurstUs - 1'000'000);
  merged_at("b", kBurstUs - 960'000);
  merged_at("c", kBurstUs - 920'000);
  EXPECT_EQ(woke(), 0);
  // This burst, a second later: its first spender's news came.
  merged_at("d", kBurstUs);
  EXPECT_EQ(woke(), kBurstUs);
  // More of it, and this node: its oldest still (read to the millisecond,
  // up to one later: Ledger::behind_ms).
  merged_at("e", kBurstUs + 30'000);
  now = kBurstUs + 60'000;
  ledger.add_local("k", 1, now);
  EXPECT_NEAR(woke(), kBurstUs, 1'000);
  // A quiet spell after it began, it is no longer new: "d" reads as before
  // it, less than a spell from "e".
  EXPECT_EQ(Ledger::burst_woke_us(*ledger.find("k"), kBurstUs + kQuietUs + 1'000, kQuietUs), 0);
  // Its origins spending again later in it moves nothing but their entries:
  // "a" joins this burst and "b", "c" stay in the last one.
  merged_at("a", kBurstUs + 90'000);
  EXPECT_NEAR(woke(), kBurstUs, 1'000);
  // Once every earlier origin has spent in this burst, no gap is left.
  merged_at("b", kBurstUs + 95'000);
  merged_at("c", kBurstUs + 99'000);
  EXPECT_EQ(woke(), 0);
}

// A key wakes when its entries grow after a quiet spell (one news horizon,
// set by the Limiter), and tells its share the sums just before; growth
// within the spell, a key this node never checked, or no quiet set: none.
TEST(LedgerTest, AKeyWakesOnItsFirstGrowthAfterAQuietSpell) {
  constexpr TimeUs kQuietUs = 100'000;
  const ShareView view{.live_nodes = 2, .horizon_us = kQuietUs};
  Ledger ledger = started_at(kOurIncarnation);
  const std::uint32_t a = ledger.intern_origin("a");
  const TimeUs t0 = 10 * kUsPerSecond;
  ledger.add_local("k", 5, t0);  // no quiet set yet, no share: no wake
  ledger.set_wake_quiet_us(kQuietUs);
  FairShare& share = *ledger.share_state("k", t0 + 10'000, true)->share;
  ledger.add_local("k", 1, t0 + 50'000);  // 50 ms after the last growth
  share.count(t0 + 50'000);               // asked for by this node, as the Limiter counts
  EXPECT_EQ(share.wake_end_us(view, t0 + 60'000), 0);
  const TimeUs woke = t0 + 500'000;
  ledger.add_local("k", 3, woke);
  EXPECT_EQ(share.wake_end_us(view, woke + 10'000), woke + kQuietUs);
  ledger.merge("k", a, kOurIncarnation + 1, 20, woke + 20'000);  // within the spell
  EXPECT_EQ(share.wake_end_us(view, woke + 30'000), woke + kQuietUs);
  EXPECT_EQ(share.wake_end_us(view, woke + kQuietUs), 0);  // the horizon is over
  // The sums at the wake were 6 (all, own): the pool then was the 71 now
  // left plus the 23 spent since, and this node, weighing half, spent 3 of
  // its 47.
  ShareInputs in{.headroom = 71,
                 .others = 1,
                 .has_own = true,
                 .own_consumed = 9,
                 .all_consumed = 29,
                 .from_wake = true,
                 .epoch_end_us = woke + kQuietUs};
  share.start_epoch(view, in, woke + 30'000);
  EXPECT_EQ(share.epoch_end_us(), woke + kQuietUs);
  int admitted = 0;
  while (admitted < 100 && share.ask(1, woke + 30'000) == FairShare::Answer::kCredit) {
    share.spend(1);
    ++admitted;
  }
  EXPECT_GE(admitted, 47 - 3);
  EXPECT_LE(admitted, 47 - 3 + 1);
  // Growth by a peer after another quiet spell wakes it again.
  const TimeUs again = woke + 2 * kUsPerSecond;
  ledger.merge("k", a, kOurIncarnation + 1, 25, again);
  EXPECT_EQ(share.wake_end_us(view, again), again + kQuietUs);
  // A key this node never checked has no share to tell.
  ledger.merge("other", a, kOurIncarnation + 1, 5, again);
  ledger.merge("other", a, kOurIncarnation + 1, 9, again + kUsPerSecond);
  EXPECT_FALSE(ledger.find("other")->share);
}

// A request on a quiet key notes its wake before it is decided; if its
// share then refuses it, the entries do not grow. Where the key refills in
// steps (a fixed window: FairShare::stepwise_), the burst's first news
// within the spell is no second wake (which would end a burst that had
// just begun, and with it the debt carried into it); after another quiet
// spell, news wakes the key again. A bucket's key wakes again at that news,
// as before.
TEST(LedgerTest, AFixedWindowsWakeARefusedRequestNotedIsNotNotedAgainByTheBurstsNews) {
  constexpr TimeUs kQuietUs = 100'000;
  const auto woke_at_news = [](TimeUs step_us) {
    Ledger ledger = started_at(kOurIncarnation);
    const std::uint32_t a = ledger.intern_origin("a");
    const TimeUs t0 = 10 * kUsPerSecond;
    ledger.set_wake_quiet_us(kQuietUs);
    Ledger::KeyState& state = *ledger.share_state("k", t0, true);
    state.share->start_epoch(ShareView{.live_nodes = 2, .horizon_us = kQuietUs},
                             ShareInputs{.headroom = 100,
                                         .carries_debt = true,
                                         .rate_limit = 100,
                                         .rate_period_us = kUsPerSecond,
                                         .capacity = 100,
                                         .refill_step_us = step_us},
                             t0);
    ledger.add_local("k", state, 5, t0);
    const TimeUs woke = t0 + kUsPerSecond;
    ledger.wake_if_quiet(state, woke);  // a request decided, and refused: no growth
    EXPECT_EQ(state.share->woke_us(), woke);
    ledger.merge("k", a, kOurIncarnation + 1, 20, woke + 30'000);
    const TimeUs at_news = state.share->woke_us();
    const TimeUs again = woke + 2 * kUsPerSecond;
    ledger.merge("k", a, kOurIncarnation + 1, 25, again);
    EXPECT_EQ(state.share->woke_us(), again);
    return at_news - woke;
  };
  EXPECT_EQ(woke_at_news(kUsPerSecond), 0);
  EXPECT_EQ(woke_at_news(0), 30'000);
}

TEST(LedgerTest, HistoryIsChargedUpToTheCapPerKeyInTotalAndTheRestCounted) {
  Ledger ledger = started_at(kOurIncarnation);
  const std::uint32_t a = ledger.intern_origin("a");
  const std::uint32_t b = ledger.intern_origin("b");
  const std::uint64_t old = kOurIncarnation - kUsPerSecond;
  // Two origins' history of key k, 700 + 600, against a burst of 100.
  Ledger::Merged m = ledger.merge("k", a, old, 700, 10);
  EXPECT_EQ(ledger.charge_for("k", m, 100), 100u);
  m = ledger.merge("k", b, old, 600, 10);
  EXPECT_EQ(ledger.charge_for("k", m, 100), 0u);
  EXPECT_EQ(ledger.history_forgiven(), 1200u);
  // Growth is charged in full.
  m = ledger.merge("k", a, old, 740, 20);
  EXPECT_EQ(ledger.charge_for("k", m, 100), 40u);
  // Below the cap, history is charged whole; the cap is per key.
  m = ledger.merge("j", a, old, 30, 20);
  EXPECT_EQ(ledger.charge_for("j", m, 100), 30u);
  m = ledger.merge("j", b, old, 50, 20);
  EXPECT_EQ(ledger.charge_for("j", m, 100), 50u);
  m = ledger.merge("j", b, old + 1, 50, 20);  // another entry: 20 of it fits
  EXPECT_EQ(ledger.charge_for("j", m, 100), 20u);
  EXPECT_EQ(ledger.history_forgiven(), 1230u);
  EXPECT_EQ(ledger.find("j")->history_charged, 100u);
  // The ledger keeps every value whole: what is gossiped is unchanged.
  std::uint64_t total = 0;
  for (const Ledger::Entry& e : ledger.find("k")->entries) total += e.consumed;
  EXPECT_EQ(total, 740u + 600u);
}

TEST(LedgerTest, WithoutReplicationNothingIsHistory) {
  Ledger ledger;  // set_self never called: incarnation 0
  const std::uint32_t a = ledger.intern_origin("a");
  const Ledger::Merged m = ledger.merge("k", a, 0, 10, 0);
  EXPECT_EQ(m.history, 0u);
  EXPECT_EQ(ledger.charge_for("k", m, 1), 10u);
}

// Gossip sends a key's changed entries only: each entry counts its own rounds
// left, and the key stays queued while any entry has some.
TEST(LedgerTest, EachEntryCountsItsOwnRoundsLeft) {
  Ledger ledger = started_at(kOurIncarnation);
  ledger.set_retransmit_rounds(2);
  const std::uint32_t a = ledger.intern_origin("a");
  ledger.add_local("k", 1, 10);
  ledger.merge("k", a, kOurIncarnation + 1, 5, 10);
  const auto rounds_left = [&] {
    std::vector<std::uint16_t> left;
    for (const Ledger::Entry& e : ledger.find("k")->entries) left.push_back(e.sends_left);
    return left;
  };
  EXPECT_EQ(rounds_left(), (std::vector<std::uint16_t>{2, 2}));
  ledger.sent("k");
  EXPECT_EQ(rounds_left(), (std::vector<std::uint16_t>{1, 1}));
  ledger.add_local("k", 1, 20);  // only our entry changed
  EXPECT_EQ(rounds_left(), (std::vector<std::uint16_t>{2, 1}));
  ledger.sent("k");
  ledger.compact_changed();
  EXPECT_EQ(rounds_left(), (std::vector<std::uint16_t>{1, 0}));
  EXPECT_EQ(ledger.find("k")->sends_left, 1);
  ASSERT_EQ(ledger.changed().size(), 1u);
  ledger.sent("k");
  ledger.compact_changed();
  EXPECT_EQ(rounds_left(), (std::vector<std::uint16_t>{0, 0}));
  EXPECT_TRUE(ledger.changed().empty());
  EXPECT_FALSE(ledger.find("k")->queued);
}

// Origins are interned in a flat table that grows past its first 16 slots,
// keeps every index, and names us 0 once set_self names us (even when a
// peer's message named us first).
TEST(LedgerTest, OriginsKeepTheirIndexAsTheTableGrows) {
  Ledger ledger;
  const std::uint32_t early_me = ledger.intern_origin("me");
  EXPECT_NE(early_me, 0u);  // before set_self, index 0 is nobody's
  std::vector<std::uint32_t> index;
  for (int i = 0; i < 1000; ++i) index.push_back(ledger.intern_origin("node-" + std::to_string(i)));
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(ledger.intern_origin("node-" + std::to_string(i)), index[static_cast<std::size_t>(i)]);
    EXPECT_EQ(ledger.origin_name(index[static_cast<std::size_t>(i)]), "node-" + std::to_string(i));
  }
  EXPECT_EQ(ledger.origin_count(), 1002u);
  ledger.set_self("me", kOurIncarnation, 0);
  EXPECT_EQ(ledger.intern_origin("me"), 0u);
  EXPECT_EQ(ledger.intern_origin("node-999"), index[999]);
  EXPECT_EQ(ledger.origin_count(), 1002u);
}

// A reset's floors (docs/cluster.md, "Reset"): a reset is applied only once
// all its floors are here; an older epoch changes nothing; a newer one
// replaces a pending one; and once applied, consumption up to an entry's
// floor is not chargeable, above it is.
TEST(LedgerTest, AResetAppliesWhenAllItsFloorsAreHere) {
  Ledger ledger = started_at(kOurIncarnation);
  const std::uint32_t a = ledger.intern_origin("a");
  const std::uint32_t b = ledger.intern_origin("b");
  const std::uint64_t inc = kOurIncarnation + 1;
  ledger.merge("k", a, inc, 100, 10);
  ledger.merge("k", b, inc, 40, 10);
  using FM = Ledger::FloorMerge;
  const std::uint64_t epoch = 5 << 20;
  EXPECT_EQ(ledger.merge_floor("k", 0, 2, a, inc, 90, 20), FM::kMalformed);
  EXPECT_EQ(ledger.merge_floor("k", epoch, Ledger::kMaxOrigins + 1, a, inc, 90, 20),
            FM::kMalformed);
  EXPECT_EQ(ledger.merge_floor("k", epoch, 2, a, inc, 90, 20), FM::kPending);
  EXPECT_EQ(ledger.find("k")->reset, nullptr);  // not applied yet
  EXPECT_EQ(Ledger::chargeable_sum(*ledger.find("k")), 140u);
  EXPECT_EQ(ledger.merge_floor("k", epoch - 1, 1, a, inc, 100, 20), FM::kOld);
  EXPECT_EQ(ledger.merge_floor("k", epoch, 2, b, inc, 40, 20), FM::kComplete);
  // a holds 10 above its floor, b nothing.
  EXPECT_EQ(Ledger::chargeable_sum(*ledger.find("k")), 10u);
  Ledger::Merged m = ledger.merge("k", a, inc, 95, 30);  // old news
  EXPECT_EQ(m.increase, 0u);
  m = ledger.merge("k", b, inc, 45, 30);
  EXPECT_EQ(m.increase, 5u);
  EXPECT_EQ(m.chargeable, 5u);
  // A new origin the reset had no floor for is chargeable in full.
  const std::uint32_t c = ledger.intern_origin("c");
  m = ledger.merge("k", c, inc, 7, 30);
  EXPECT_EQ(m.chargeable, 7u);
  // The same or an older epoch again: nothing.
  EXPECT_EQ(ledger.merge_floor("k", epoch, 2, b, inc, 45, 40), FM::kOld);
  // A newer reset pending, then replaced by a newer one still, applied.
  EXPECT_EQ(ledger.merge_floor("k", epoch + (1 << 20), 3, a, inc, 100, 50), FM::kPending);
  EXPECT_EQ(ledger.merge_floor("k", epoch + (2 << 20), 1, a, inc, 100, 50), FM::kComplete);
  EXPECT_EQ(ledger.find("k")->pending, nullptr);
  // Floors above what we hold: entries that arrive later are chargeable only
  // above them (b's 45 and c's 7 have no floor in this reset).
  EXPECT_EQ(Ledger::chargeable_sum(*ledger.find("k")), 45u + 7u);
  m = ledger.merge("k", a, inc, 130, 60);
  EXPECT_EQ(m.increase, 30u);
  EXPECT_EQ(m.chargeable, 30u);
}

// A reset made here: an epoch above every one known, floors at the key's
// entries (nothing chargeable), and queued for gossip; a key this node never
// saw still gets a record (one floor of nothing) so the reset travels.
TEST(LedgerTest, ALocalResetFloorsTheEntriesAndIsGossiped) {
  Ledger ledger = started_at(kOurIncarnation);
  const std::uint32_t a = ledger.intern_origin("a");
  ledger.merge("k", a, 7, 100, 10);
  ledger.add_local("k", 3, 10);
  const std::uint64_t first = ledger.reset_local("k", 20);
  const Ledger::KeyState& state = *ledger.find("k");
  ASSERT_NE(state.reset, nullptr);
  EXPECT_EQ(state.reset->floor_count, 2u);
  EXPECT_EQ(Ledger::chargeable_sum(state), 0u);
  EXPECT_GT(state.sends_left, 0u);
  const std::uint64_t second = ledger.reset_local("k", 30);
  EXPECT_GT(second, first);
  ledger.reset_local("never-seen", 30);
  const Ledger::KeyState& empty = *ledger.find("never-seen");
  ASSERT_NE(empty.reset, nullptr);
  EXPECT_EQ(empty.reset->floor_count, 0u);
  EXPECT_EQ(empty.reset->floors.size(), 1u);
}

// What peers may make a ledger hold ([cluster] max_origins, max_ledger_keys,
// max_entries_per_key): beyond a bound their data is refused and counted;
// what this node consumes itself never is.
TEST(LedgerTest, PeersDataBeyondTheBoundsIsRefusedAndCountedButOwnConsumptionIsNot) {
  Ledger ledger = started_at(kOurIncarnation);
  ledger.set_bounds({.max_origins = 3, .max_keys = 2, .max_entries_per_key = 2});
  const std::uint32_t a = ledger.intern_origin("a");
  const std::uint32_t b = ledger.intern_origin("b");  // with "me": three, the bound
  EXPECT_NE(a, Ledger::kNoOrigin);
  EXPECT_NE(b, Ledger::kNoOrigin);
  EXPECT_EQ(ledger.intern_origin("c"), Ledger::kNoOrigin);
  EXPECT_EQ(ledger.origins_over_bound(), 1u);
  EXPECT_EQ(ledger.intern_origin("a"), a);  // known names are still found

  EXPECT_EQ(ledger.merge("k1", a, kOurIncarnation + 1, 5, 10).increase, 5u);
  EXPECT_EQ(ledger.merge("k2", a, kOurIncarnation + 1, 5, 10).increase, 5u);
  EXPECT_EQ(ledger.merge("k3", a, kOurIncarnation + 1, 5, 10).increase, 0u);  // a third key
  EXPECT_EQ(ledger.keys_over_bound(), 1u);
  EXPECT_EQ(ledger.find("k3"), nullptr);
  // Known keys still merge, up to max_entries_per_key entries each.
  EXPECT_EQ(ledger.merge("k1", b, kOurIncarnation + 1, 5, 10).increase, 5u);
  EXPECT_EQ(ledger.merge("k1", b, kOurIncarnation + 2, 5, 10).increase, 0u);  // a third entry
  EXPECT_EQ(ledger.entries_over_bound(), 1u);
  EXPECT_EQ(ledger.merge("k1", a, kOurIncarnation + 1, 9, 10).increase, 4u);  // existing: grows
  // Reset floors: a new key is refused too.
  EXPECT_EQ(ledger.merge_floor("k4", 1, 1, a, kOurIncarnation + 1, 3, 20),
            Ledger::FloorMerge::kOld);
  EXPECT_EQ(ledger.keys_over_bound(), 2u);
  // Our own consumption is never refused.
  ledger.add_local("k5", 3, 30);
  ASSERT_NE(ledger.find("k5"), nullptr);
  EXPECT_EQ(ledger.size(), 3u);
}

// An ask (docs/cluster.md, "Asks"): a node whose share refused a key it has
// no entry of, where keys are routed, makes an own entry of nothing, queued
// to be sent like a change, so the key's owners learn of it. It is no
// growth: the key's last change (its wakes, Ledger::quiet) stays; its time
// is the key's newest. A peer's ask merged is an entry of nothing too,
// queued and counted, no growth either. An own entry, an ask's included,
// is never made twice, and spending grows the ask's entry.
TEST(LedgerTest, AnAskIsAnOwnEntryOfNothingQueuedWithoutAGrowth) {
  Ledger ledger = started_at(kOurIncarnation);
  ledger.set_retransmit_rounds(2);
  Ledger::KeyState* state = ledger.share_state("k", 100, true);
  ASSERT_NE(state, nullptr);
  EXPECT_TRUE(ledger.add_ask("k", *state, 500));
  ASSERT_GE(state->own, 0);
  const Ledger::Entry& own = state->entries[static_cast<std::size_t>(state->own)];
  EXPECT_EQ(own.consumed, 0u);
  EXPECT_EQ(own.sends_left, 2);
  EXPECT_TRUE(state->queued);
  EXPECT_EQ(state->changed_us, 100);      // no growth
  EXPECT_EQ(state->consumed_at_us, 500);  // but the key's newest time
  EXPECT_EQ(ledger.asks(), 1u);
  EXPECT_FALSE(ledger.add_ask("k", *state, 600));  // one own entry
  EXPECT_EQ(ledger.asks(), 1u);
  ledger.add_local("k", 3, 700);
  ASSERT_EQ(state->entries.size(), 1u);
  EXPECT_EQ(state->entries[0].consumed, 3u);
  EXPECT_EQ(state->changed_us, 700);

  // A peer's ask, on a key new here and on a known one.
  const std::uint32_t a = ledger.intern_origin("a");
  EXPECT_EQ(ledger.merge("j", a, kOurIncarnation + 1, 0, 800).increase, 0u);
  const Ledger::KeyState* asked = ledger.find("j");
  ASSERT_NE(asked, nullptr);
  ASSERT_EQ(asked->entries.size(), 1u);
  EXPECT_EQ(asked->entries[0].consumed, 0u);
  EXPECT_TRUE(asked->queued);
  EXPECT_EQ(asked->changed_us, 0);  // never grew
  EXPECT_EQ(asked->consumed_at_us, 800);
  EXPECT_EQ(ledger.merge("k", a, kOurIncarnation + 1, 0, 900).increase, 0u);
  EXPECT_EQ(ledger.find("k")->entries.size(), 2u);
  EXPECT_EQ(ledger.find("k")->changed_us, 700);
  EXPECT_EQ(ledger.asks_merged(), 2u);
  // The asker's spending later grows its entry as any news does.
  EXPECT_EQ(ledger.merge("j", a, kOurIncarnation + 1, 4, 1'000).increase, 4u);
  EXPECT_EQ(ledger.find("j")->changed_us, 1'000);
}

}  // namespace
}  // namespace rlimit::core
