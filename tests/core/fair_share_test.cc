// Fair shares (core/fair_share.h): the share of each epoch, the probe of a
// key new here, the dither of shares below one request, sparse demand, and
// the Limiter's gate on every algorithm.
#include "core/fair_share.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/limiter.h"
#include "core/time.h"

namespace rlimit::core {
namespace {

constexpr TimeUs kHorizonUs = 100'000;
constexpr TimeUs kStart = 1'000 * kUsPerSecond;

// Every view below has rank 0. Tests that model several nodes give each its
// own `key_seed`: their draws are then as independent ones (a node's draws
// spread over the others only where they share a key and differ in rank:
// DrawsSpreadOverTheNodesKeepAboutTheirChancesSum).
ShareView view_of(std::uint32_t live) {
  return ShareView{.live_nodes = live, .horizon_us = kHorizonUs};
}

// What a node has heard once `spenders` origins spent a request each on
// the key, itself among them if it `spent`.
void heard_of_spenders(ShareInputs& in, std::uint32_t spenders, bool spent) {
  in.others = spent ? spenders - 1 : spenders;
  in.has_own = spent;
  in.own_consumed = spent ? 1 : 0;
  in.all_consumed = spenders;
}

// Requests of cost 1 admitted within the share (kCredit, spent) in one
// epoch, of `tries`.
int spend_epoch(FairShare& share, int tries, TimeUs now) {
  int admitted = 0;
  for (int i = 0; i < tries; ++i) {
    const FairShare::Answer answer = share.ask(1, now);
    share.count(now);
    if (answer != FairShare::Answer::kCredit) continue;
    share.spend(1);
    ++admitted;
  }
  return admitted;
}

TEST(FairShareTest, AKeyOnlyThisNodeSpendsOnKeepsItsWholeBalance) {
  FairShare share;
  ShareInputs in{.headroom = 100,
                 .refill = 10,
                 .has_own = true,
                 .own_consumed = 50,
                 .all_consumed = 50};
  share.start_epoch(view_of(200), in, kStart);
  EXPECT_TRUE(share.unlimited());
  EXPECT_EQ(spend_epoch(share, 100, kStart), 100);
}

TEST(FairShareTest, AKeyNewHereIsProbedAtOneNthThenUnlocksWithoutNews) {
  FairShare share;
  ShareInputs in{.headroom = 100, .refill = 10, .spenders = 10, .key_seed = 7};
  share.start_epoch(view_of(10), in, kStart);
  EXPECT_TRUE(share.probing());
  EXPECT_FALSE(share.unlimited());
  // (100 + 10) / 10 = 11, and a dithered twelfth at most.
  const int probed = spend_epoch(share, 50, kStart);
  EXPECT_GE(probed, 11);
  EXPECT_LE(probed, 12);
  EXPECT_EQ(share.epoch_end_us(), kStart + kHorizonUs);
  // No news of another node by the probe's end: the whole balance.
  ASSERT_TRUE(share.due(kStart + kHorizonUs));
  in.has_own = true;
  share.start_epoch(view_of(10), in, kStart + kHorizonUs);
  EXPECT_TRUE(share.unlimited());
}

// A new key of a rule whose keys are each spent on by one node (sticky
// users) is not probed; one of a rule whose keys five nodes spend on is
// shared five ways, not a thousand; and where the rule's demand is sparse
// the probe keeps the first request of an epoch.
TEST(FairShareTest, ANewKeyIsProbedAsManyWaysAsItsRulesKeysAreSpentOn) {
  FairShare sticky;
  ShareInputs in{.headroom = 10, .spenders = 0};
  sticky.start_epoch(view_of(1000), in, kStart);
  EXPECT_TRUE(sticky.unlimited());
  FairShare spread;
  in.spenders = 5;
  spread.start_epoch(view_of(1000), in, kStart);
  EXPECT_EQ(spend_epoch(spread, 10, kStart), 2);  // 10 / 5
  // A share of 2/1000 of a request (and a dither that does not lift it to
  // one): the first request passes only where the rule's demand is sparse.
  in.headroom = 2;
  in.key_seed = 3;
  for (const bool sparse_rule : {false, true}) {
    FairShare probe;
    in.sparse_rule = sparse_rule;
    probe.start_epoch(view_of(1000), in, kStart);
    EXPECT_EQ(probe.ask(1, kStart),
              sparse_rule ? FairShare::Answer::kSparse : FairShare::Answer::kRefused);
  }
}

// A key first met here while others already spend on it keeps the first
// request beyond the share (sparse demand's) unless this node meets many of
// its rule's keys new at once (crowded_start), among at least
// kCrowdedNodes live nodes, with a pool a request a node would spend: then
// it is most likely one of many nodes meeting it at once, the epoch is
// strict, and the key crowded (dense: no such request kept later either).
TEST(FairShareTest, AKeyFirstMetAmongManyNewAtOnceIsStrictAndCrowded) {
  const auto first_epoch = [](bool crowded_start, std::uint32_t live, std::int64_t pool) {
    FairShare share;
    ShareInputs in{.headroom = pool, .others = 9, .all_consumed = 9};
    in.key_seed = 1;
    in.crowded_start = crowded_start;
    share.start_epoch(view_of(live), in, kStart);
    EXPECT_EQ(share.crowded(kStart), share.strict());
    EXPECT_EQ(share.dense(kStart), share.strict());
    return std::pair{share.strict(), share.ask(pool, kStart)};
  };
  constexpr auto kLive = static_cast<std::uint32_t>(FairShare::kCrowdedNodes);
  EXPECT_EQ(first_epoch(true, kLive, kLive - 1), std::pair(true, FairShare::Answer::kRefused));
  EXPECT_EQ(first_epoch(false, kLive, kLive - 1), std::pair(false, FairShare::Answer::kSparse));
  EXPECT_EQ(first_epoch(true, kLive, kLive), std::pair(false, FairShare::Answer::kSparse));
  EXPECT_EQ(first_epoch(true, kLive - 1, 1), std::pair(false, FairShare::Answer::kSparse));
  // A later epoch is not a first one: strict no more, but the key stays
  // crowded, its demand dense.
  FairShare share;
  ShareInputs in{.headroom = 10, .others = 9, .all_consumed = 9, .crowded_start = true};
  share.start_epoch(view_of(200), in, kStart);
  share.start_epoch(view_of(200), in, kStart + kHorizonUs);
  EXPECT_FALSE(share.strict());
  EXPECT_TRUE(share.crowded(kStart + kHorizonUs));
  EXPECT_NE(share.ask(100, kStart + kHorizonUs), FairShare::Answer::kSparse);
  EXPECT_FALSE(share.crowded(kStart + kHorizonUs + FairShare::kDenseMemoryUs));
}

// A probe that admitted nothing, with no news of another spender by its end,
// unlocks the whole balance where gossip would have brought such news; where
// keys are routed to their owners (ShareView::routed) news reaches only the
// nodes that spent on the key, so it probes again until this node has.
TEST(FairShareTest, WhereKeysAreRoutedAProbeUnlocksOnlyOnceThisNodeSpent) {
  for (const bool routed : {false, true}) {
    ShareView view = view_of(200);
    view.routed = routed;
    FairShare share;
    ShareInputs in{.headroom = 10, .spenders = 200};
    share.start_epoch(view, in, kStart);
    ASSERT_TRUE(share.probing());
    share.start_epoch(view, in, kStart + kHorizonUs);
    EXPECT_EQ(share.unlimited(), !routed) << routed;
    EXPECT_EQ(share.probing(), routed) << routed;
    in.has_own = true;  // it spent: an origin, told of the others
    share.start_epoch(view, in, kStart + 2 * kHorizonUs);
    EXPECT_TRUE(share.unlimited()) << routed;
  }
}

// Ten nodes that consumed alike: each gets a tenth of balance + refill.
TEST(FairShareTest, NodesThatSpendAlikeGetEqualShares) {
  FairShare share;
  ShareInputs in{.headroom = 100,
                 .refill = 10,
                 .others = 9,
                 .has_own = true,
                 .own_consumed = 10,
                 .all_consumed = 100};
  share.start_epoch(view_of(10), in, kStart);  // first epoch: marks only
  in.own_consumed = 20;
  in.all_consumed = 200;
  const TimeUs later = kStart + 3 * kUsPerSecond;  // past a weight window
  share.start_epoch(view_of(10), in, later);
  in.own_consumed = 30;
  in.all_consumed = 300;
  share.start_epoch(view_of(10), in, later + FairShare::kWeightWindowUs);
  const int admitted = spend_epoch(share, 50, later + FairShare::kWeightWindowUs);
  EXPECT_GE(admitted, 11);  // 110 / 10
  EXPECT_LE(admitted, 12);
}

// A node that did most of the recent consumption gets most of the balance;
// one that did none still gets an eighth of an equal share.
TEST(FairShareTest, SharesFollowRecentConsumption) {
  const auto share_of = [](std::uint64_t own) {
    FairShare share;
    ShareInputs in{.headroom = 800,
                   .refill = 0,
                   .others = own > 0 ? 3u : 4u,  // four origins, with this node when it spent
                   .has_own = own > 0,
                   .own_consumed = 0,
                   .all_consumed = 0};
    share.start_epoch(view_of(4), in, kStart);
    in.own_consumed = own;
    in.all_consumed = 1000;
    const TimeUs t = kStart + FairShare::kWeightWindowUs;
    share.start_epoch(view_of(4), in, t);
    return spend_epoch(share, 2000, t);
  };
  // 7/8 x 0.7 + 1/8 x 1/4 = 0.644 of 800.
  EXPECT_NEAR(share_of(700), 515, 1);
  // 1/8 x 1/5 (four origins seen and this node) of 800.
  EXPECT_NEAR(share_of(0), 20, 1);
}

// Four nodes whose views agree, whose demand shifted: over the weight
// window they spent alike, since the last mark one of them did most. Each
// node's weight mixes both, so one view's shares still sum to the pool (a
// node taking the larger of its two parts overcommitted: 1.5 pools here).
TEST(FairShareTest, SharesOfOneViewSumToThePoolWhenDemandShifts) {
  constexpr std::uint64_t kLongEach = 1000;              // per node, before the mark
  const std::uint64_t recent[4] = {700, 100, 100, 100};  // per node, since the mark
  const TimeUs marked = kStart + FairShare::kWeightWindowUs;
  const TimeUs t = marked + 5 * kHorizonUs;  // the current window spans 4 horizons
  int total = 0;
  for (int node = 0; node < 4; ++node) {
    FairShare share;
    ShareInputs in{.headroom = 800,
                   .refill = 0,
                   .others = 3,
                   .has_own = true,
                   .own_consumed = 0,
                   .all_consumed = 0,
                   .key_seed = static_cast<std::uint64_t>(node) + 1};
    share.start_epoch(view_of(4), in, kStart);
    in.own_consumed = kLongEach;
    in.all_consumed = 4 * kLongEach;
    share.start_epoch(view_of(4), in, marked);
    in.own_consumed += recent[node];
    in.all_consumed += 1000;
    share.start_epoch(view_of(4), in, t);
    total += spend_epoch(share, 2000, t);
  }
  EXPECT_GE(total, 800 - 4);
  EXPECT_LE(total, 800 + 4);  // a dithered request each at most
}

// Twenty nodes meet a key at once and probe it twenty ways; ten of the
// draws admit a request, ten admit none. At the next epoch the ten without
// an entry take their eighth as one of twenty, as the probe expected, not
// one of the eleven origins they see: one view's shares sum to the pool
// (with 1/(8 x 11) each they summed to 1.11 pools). A node that met the key
// already spent on, and did not probe it, still shares the eighth among the
// origins it sees: the third spender of a key two of 200 nodes use gets
// 1/24 of the pool, not 1/1600.
TEST(FairShareTest, NodesWhoseProbeAdmittedNothingShareTheEighthAsManyWaysAsTheProbe) {
  constexpr std::uint32_t kNodes = 20;
  constexpr std::int64_t kPool = 1600;
  const TimeUs after_young = kStart + 2 * kHorizonUs;
  int total = 0;
  int entry_less = 0;
  for (std::uint32_t node = 0; node < kNodes; ++node) {
    const bool spent = node % 2 == 0;
    FairShare share;
    ShareInputs in{.headroom = kPool, .spenders = kNodes, .key_seed = node + 1u};
    share.start_epoch(view_of(kNodes), in, kStart);
    ASSERT_TRUE(share.probing());
    heard_of_spenders(in, 10, spent);
    share.start_epoch(view_of(kNodes), in, after_young);
    const int admitted = spend_epoch(share, 2 * kPool, after_young);
    total += admitted;
    if (!spent) entry_less = admitted;
  }
  EXPECT_NEAR(entry_less, kPool / (8 * kNodes), 1);  // 10, not 18
  EXPECT_GE(total, kPool - static_cast<int>(kNodes));
  EXPECT_LE(total, kPool + static_cast<int>(kNodes));  // a dithered request each at most

  FairShare third;
  ShareInputs in{.headroom = 2400, .others = 2, .all_consumed = 1000, .key_seed = 5};
  third.start_epoch(view_of(200), in, kStart);  // met already spent on: no probe
  ASSERT_FALSE(third.probing());
  const TimeUs later = kStart + 2 * kHorizonUs;
  ASSERT_FALSE(third.young(later));
  in.all_consumed = 2000;  // the other two spent meanwhile
  third.start_epoch(view_of(200), in, later);
  EXPECT_NEAR(spend_epoch(third, 2400, later), 2400 / 24, 1);
}

// 200 nodes meet a fixed window's key (100 a window) at once 150 ms before
// a window's end and probe it 200 ways; by their next epoch, still young
// here, they have heard of 60 spenders. In the probe's window each scales
// its weight by the origins seen over the live nodes (60 / 200): news of
// others may still be coming. In the next window the pool is a fresh
// window's that no node has spent from: each shares it at least as its
// probe did, and the 200 shares sum to about the window's 100, not a third
// of it (docs/cluster.md, "A fresh window, shared as a probe"). A sliding
// window's previous window still weighs: scaled there as before.
TEST(FairShareTest, AFixedWindowsNextWindowIsSharedWhileYoungAsItsProbeWas) {
  constexpr std::uint32_t kNodes = 200;
  constexpr std::int64_t kPool = 100;
  const TimeUs probed = kStart + 850'000;
  const auto admitted = [&](int forget_steps, TimeUs young_at) {
    int total = 0;
    for (std::uint32_t node = 0; node < kNodes; ++node) {
      const bool spent = node % 2 == 0;
      FairShare share;
      ShareInputs in{.headroom = kPool,
                     .spenders = kNodes,
                     .key_seed = node + 1u,
                     .carries_debt = true,
                     .rate_limit = kPool,
                     .rate_period_us = kUsPerSecond,
                     .capacity = kPool,
                     .refill_step_us = kUsPerSecond,
                     .forget_steps = forget_steps};
      share.start_epoch(view_of(kNodes), in, probed);
      EXPECT_TRUE(share.probing());
      heard_of_spenders(in, 60, spent);
      share.start_epoch(view_of(kNodes), in, young_at);
      EXPECT_TRUE(share.young(young_at));
      total += spend_epoch(share, 10, young_at);
    }
    return total;
  };
  const TimeUs same_window = kStart + 960'000;
  const TimeUs next_window = kStart + 1'010'000;
  EXPECT_NEAR(admitted(1, next_window), kPool, 15);
  EXPECT_LT(admitted(1, same_window), kPool / 2);
  EXPECT_LT(admitted(2, next_window), kPool / 2);
}

// Ten nodes; this one did a sixteenth of the consumption since the marks,
// so it weighs w = (7/16 + 1/10) / 8 = 0.0672. The key woke with 10,000 in
// its pool, and by this node's first request of the burst the others have
// spent 6,000 of it. Sharing what is left it gets w x 4,000 = 269; sharing
// the pool at the wake, w x 10,000 = 672, and its epoch ends with the
// wake's horizon. Having spent 100 since the wake itself, it weighs
// w' = (7 x 1,100/16,100 + 1/10) / 8 = 0.0723: 723 less 100.
TEST(FairShareTest, ALateStarterSharesThePoolAsItStoodWhenTheKeyWoke) {
  struct Late {
    int admitted;
    TimeUs epoch_end_us;
  };
  const TimeUs marked = kStart + 3 * kUsPerSecond;
  const TimeUs woke = marked + 200'000;  // within four horizons of the mark
  const TimeUs now = woke + 60'000;
  const auto late = [&](bool from_wake, std::uint64_t own_since) {
    FairShare share;
    ShareInputs in{.headroom = 10'000, .others = 9, .has_own = true};
    share.start_epoch(view_of(10), in, kStart);  // marks at 0
    in.own_consumed = 1'000;
    in.all_consumed = 10'000;
    share.start_epoch(view_of(10), in, marked);  // a weight window on: marks again
    share.note_wake(10'000, 1'000, woke, kHorizonUs, marked);
    in.headroom = static_cast<std::int64_t>(4'000 - own_since);
    in.own_consumed = 1'000 + own_since;
    in.all_consumed = 16'000 + own_since;
    in.from_wake = from_wake;
    in.epoch_end_us = from_wake ? woke + kHorizonUs : now + kHorizonUs;
    share.start_epoch(view_of(10), in, now);
    return Late{spend_epoch(share, 20'000, now), share.epoch_end_us()};
  };
  const Late left = late(false, 0);
  EXPECT_NEAR(left.admitted, 269, 1);
  EXPECT_EQ(left.epoch_end_us, now + kHorizonUs);
  const Late at_wake = late(true, 0);
  EXPECT_NEAR(at_wake.admitted, 672, 1);
  EXPECT_EQ(at_wake.epoch_end_us, woke + kHorizonUs);
  EXPECT_NEAR(late(true, 100).admitted, 723 - 100, 1);
}

// A key of capacity 100 refilling 100/s whose forgiven debts are carried,
// on two nodes, this one weighing half of `consumed_before` (0: a key new
// to the cluster).
// `ahead`: smooth bursty's request ahead, in its balance and its cap (as the
// Limiter gives them).
ShareInputs debt_inputs(std::uint64_t consumed_before, std::int64_t ahead = 0) {
  return ShareInputs{.headroom = 100 + ahead,
                     .others = 1,
                     .has_own = true,
                     .own_consumed = consumed_before / 2,
                     .all_consumed = consumed_before,
                     .carries_debt = true,
                     .rate_limit = 100,
                     .rate_period_us = kUsPerSecond,
                     .capacity = 100 + ahead};
}

// A burst on such a key: it woke at kStart + 1 s with its bucket full
// (every node had consumed `consumed_before` by then), and this node asked
// until `asked_until_us` after the wake.
struct DebtBurst {
  FairShare share;
  ShareInputs in;
  std::uint64_t before;
  TimeUs woke = kStart + kUsPerSecond;
  TimeUs asked_until_us;
  FairShare::Wake last_wake;  // what next_wake's wake found

  // `step_us` > 0: the key refills its 100 whole at each step's start (a
  // fixed window; ShareInputs::refill_step_us).
  // `woke_at`: the wake, if not kStart + 1 s (a step's start).
  // `news_aged`: the news carries when its consumption happened (a sliding
  // window's, which repays no overshoot: ShareInputs::repays_overshoot).
  DebtBurst(TimeUs asked_until, std::uint64_t consumed_before, std::int64_t ahead = 0,
            TimeUs step_us = 0, TimeUs woke_at = kStart + kUsPerSecond, bool news_aged = false)
      : in(debt_inputs(consumed_before, ahead)),
        before(consumed_before),
        woke(woke_at),
        asked_until_us(asked_until) {
    in.refill_step_us = step_us;
    in.repays_overshoot = !news_aged;
    share.start_epoch(view_of(2), in, kStart);  // marks; weighs half
    share.count(kStart);
    share.note_wake(before, before / 2, woke, kHorizonUs, kStart, kStart);
    in.from_wake = true;
    in.epoch_end_us = woke + kHorizonUs;
    share.start_epoch(view_of(2), in, woke);  // notes the balance at the wake: 100
    share.count(woke + asked_until_us);       // this node's last request in the burst
  }
  // The next wake at `again`: every node consumed `consumed` in the burst,
  // the newest news of it `heard_until_us` after its wake (0: when this node
  // last asked); this node's first epoch comes `late_us` after the wake with
  // `headroom` left and `consumed_since` consumed since.
  FairShare::EpochStart next_wake(std::uint64_t consumed, TimeUs again, std::int64_t headroom,
                                  TimeUs heard_until_us = 0, TimeUs late_us = 0,
                                  std::uint64_t consumed_since = 0) {
    const TimeUs asked_until = woke + asked_until_us;
    last_wake =
        share.note_wake(before + consumed, (before + consumed) / 2, again, kHorizonUs, asked_until,
                        heard_until_us > 0 ? woke + heard_until_us : asked_until);
    in.headroom = headroom;
    in.own_consumed = (before + consumed) / 2;
    in.all_consumed = before + consumed + consumed_since;
    in.epoch_end_us = again + kHorizonUs;
    again_us = again;
    return share.start_epoch(view_of(2), in, again + late_us);
  }
  // Requests admitted within the share (of 1000) in the window `windows`
  // steps of 1 s after the next wake's: the epoch next_wake started, or,
  // a window or more on, a new epoch (not from the wake) there.
  int spend_windows_on(int windows) {
    const TimeUs at = again_us + windows * kUsPerSecond;
    if (windows > 0) {
      in.from_wake = false;
      share.start_epoch(view_of(2), in, at);
    }
    return spend_epoch(share, 1000, at);
  }
  TimeUs again_us = 0;  // the next wake (next_wake)
};

// A forgiven debt is carried (the bucket-like algorithms): a burst that
// ended in debt left it to the idle spell, whose refill filled the bucket to
// its cap all the same. Two nodes (this one weighs half), a capacity of 100
// refilling 100/s; the burst woke with the bucket full, this node asked
// until 200 ms after the wake, and every node consumed `consumed` in it (one
// bucket: 100 + 20). At the next wake, `idle_s` later, the debt is what the
// cap held back less than one bucket's would have, at most a quarter of the
// capacity; the next burst shares its balance less that debt.
TEST(FairShareTest, ABurstsDebtTheIdleSpellForgaveIsCarriedIntoTheNext) {
  struct Next {
    std::int64_t debt;
    int admitted;
    FairShare::EpochStart found;
  };
  const auto next_burst = [](std::uint64_t consumed, TimeUs idle_us, std::int64_t headroom,
                             TimeUs asked_until_us = 200'000, TimeUs heard_until_us = 0,
                             TimeUs late_us = 0, std::uint64_t consumed_since = 0) {
    DebtBurst burst(asked_until_us, 0);
    const TimeUs again = burst.woke + asked_until_us + idle_us;
    const FairShare::EpochStart found =
        burst.next_wake(consumed, again, headroom, heard_until_us, late_us, consumed_since);
    return Next{burst.share.debt(), spend_epoch(burst.share, 1000, again + late_us), found};
  };
  constexpr TimeUs kIdleUs = 4'800'000;
  // 6 over one bucket's 120: carried; the next burst's 100 less 6, halved
  // (7/8 of this node's half plus 1/16), and the dither.
  const Next over = next_burst(126, kIdleUs, 100);
  EXPECT_EQ(over.debt, 6);
  EXPECT_TRUE(over.found.debt_carried);
  EXPECT_FALSE(over.found.debt_capped);
  EXPECT_GE(over.admitted, 47);
  EXPECT_LE(over.admitted, 48);
  // This node's first epoch comes 50 ms after the wake, when news of 10
  // consumed since has arrived and 5 refilled: the same debt.
  EXPECT_EQ(next_burst(126, kIdleUs, 100 - 10 + 5, 200'000, 0, 50'000, 10).debt, 6);
  // No overspend: nothing carried, the whole 100 shared.
  const Next exact = next_burst(120, kIdleUs, 100);
  EXPECT_EQ(exact.debt, 0);
  EXPECT_FALSE(exact.found.debt_carried);
  EXPECT_GE(exact.admitted, 50);
  EXPECT_LE(exact.admitted, 51);
  // An idle spell too short to fill the bucket (0.8 s: 80 of refill) leaves
  // the debt in the bucket, which repays it: nothing forgiven, nothing
  // carried.
  EXPECT_EQ(next_burst(126, 800'000, -6 + 80).debt, 0);
  // A burst that left the fraction of a token its refill made (109 of
  // 100 + 9.86) and an idle spell whose refill (99.14) filled the bucket
  // with it: nothing overspent, nothing carried (the burst's and the idle
  // spell's refills rounded down apart made a debt of 1 of it).
  EXPECT_EQ(next_burst(109, 991'400, 100, 98'600).debt, 0);
  // A partition's debt: at most a quarter of the capacity.
  const Next partition = next_burst(400, kIdleUs, 100);
  EXPECT_EQ(partition.debt, 25);
  EXPECT_TRUE(partition.found.debt_capped);
  // This node stopped asking early (50 ms), while news of consumption
  // arrived until 260 ms: the burst is taken to have ended a horizon before
  // that (160 ms), not at 50 ms, which would have made the debt 21.
  EXPECT_EQ(next_burst(126, kIdleUs + 150'000, 100, 50'000, 260'000).debt, 10);
}

// The mirror of a forgiven debt, a lost shortfall: a burst that left room
// (one bucket's 120 against `consumed`) while this node's share refused a
// request in it, room the idle spell's refill then lost at the cap, is
// credited to the next burst (debt() < 0), at most a quarter of the
// capacity. Two nodes, this one weighing half, as above.
TEST(FairShareTest, ABurstsLostShortfallIsCreditedToTheNext) {
  struct Next {
    std::int64_t debt;
    int admitted;
    FairShare::EpochStart found;
  };
  const auto next_burst = [](std::uint64_t consumed, TimeUs idle_us, bool refused) {
    DebtBurst burst(200'000, 0);
    if (refused) burst.share.note_refused();
    const TimeUs again = burst.woke + 200'000 + idle_us;
    // The bucket at the next wake: what the burst left and the idle refill
    // (100/s), at most its cap.
    const auto left = static_cast<std::int64_t>(120 - consumed);
    const FairShare::EpochStart found =
        burst.next_wake(consumed, again, std::min<std::int64_t>(100, left + idle_us / 10'000));
    return Next{burst.share.debt(), spend_epoch(burst.share, 1000, again), found};
  };
  // 10 left of one bucket's 120, refused here, the idle spell's 480 of
  // refill past the cap: all 10 credited, the next burst shares 110.
  const Next lost = next_burst(110, 4'800'000, true);
  EXPECT_EQ(lost.debt, -10);
  EXPECT_TRUE(lost.found.credit_carried);
  EXPECT_FALSE(lost.found.debt_carried);
  EXPECT_FALSE(lost.found.debt_capped);
  EXPECT_GE(lost.admitted, 55);
  EXPECT_LE(lost.admitted, 56);
  // Nobody refused here: demand may have been below the pool, as one
  // bucket's would; nothing credited, the 100 shared.
  const Next unasked = next_burst(110, 4'800'000, false);
  EXPECT_EQ(unasked.debt, 0);
  EXPECT_FALSE(unasked.found.credit_carried);
  EXPECT_GE(unasked.admitted, 50);
  EXPECT_LE(unasked.admitted, 51);
  // An idle spell of 0.95 s refills 95: of the 10 left, the bucket kept 5
  // below its cap, and only the 5 beyond were lost.
  EXPECT_EQ(next_burst(110, 950'000, true).debt, -5);
  // An idle spell too short to reach the cap loses nothing.
  EXPECT_EQ(next_burst(110, 850'000, true).debt, 0);
  // 70 left: at most a quarter of the capacity.
  const Next most = next_burst(50, 4'800'000, true);
  EXPECT_EQ(most.debt, -25);
  EXPECT_TRUE(most.found.debt_capped);
}

// A burst's carry counts the refills' fractions (a continuous refill).
// The burst asked until 99.9 ms (9.99 refilled: one bucket admits 109 of
// it) and the idle spell refills 98.99 until the next wake. A burst that
// consumed 108 left 1.99, of which the cap lost 0.98: rounded down apart
// (9 + 98 of refill), nothing was lost. The credit is a whole unit with
// 0.98 as its chance: over 400 keys (dither seeds), about 392 credited,
// none before. And a burst
// that consumed 110 ended 0.01 in debt, which the idle refill repaid (its
// bucket back at 98.98): nothing is carried, though this node's first
// epoch, 50 ms late with 10 consumed since and 5 refilled, finds its
// balance and what was spent since at the cap (a debt of 1 before).
TEST(FairShareTest, ABurstsCarryCountsTheRefillsFractions) {
  constexpr TimeUs kAskedUntilUs = 99'900;
  constexpr TimeUs kIdleUs = 989'900;
  int credited = 0;
  for (std::uint64_t seed = 1; seed <= 400; ++seed) {
    DebtBurst burst(kAskedUntilUs, 1000);
    burst.share.note_refused();
    burst.in.key_seed = seed;
    const FairShare::EpochStart found =
        burst.next_wake(108, burst.woke + kAskedUntilUs + kIdleUs, 100);
    ASSERT_GE(burst.share.debt(), -1) << "seed " << seed;
    ASSERT_LE(burst.share.debt(), 0) << "seed " << seed;
    if (found.credit_carried) ++credited;
  }
  // Not every one: a credit rounded up would be.
  EXPECT_GE(credited, 372);
  EXPECT_LE(credited, 398);
  DebtBurst repaid(kAskedUntilUs, 1000);
  const FairShare::EpochStart found =
      repaid.next_wake(110, repaid.woke + kAskedUntilUs + kIdleUs, 98 + 5 - 10, 0, 50'000, 10);
  EXPECT_EQ(repaid.share.debt(), 0);
  EXPECT_FALSE(found.debt_carried);
}

// A fixed window refills in steps (ShareInputs::refill_step_us): its limit
// whole at each window's start, not at a rate. A 200 ms burst within one
// window that consumed 110 of its 100 ran up 10 that the idle windows after
// it forgave (at the rate, 20 would have refilled in those 200 ms, and
// nothing been owed). The next burst shares its window's 100 less 10; a
// window after that, the whole 100 again: the window's count carries its
// own overspend, and the debt taken in each window of a long burst would
// be taken many times. With steps of 100 ms, the burst's 200 ms saw two
// windows start: 310 consumed against 300 is a debt of 10.
TEST(FairShareTest, AFixedWindowsDebtIsCountedInWindowsAndHeldInItsWakesWindow) {
  const auto burst_of = [](TimeUs step_us, std::uint64_t consumed) {
    auto burst = std::make_unique<DebtBurst>(200'000, 0, 0, step_us);
    burst->next_wake(consumed, burst->woke + 5 * kUsPerSecond, 100);
    return burst;
  };
  const std::unique_ptr<DebtBurst> over = burst_of(kUsPerSecond, 110);
  EXPECT_EQ(over->share.debt(), 10);
  // Half of 90 (7/8 of this node's half plus 1/16), and the dither.
  const int in_wakes_window = over->spend_windows_on(0);
  EXPECT_GE(in_wakes_window, 45);
  EXPECT_LE(in_wakes_window, 46);
  const int in_next_window = over->spend_windows_on(1);
  EXPECT_EQ(over->share.debt(), 0);
  EXPECT_GE(in_next_window, 50);
  EXPECT_LE(in_next_window, 51);
  EXPECT_EQ(burst_of(0, 110)->share.debt(), 0);  // a bucket's refill at the rate
  EXPECT_EQ(burst_of(100'000, 310)->share.debt(), 10);
}

// A credit, though, is held through a fixed window's later windows
// (ShareInputs::whole_steps): what the wake's window admitted beyond its 100
// on it, the window's count carries into the next as a debt and repays
// there, so the next window shares it out again (docs/cluster.md, "A credit
// through a burst's windows"). A burst that left 10 of its window's 100
// while this node's share refused: the next burst shares 110, in the wake's
// window and the next one alike. A sliding window carries its overshoot
// otherwise: there the credit is held in the wake's window only.
TEST(FairShareTest, AFixedWindowsCreditIsHeldThroughTheBurstsWindows) {
  const auto burst_of = [](int forget_steps) {
    auto burst = std::make_unique<DebtBurst>(200'000, 0, 0, kUsPerSecond);
    burst->in.forget_steps = forget_steps;
    burst->share.note_refused();
    burst->next_wake(90, burst->woke + 5 * kUsPerSecond, 100);
    return burst;
  };
  for (const int forget_steps : {1, 2}) {
    SCOPED_TRACE(forget_steps);
    const std::unique_ptr<DebtBurst> under = burst_of(forget_steps);
    EXPECT_EQ(under->share.debt(), -10);
    // Half of 110 (7/8 of this node's half plus 1/16), and the dither.
    const int in_wakes_window = under->spend_windows_on(0);
    EXPECT_GE(in_wakes_window, 55);
    EXPECT_LE(in_wakes_window, 56);
    const int in_next_window = under->spend_windows_on(1);
    if (forget_steps == 1) {
      EXPECT_EQ(under->share.debt(), -10);
      EXPECT_GE(in_next_window, 55);
      EXPECT_LE(in_next_window, 56);
    } else {
      EXPECT_EQ(under->share.debt(), 0);
      EXPECT_GE(in_next_window, 50);
      EXPECT_LE(in_next_window, 51);
    }
  }
}

// A sliding window forgets a burst only once its previous window no longer
// holds it (ShareInputs::forget_steps 2): a burst that ended in the window
// before the next wake's is still being repaid by its weight there, and
// nothing is carried; two windows on, 110 consumed of 100 is a debt of 10.
TEST(FairShareTest, ASlidingWindowsDebtIsForgivenOnlyTwoWindowsOn) {
  const auto debt_after = [](TimeUs idle_us) {
    DebtBurst burst(200'000, 0, 0, kUsPerSecond);
    burst.in.forget_steps = 2;
    burst.next_wake(110, burst.woke + 200'000 + idle_us, 100);
    return burst.share.debt();
  };
  EXPECT_EQ(debt_after(1'000'000), 0);  // woke in the next window
  EXPECT_EQ(debt_after(1'900'000), 10);
}

// A sliding window's debt is held in the wake's window and the next one
// (docs/cluster.md, "A sliding window's debt, held a window on"): what the
// share held back in the wake's window, the next window's estimate would
// give back, as that window's count weighs less there. 115 consumed of a
// window's 100 is a debt of 15: the next burst shares 85 in its wake's
// window and the next, and the whole 100 a window after.
TEST(FairShareTest, ASlidingWindowsDebtIsHeldInTheWindowAfterTheWakes) {
  DebtBurst burst(200'000, 0, 0, kUsPerSecond);
  burst.in.forget_steps = 2;
  burst.next_wake(115, burst.woke + 5 * kUsPerSecond, 100);
  EXPECT_EQ(burst.share.debt(), 15);
  for (const auto& [window, debt, least] :
       {std::tuple{0, 15, 42}, std::tuple{1, 15, 42}, std::tuple{2, 0, 50}}) {
    SCOPED_TRACE(window);
    // Half of the 100 less the debt (7/8 of this node's half plus 1/16),
    // and the dither.
    const int admitted = burst.spend_windows_on(window);
    EXPECT_EQ(burst.share.debt(), debt);
    EXPECT_GE(admitted, least);
    EXPECT_LE(admitted, least + 1);
  }
}

// A burst that crosses a window's start: it woke 100 ms before it, and
// this node asked until 100 ms after. A fixed window's 100 come back whole
// at the start: 200 of room, and 110 consumed left 90 (credited, at most
// half the limit: kMaxStepCreditX8). A sliding window frees only as the
// weight of the window the burst woke in falls: 10 of it by the burst's
// end, so 110 consumed left nothing, and 100 left 10. Counted whole, as a
// fixed window's, every job across a window's start found a shortfall of
// 90 and was credited the cap: `periodic` so at 20 nodes, +12.80% over 120 s
// (docs/cluster.md, "A sliding window's burst across a window's start").
TEST(FairShareTest, ASlidingWindowsBurstAcrossAWindowsStartGetsBackOnlyWhatItsFirstWindowFrees) {
  const auto debt_after = [](int forget_steps, std::uint64_t consumed) {
    DebtBurst burst(200'000, 0, 0, kUsPerSecond, kStart + 1'900'000);
    burst.in.forget_steps = forget_steps;
    burst.share.note_refused();
    burst.next_wake(consumed, burst.woke + 5 * kUsPerSecond, 100);
    return burst.share.debt();
  };
  EXPECT_EQ(debt_after(1, 110), -FairShare::kMaxStepCreditX8 * 100 / 8);
  EXPECT_EQ(debt_after(2, 110), 0);
  EXPECT_EQ(debt_after(2, 100), -10);
  EXPECT_EQ(debt_after(2, 125), 15);  // beyond: a debt two windows on
}

// A burst's end, where news carries its age (ShareInputs::repays_overshoot): the
// newest consumption heard of is when it happened, and the burst ended
// there, not a horizon before it. A sliding window's burst across a
// window's start: it woke 100 ms before it, this node asked until 20 ms
// after, and the newest consumption was 100 ms after (the burst's end).
// Its window freed 10 by then, so 110 consumed of the 100 at the wake is
// no debt. Taken a horizon earlier, as news without its age is (it comes
// up to a horizon after the fact), the end is this node's last request:
// 2 freed, a debt of 8 the cluster did not run up (docs/cluster.md, "A
// burst's end, where news carries its age").
TEST(FairShareTest, ABurstEndsAtItsNewestConsumptionWhereNewsCarriesItsAge) {
  const auto debt_after = [](bool news_aged) {
    DebtBurst burst(120'000, 0, 0, kUsPerSecond, kStart + 1'900'000, news_aged);
    burst.in.forget_steps = 2;
    burst.next_wake(110, burst.woke + 5 * kUsPerSecond, 100, 200'000);
    return burst.share.debt();
  };
  EXPECT_EQ(debt_after(true), 0);
  EXPECT_EQ(debt_after(false), 8);
}

// A wake that no epoch here followed (this node asked nothing since: most
// likely a straggler's news, a retransmission after a loss that came after
// a quiet spell) keeps the debt the burst before it ran up for the next
// epoch, which carries it, and it is not lost at the next wake; the
// straggler's units are not counted. Where the key refills in steps (a
// fixed window), 110 of a window's 100 is a debt of 10; a bucket's 130 of
// 100 and 20 refilled over the 200 ms burst too. Before, a bucket's was
// lost there, and with it the first job's shortfall on `periodic` at 200
// nodes at most nodes.
TEST(FairShareTest, ADebtWaitingForAnEpochIsKeptThroughAStragglersWake) {
  // The debt after the straggler's wake and the next, whose news since
  // the straggler's held `units`; and whether the next wake found the
  // straggler.
  const auto debt_after_a_straggler = [](TimeUs step_us, std::uint64_t consumed,
                                         std::uint64_t units) {
    // A bucket's key is not new to the cluster (its first burst would be
    // woken at its first epoch).
    const std::uint64_t before = step_us > 0 ? 0 : 1000;
    DebtBurst burst(200'000, before, 0, step_us);
    const TimeUs asked_until = burst.woke + 200'000;
    const FairShare::Wake straggler =
        burst.share.note_wake(before + consumed, (before + consumed) / 2, burst.woke + kUsPerSecond,
                              kHorizonUs, asked_until, asked_until);
    EXPECT_FALSE(straggler.straggler);  // it ends the burst: the debt is reckoned
    burst.next_wake(consumed + units, burst.woke + 5 * kUsPerSecond, 100);
    return std::pair{burst.share.debt(), burst.last_wake.straggler};
  };
  constexpr auto kMost = FairShare::kMostStragglerUnits;
  for (const auto& [step_us, consumed] : {std::pair<TimeUs, std::uint64_t>{kUsPerSecond, 110},
                                          std::pair<TimeUs, std::uint64_t>{0, 130}}) {
    SCOPED_TRACE(step_us);
    EXPECT_EQ(debt_after_a_straggler(step_us, consumed, 2), std::pair(std::int64_t{10}, true));
    EXPECT_EQ(debt_after_a_straggler(step_us, consumed, kMost), std::pair(std::int64_t{10}, true));
    // One unit more was a burst: the debt is dropped, and no straggler
    // counted.
    EXPECT_EQ(debt_after_a_straggler(step_us, consumed, kMost + 1),
              std::pair(std::int64_t{0}, false));
  }
}

// A forgiven debt's refills are rounded down, as one bucket admits whole
// requests: a burst that ended at 199.99 ms refilled 19.99, of which one
// bucket admits 19, so 120 consumed against a pool of 100 is a debt of 1
// (rounded up it was 0, and a job on every node kept a token of each
// burst). An algorithm that admits one request ahead of its refill (smooth
// bursty's reservation, in its balance and cap) owes none.
TEST(FairShareTest, AForgivenDebtRoundsEachRefillDown) {
  const auto debt_after = [](std::int64_t ahead) {
    DebtBurst burst(199'990, 1000, ahead);  // not a key new to the cluster
    burst.next_wake(120, burst.woke + 199'990 + 4'800'000, 100 + ahead);
    return burst.share.debt();
  };
  EXPECT_EQ(debt_after(0), 1);
  EXPECT_EQ(debt_after(1), 0);
}

// A key new to the cluster: its first burst is woken at this node's first
// epoch, from nothing consumed, so its overshoot (126 against 100 and 20 of
// refill) is carried into the next burst like any other's. A key others
// spent on before this node met it (more consumed than its capacity holds)
// is not: its first burst here is not its first.
TEST(FairShareTest, AKeyNewToTheClusterCarriesItsFirstBurstsDebt) {
  const auto debt_after = [](std::uint64_t consumed_before) {
    FairShare share;
    ShareInputs in = debt_inputs(consumed_before);
    in.own_consumed = 0;
    share.start_epoch(view_of(2), in, kStart);  // the first epoch: the cold start
    share.count(kStart + 200'000);              // this node's last request in it
    const TimeUs again = kStart + 5 * kUsPerSecond;
    share.note_wake(consumed_before + 126, 63, again, kHorizonUs, kStart + 200'000,
                    kStart + 200'000);
    in.all_consumed = consumed_before + 126;
    in.own_consumed = 63;
    in.epoch_end_us = again + kHorizonUs;
    in.from_wake = true;
    share.start_epoch(view_of(2), in, again);
    return share.debt();
  };
  EXPECT_EQ(debt_after(0), 6);
  EXPECT_EQ(debt_after(500), 0);
}

// A debt beyond the balance left comes out of the epoch's refill: shares
// never take the balance this node sees below the debt. Carried 6, with 2
// left and 10 refilling over the epoch, the epoch shares 6, half of it here.
TEST(FairShareTest, ADebtBeyondTheBalanceComesOutOfTheRefill) {
  DebtBurst burst(200'000, 1000);  // not a key new to the cluster
  const TimeUs again = burst.woke + 5 * kUsPerSecond;
  burst.next_wake(126, again, 100);
  FairShare& share = burst.share;
  ShareInputs& in = burst.in;
  ASSERT_EQ(share.debt(), 6);
  // Later in the burst: 2 left, 10 refilling, spendable at once.
  in.from_wake = false;
  in.headroom = 2;
  in.refill = 10;
  in.all_consumed = 1224;
  in.own_consumed = 612;
  const TimeUs later = again + 2 * kHorizonUs;
  share.start_epoch(view_of(2), in, later);
  const int admitted = spend_epoch(share, 100, later);
  EXPECT_GE(admitted, 3);  // half of 10 - 4, and the dither (half of 10: 5 or 6)
  EXPECT_LE(admitted, 4);
}

// A log's burst error is carried into its next burst's pool: the cluster
// consumed `consumed` between two wakes against a pool of 100 this node
// shared at the first; at the second this node (weighing half) shares half of
// 100 less that error: an excess always, a shortfall only if its share
// refused a request in the burst, and only if the burst's consumption was all
// shared from its wake (it ended within kLogWakeHorizons + 1 horizons).
TEST(FairShareTest, ALogsBurstErrorIsCarriedIntoItsNextPool) {
  const auto second_burst = [](std::uint64_t consumed, bool refused, TimeUs ended_after_us,
                               bool carry = true, bool first_carries = true,
                               std::int64_t held = 0) {
    FairShare share;
    ShareInputs in{.headroom = 100, .others = 1, .has_own = true};
    share.start_epoch(view_of(2), in, kStart);  // marks; weighs half
    share.count(kStart);  // asked here in every burst: no idle raise
    const TimeUs woke = kStart + kUsPerSecond;
    share.note_wake(0, 0, woke, kHorizonUs, kStart);
    in.from_wake = true;
    in.epoch_end_us = woke + FairShare::kLogWakeHorizons * kHorizonUs;
    in.carry_burst_error = carry && first_carries;
    share.start_epoch(view_of(2), in, woke);  // shares 100: notes it
    share.count(woke);  // this node asked in the burst
    if (refused) share.note_refused();
    const TimeUs again = woke + kUsPerSecond;
    share.note_wake(consumed, consumed / 2, again, kHorizonUs, woke + ended_after_us);
    in.carry_burst_error = carry;
    in.headroom = 100 - held;  // the algorithm holds `held` back (in the headroom)
    in.algorithm_held = held;
    in.own_consumed = consumed / 2;
    in.all_consumed = consumed;
    in.epoch_end_us = again + FairShare::kLogWakeHorizons * kHorizonUs;
    share.start_epoch(view_of(2), in, again);
    return spend_epoch(share, 1000, again);
  };
  constexpr TimeUs kEnded = 150'000;  // the burst's last news, after its wake
  const auto near = [](int admitted, int expected) {
    return admitted >= expected && admitted <= expected + 1;  // the dither
  };
  EXPECT_PRED2(near, second_burst(110, false, kEnded), 45);         // 100 - 10
  EXPECT_PRED2(near, second_burst(110, false, kEnded, false), 50);  // not asked
  // A first burst whose epoch did not carry noted its pool for the crowding
  // check only (pool_carries_): no error is carried from it.
  EXPECT_PRED2(near, second_burst(110, false, kEnded, true, false), 50);
  EXPECT_PRED2(near, second_burst(90, false, kEnded), 50);          // nobody here asked for more
  EXPECT_PRED2(near, second_burst(90, true, kEnded), 55);           // 100 + 10
  EXPECT_PRED2(near, second_burst(100, true, kEnded), 50);
  // A burst that went on past its wake's epochs: shared as usual, no error.
  const TimeUs beyond = (FairShare::kLogWakeHorizons + 1) * kHorizonUs + 1;
  EXPECT_PRED2(near, second_burst(110, false, beyond), 50);
  // A shortfall is at most the pool: 0 consumed, refused, gives 100 more.
  EXPECT_PRED2(near, second_burst(0, true, kEnded), 100);
  // What the algorithm holds back of the excess already (a sliding log's
  // carried overshoot, in the headroom) is not taken again: of an excess of
  // 10, 4 held leave 6 to carry, 10 or more held none; a shortfall is
  // credited whole. (Taken again: 43, 40, 32.)
  EXPECT_PRED2(near, second_burst(110, false, kEnded, true, true, 4), 45);   // (96 - 6) / 2
  EXPECT_PRED2(near, second_burst(110, false, kEnded, true, true, 10), 45);  // 90 / 2
  EXPECT_PRED2(near, second_burst(110, false, kEnded, true, true, 25), 37);  // 75 / 2, rounded
  EXPECT_PRED2(near, second_burst(90, true, kEnded, true, true, 10), 50);    // (90 + 10) / 2
}

// A refill that accrues (the sliding window's) is spendable as the epoch
// goes by: none of it at the start, half halfway, all at the end.
TEST(FairShareTest, ARefillThatAccruesBecomesSpendableAsTheEpochGoesBy) {
  FairShare share;
  ShareInputs in{.headroom = 0,
                 .refill = 100,
                 .refill_accrues = true,
                 .others = 1,
                 .has_own = true,
                 .own_consumed = 0,
                 .all_consumed = 0};
  share.start_epoch(view_of(2), in, kStart);
  in.own_consumed = 500;
  in.all_consumed = 1000;
  const TimeUs t = kStart + FairShare::kWeightWindowUs;
  share.start_epoch(view_of(2), in, t);  // half of 100 for this node
  EXPECT_LE(spend_epoch(share, 100, t), 1);  // the dither at most
  const int halfway = spend_epoch(share, 100, t + kHorizonUs / 2);
  EXPECT_GE(halfway, 24);
  EXPECT_LE(halfway, 26);
  const int by_end = spend_epoch(share, 100, t + kHorizonUs - 1);
  EXPECT_GE(halfway + by_end, 49);
  EXPECT_LE(halfway + by_end, 51);
  // Without accrual the same refill is spendable at once.
  FairShare at_once;
  in.refill_accrues = false;
  in.own_consumed = 0;
  in.all_consumed = 0;
  at_once.start_epoch(view_of(2), in, kStart);
  in.own_consumed = 500;
  in.all_consumed = 1000;
  at_once.start_epoch(view_of(2), in, t);
  const int at_start = spend_epoch(at_once, 100, t);
  EXPECT_GE(at_start, 49);
  EXPECT_LE(at_start, 51);
}

// Shares below one request: of many nodes with half a request each, about
// half admit one (the dither differs by node), not all and not none.
TEST(FairShareTest, SharesBelowOneRequestAreDithered) {
  int admitted = 0;
  for (std::uint64_t node = 0; node < 1000; ++node) {
    FairShare share;
    ShareInputs in{
        .headroom = 100, .refill = 0, .spenders = 200, .key_seed = node * 0x9e3779b97f4a7c15ull};
    share.start_epoch(view_of(200), in, kStart);
    admitted += spend_epoch(share, 10, kStart);
  }
  EXPECT_GT(admitted, 420);
  EXPECT_LT(admitted, 580);
}

// Draws spread over the nodes: 200 nodes meeting a key at once each probe it
// at half a request (a pool of 100, 200 ways), and each keeps one with that
// chance. Their draws start from one point (the key's, the horizon's) and
// step by their places, so each key's 200 keep 100 within 2, where
// independent draws keep 100 give or take 7 (2 or less at a fifth of the
// keys). The places are shuffled each horizon: nodes 0 and 55, whose
// steps by the golden ratio nearly coincide (55 x 0.618 = 33.99), keep
// together in about half the horizons, as two independent draws would, not
// in all of them.
TEST(FairShareTest, DrawsSpreadOverTheNodesKeepAboutTheirChancesSum) {
  constexpr std::uint32_t kNodes = 200;
  const auto kept = [&](std::uint32_t node, std::uint64_t key, TimeUs at) {
    FairShare share;
    ShareInputs in{.headroom = 100, .refill = 0, .spenders = kNodes, .key_seed = key};
    ShareView view = view_of(kNodes);
    view.rank = node;
    share.start_epoch(view, in, at);
    return spend_epoch(share, 10, at);
  };
  int most_astray = 0;
  for (std::uint64_t key = 1; key <= 20; ++key) {
    int admitted = 0;
    for (std::uint32_t node = 0; node < kNodes; ++node) admitted += kept(node, key, kStart);
    most_astray = std::max(most_astray, std::abs(admitted - 100));
  }
  EXPECT_LE(most_astray, 2);
  int together = 0;
  constexpr int kHorizons = 40;
  for (int h = 0; h < kHorizons; ++h) {
    const TimeUs at = kStart + h * kHorizonUs;
    together += kept(0, 1, at) == kept(55, 1, at) ? 1 : 0;
  }
  EXPECT_GE(together, 10);
  EXPECT_LE(together, 30);
}

// Sparse demand keeps one request per epoch beyond the share; a node that
// saw dense demand (kDenseRequests in an epoch) does not, for a while.
TEST(FairShareTest, SparseDemandKeepsOneRequestPerEpochDenseDoesNot) {
  FairShare share;
  ShareInputs in{.headroom = 0,
                 .refill = 0,
                 .others = 4,
                 .has_own = true,
                 .own_consumed = 1,
                 .all_consumed = 5};
  TimeUs t = kStart;
  const auto ask = [&] {
    const FairShare::Answer answer = share.ask(1, t);
    share.count(t);
    return answer;
  };
  share.start_epoch(view_of(5), in, t);
  EXPECT_EQ(ask(), FairShare::Answer::kSparse);
  EXPECT_EQ(ask(), FairShare::Answer::kRefused);
  t += kHorizonUs;
  share.start_epoch(view_of(5), in, t);
  EXPECT_EQ(share.ask(1, t), FairShare::Answer::kSparse);  // asking twice changes nothing
  EXPECT_EQ(ask(), FairShare::Answer::kSparse);
  for (std::uint32_t i = 1; i < FairShare::kDenseRequests; ++i) {
    EXPECT_EQ(ask(), FairShare::Answer::kRefused);
  }
  t += kHorizonUs;
  share.start_epoch(view_of(5), in, t);
  EXPECT_EQ(ask(), FairShare::Answer::kRefused);  // dense now
}

// A share of a key 9 other origins spend on (10 live nodes), made crowded
// at kStart if `crowded`, whose key woke a second later, with an epoch at
// the wake that noted the pool there (headroom + refill) for the next
// wake's checks.
struct WokenShare {
  FairShare share;
  ShareInputs in;
  TimeUs woke = 0;
};
WokenShare woken_with_pool(std::int64_t headroom, std::int64_t refill, bool crowded) {
  WokenShare w;
  w.in = ShareInputs{.headroom = 0, .refill = 0, .others = 9, .has_own = true};
  w.share.start_epoch(view_of(10), w.in, kStart);
  if (crowded) w.share.make_crowded(kStart);  // dense for kDenseMemoryUs
  w.woke = kStart + kUsPerSecond;
  w.share.note_wake(0, 0, w.woke, kHorizonUs, kStart);
  w.in.headroom = headroom;
  w.in.refill = refill;
  w.share.start_epoch(view_of(10), w.in, w.woke);
  return w;
}

// A crowded burst: many nodes, each asking a few requests (sparse each),
// passed their first request beyond the share at once. At the next wake the
// burst is seen to have consumed three times the pool at its wake
// (and kDenseRequests beyond it), and the node's demand on the key is dense:
// no first request is kept beyond its share. A burst below three times its
// pool (a refill over up to three horizons may do that) changes nothing, nor
// does one that went on past kLogWakeHorizons + 1 horizons after its wake.
TEST(FairShareTest, ABurstThatConsumedThreeTimesItsPoolMakesDemandDense) {
  const auto next_burst = [](std::uint64_t consumed, TimeUs ended_after_us) {
    auto [share, in, woke] = woken_with_pool(20, 10, false);  // a pool of 30
    const TimeUs again = woke + kUsPerSecond;
    const bool crowded =
        share.note_wake(consumed, 0, again, kHorizonUs, woke + ended_after_us).crowded;
    in.headroom = 0;
    in.refill = 0;
    in.all_consumed = consumed;
    // 10 origins: not crowded by them.
    EXPECT_FALSE(share.start_epoch(view_of(10), in, again).crowded_origins);
    return std::pair{share.ask(1, again), crowded};
  };
  constexpr TimeUs kEnded = 150'000;
  EXPECT_EQ(next_burst(90, kEnded), std::pair(FairShare::Answer::kRefused, true));  // 3 x 30
  EXPECT_EQ(next_burst(89, kEnded), std::pair(FairShare::Answer::kSparse, false));
  const TimeUs beyond = (FairShare::kLogWakeHorizons + 1) * kHorizonUs + 1;
  EXPECT_EQ(next_burst(200, beyond), std::pair(FairShare::Answer::kSparse, false));
}

// A crowd disproved: a key made crowded (here as one of many new at once)
// whose next burst, all shared from its wake's pool, spent at least a unit
// and at most 1/kDisprovedCrowdPools of that pool was no crowd's: the marks
// go, and the first request of an epoch is kept beyond the share again. A
// burst that spent more keeps them, and so does a wake with nothing spent
// since the last (no evidence). That wake (the last was noted by a request
// its share then refused) keeps the pool noted at the last, and the wake
// after it judges the burst whole.
TEST(FairShareTest, ABurstThatSpentAnEighthOfItsPoolDisprovesACrowd) {
  // `news_after_us` > 0: the wake at the pool was a refused request's, and
  // news woke the key again that long after it, nothing consumed between.
  const auto next_burst = [](std::uint64_t consumed, TimeUs news_after_us = 0) {
    auto [share, in, woke] = woken_with_pool(20, 12, true);  // a pool of 32
    TimeUs burst_woke = woke;
    if (news_after_us > 0) {
      burst_woke = woke + news_after_us;
      EXPECT_FALSE(share.note_wake(0, 0, burst_woke, kHorizonUs, kStart).crowd_disproved);
    }
    const TimeUs again = woke + kUsPerSecond;
    const FairShare::Wake wake =
        share.note_wake(consumed, 0, again, kHorizonUs, burst_woke + 50'000);
    in.headroom = 0;
    in.refill = 0;
    in.all_consumed = consumed;
    share.start_epoch(view_of(10), in, again);
    return std::tuple(share.ask(1, again), wake.crowd_disproved, share.crowded(again));
  };
  static_assert(FairShare::kDisprovedCrowdPools * 4 == 32);
  EXPECT_EQ(next_burst(4), std::tuple(FairShare::Answer::kSparse, true, false));
  EXPECT_EQ(next_burst(1), std::tuple(FairShare::Answer::kSparse, true, false));
  EXPECT_EQ(next_burst(5), std::tuple(FairShare::Answer::kRefused, false, true));
  EXPECT_EQ(next_burst(0), std::tuple(FairShare::Answer::kRefused, false, true));
  // Judged after the news's wake, against the pool at the refused request's
  // (2 horizons later: no epoch here noted a pool at the news).
  EXPECT_EQ(next_burst(4, 2 * kHorizonUs), std::tuple(FairShare::Answer::kSparse, true, false));
  EXPECT_EQ(next_burst(5, 2 * kHorizonUs), std::tuple(FairShare::Answer::kRefused, false, true));
}

// A crowd disproved by a run: a node asked nothing within a horizon of the
// key's wakes (a user's requests now and then), so it noted no pool at
// them; kDisprovingBurstRun bursts in a row, each spending at most a
// quarter of the pool its last epoch saw, drop the key's crowd marks. Fewer
// do not, a larger burst starts the run again, and a wake with nothing
// consumed since the last neither counts nor breaks it.
TEST(FairShareTest, ARunOfSmallBurstsDisprovesACrowdWhereNoPoolWasNoted) {
  // `bursts`: each wake's consumption since the last (units).
  const auto after = [](std::initializer_list<std::uint64_t> bursts) {
    FairShare share;
    const ShareInputs in{.headroom = 20, .refill = 4, .others = 9, .has_own = true};
    share.start_epoch(view_of(60), in, kStart);  // sees a pool of 24
    share.make_crowded(kStart);
    std::uint64_t all = 0;
    TimeUs now = kStart;
    bool disproved = false;
    for (const std::uint64_t consumed : bursts) {
      const TimeUs last_change = now + 100'000;
      now += kUsPerSecond;
      all += consumed;
      disproved = share.note_wake(all, 0, now, kHorizonUs, last_change).crowd_disproved;
    }
    return std::pair{disproved, share.crowded(now)};
  };
  static_assert(FairShare::kDisprovingBurstRun == 4);
  static_assert(FairShare::kRunBurstPools * 6 == 24);
  EXPECT_EQ(after({6, 6, 6, 6}), std::pair(true, false));
  EXPECT_EQ(after({1, 6, 6}), std::pair(false, true));
  EXPECT_EQ(after({1, 2, 6, 7}), std::pair(false, true));
  EXPECT_EQ(after({1, 2, 7, 1, 2, 3}), std::pair(false, true));
  EXPECT_EQ(after({1, 2, 7, 1, 2, 3, 1}), std::pair(true, false));
  EXPECT_EQ(after({1, 0, 2, 0, 3, 1}), std::pair(true, false));
}

// A key whose last kDisprovingBurstRun bursts each spent at most a quarter
// of the pool (users asking now and then) keeps two requests an epoch
// beyond the share at a node whose demand on it is sparse, not one: the
// second within a horizon was refused while the bucket stood near its cap.
TEST(FairShareTest, ARunOfSmallBurstsKeepsTwoRequestsAnEpochBeyondTheShare) {
  const auto answers = [](int small_bursts) {
    FairShare share;
    ShareInputs in{.headroom = 20, .refill = 4, .others = 9, .has_own = true};
    share.start_epoch(view_of(60), in, kStart);  // sees a pool of 24
    TimeUs now = kStart;
    for (int i = 1; i <= small_bursts; ++i) {
      now += kUsPerSecond;
      share.note_wake(3 * static_cast<std::uint64_t>(i), 0, now, kHorizonUs, now - 900'000);
    }
    in.headroom = 0;  // a share of nothing but its dither, below a request
    in.refill = 0;
    in.all_consumed = 3 * static_cast<std::uint64_t>(small_bursts);
    share.start_epoch(view_of(60), in, now);
    std::vector<FairShare::Answer> got;
    for (int i = 0; i < 3; ++i) {
      got.push_back(share.ask(1, now));
      share.count(now);
    }
    return got;
  };
  using A = FairShare::Answer;
  static_assert(FairShare::kDisprovingBurstRun == 4);
  EXPECT_EQ(answers(4), (std::vector{A::kSparse, A::kSparse, A::kRefused}));
  EXPECT_EQ(answers(3), (std::vector{A::kSparse, A::kRefused, A::kRefused}));
}

// An epoch that sees kCrowdedOriginsPerPool times as many origins spending
// at about the same time (ShareInputs::recent_others) as its pool holds
// requests, and at least kCrowdedOrigins, makes demand dense at once: no
// first request beyond the share, now or for kDenseMemoryUs. Fewer recent
// origins (however many have an entry: users asking now and then at every
// node) or a larger pool keep the sparse pass.
TEST(FairShareTest, ManyMoreRecentOriginsThanThePoolHoldsMakeDemandDense) {
  const auto first_answer = [](std::uint32_t origins, std::uint32_t recent, std::int64_t pool) {
    FairShare share;
    const ShareInputs in{.headroom = pool,
                         .refill = 0,
                         .others = origins - 1,
                         .recent_others = recent - 1,
                         .has_own = true};
    const bool crowded = share.start_epoch(view_of(200), in, kStart).crowded_origins;
    EXPECT_EQ(crowded, share.dense(kStart + kUsPerSecond));
    return std::pair{share.ask(pool + 1, kStart), crowded};
  };
  constexpr std::uint32_t kOrigins = FairShare::kCrowdedOrigins;
  static_assert(kOrigins % FairShare::kCrowdedOriginsPerPool == 0);
  constexpr std::int64_t kPool = kOrigins / FairShare::kCrowdedOriginsPerPool;  // 36
  EXPECT_EQ(first_answer(kOrigins, kOrigins, kPool),
            std::pair(FairShare::Answer::kRefused, true));
  EXPECT_EQ(first_answer(kOrigins, kOrigins, kPool + 1),
            std::pair(FairShare::Answer::kSparse, false));
  EXPECT_EQ(first_answer(kOrigins - 1, kOrigins - 1, 0),
            std::pair(FairShare::Answer::kSparse, false));
  EXPECT_EQ(first_answer(4 * kOrigins, kOrigins - 1, 0),
            std::pair(FairShare::Answer::kSparse, false));
}

// A crowd's key at node `node` of many: a pool of `pool`, `origins` with an
// entry (this node included), `recent` of them spending at about the same
// time, `in_burst` in one burst.
ShareInputs crowd_inputs(std::uint64_t node, std::int64_t pool, std::uint32_t origins,
                         std::uint32_t recent, std::uint32_t in_burst) {
  return ShareInputs{.headroom = pool,
                     .refill = 0,
                     .others = origins - 1,
                     .recent_others = recent - 1,
                     .burst_others = in_burst - 1,
                     .key_seed = node * 0x9e3779b97f4a7c15ULL};
}

// Of 1000 nodes' epochs (`epoch_of(node)`: the answer to a request of cost
// 1), those admitting it, within the share or as a first request beyond it.
int admitted_of(const std::function<FairShare::Answer(std::uint64_t)>& epoch_of) {
  int admitted = 0;
  for (std::uint64_t node = 1; node <= 1000; ++node) {
    admitted += epoch_of(node) != FairShare::Answer::kRefused ? 1 : 0;
  }
  return admitted;
}

// Makes `share` one whose node asked in none of the key's last 24 wakes
// (bursts apart by an idle spell), the last before `before`: it counts few
// live nodes in a crowd (the part of the bursts it asked in, a running
// average in 1/63, settles at its floor, 4/63: 12 of 200 live nodes).
void asked_in_no_wake(FairShare& share, TimeUs before) {
  constexpr int kWakes = 24;
  constexpr TimeUs kApartUs = (FairShare::kIdleSpellHorizons + 1) * kHorizonUs;
  for (int i = kWakes; i >= 1; --i) {
    const TimeUs at = before - i * kApartUs;
    share.note_wake(0, 0, at, kHorizonUs, at - kApartUs);
  }
}

// A crowd's first requests, thinned: from kCrowdedNodes live nodes, where at
// least kDenseRequests origins spent on the key in one burst (within
// kBurstHorizons horizons of each other), a node's first request of an
// epoch is admitted with the crowd's chance, the pool over the crowd (the
// origins with an entry, this node included; the recent ones if more; the
// live nodes times the part of the key's bursts this node asked in, if
// more), or its share's own if larger: a draw keeps it beyond the share
// only with what tops the share's chance up to the crowd's, not with the
// crowd's chance again. Fewer live nodes, fewer origins in one burst
// (however many spent within a second: users asking now and then) keep it
// always.
TEST(FairShareTest, ACrowdsFirstRequestIsAdmittedWithTheCrowdsChanceNotTwice) {
  // `others_spent`: what the other origins consumed between the two epochs;
  // with some, this node's share is its part of the eighth alone, 1/(8 x
  // origins) of the pool; without, the pool over the origins.
  const auto admitted = [](std::uint32_t live, std::uint32_t origins, std::uint32_t recent,
                           std::uint32_t in_burst, std::int64_t pool, bool asks_rarely,
                           std::uint64_t others_spent) {
    return admitted_of([&](std::uint64_t node) {
      FairShare share;
      ShareInputs in = crowd_inputs(node, pool, origins, recent, in_burst);
      in.has_own = true;
      // Known here for a while (not young).
      const TimeUs at = kStart + 100 * kHorizonUs;
      share.start_epoch(view_of(live), in, kStart);
      if (asks_rarely) {
        asked_in_no_wake(share, at);
      } else {
        // It asked in the last burst, and the key woke for this one (not a
        // sparse asker's turn on a busy key).
        share.count(kStart);
        share.note_wake(0, 0, at, kHorizonUs, kStart);
      }
      in.all_consumed = others_spent;
      share.start_epoch(view_of(live), in, at);
      return share.ask(1, at);
    });
  };
  constexpr std::uint32_t kFew = FairShare::kDenseRequests - 1;
  // A share of 1/32 of a request (10 / (8 x 40)). A node asking in every
  // burst counts every live node: a pool of 10 among 200, 1 in 20 (50 of
  // 1000; 3 standard deviations are 21). One asking rarely counts the 40
  // origins: a quarter. Before, the share's chance and a draw's quarter of
  // the rest (273) in both.
  EXPECT_NEAR(admitted(200, 40, 20, 20, 10, false, 100), 50, 22);
  EXPECT_NEAR(admitted(200, 40, 20, 20, 10, true, 100), 250, 45);
  // 20 recent origins, more than the 12 with an entry: half.
  EXPECT_NEAR(admitted(200, 12, 20, 20, 10, true, 100), 500, 50);
  // A share of a quarter (the pool over the 40 origins) above the crowd's
  // chance, an eighth over 80 recent origins: the share's stands (before:
  // 344).
  EXPECT_NEAR(admitted(200, 40, 80, 20, 10, true, 0), 250, 45);
  EXPECT_EQ(admitted(200, 40, 20, 20, 40, true, 100), 1000);  // a request for each
  EXPECT_EQ(admitted(200, 40, 20, kFew, 10, true, 100), 1000);
  EXPECT_EQ(admitted(FairShare::kCrowdedNodes - 1, 40, 20, 20, 10, false, 100), 1000);
  EXPECT_EQ(admitted(FairShare::kCrowdedNodes, 40, 20, 20, 0, false, 100), 0);
}

// A sparse asker's turn: on a busy key (200 origins, no wake), a node whose
// demand was dense once (no sparse pass) and asks again 10 horizons after
// its last epoch began has a share of a pool of 10 of 1/200 (the weights of
// the nodes that take a share each horizon sum to one), raised by the 10
// horizons of its turn: its request's chance is a half, not 1/20. Not where
// it asks within a horizon of its last epoch's end (dense demand's epochs
// follow each other), nor where the key woke since (a wake's epoch shares
// the wake's pool); and never beyond one request (a crowd arriving on such
// a key takes a request a node), nor a share of a request or more.
TEST(FairShareTest, ASparseAskersTurnCoversItsInterval) {
  // Requests admitted of `tries` at the turn at `at`, and what its start found.
  const auto turn = [](std::uint64_t node, std::int64_t pool, TimeUs at, bool woke, int tries) {
    FairShare share;
    ShareInputs in{.headroom = pool,
                   .refill = 0,
                   .others = 199,
                   .has_own = true,
                   .own_consumed = 1,
                   .all_consumed = 200,
                   .key_seed = node * 0x9e3779b97f4a7c15ULL};
    share.start_epoch(view_of(200), in, kStart);
    for (std::uint32_t i = 0; i < FairShare::kDenseRequests; ++i) share.count(kStart);
    if (woke) share.note_wake(200, 1, at - kHorizonUs / 2, kHorizonUs, kStart);
    in.own_consumed = 2;
    in.all_consumed = 400;
    const FairShare::EpochStart found = share.start_epoch(view_of(200), in, at);
    return std::pair{spend_epoch(share, tries, at), found};
  };
  const auto admitted = [&](std::int64_t pool, TimeUs at, bool woke) {
    return admitted_of([&](std::uint64_t node) {
      return turn(node, pool, at, woke, 1).first > 0 ? FairShare::Answer::kCredit
                                                     : FairShare::Answer::kRefused;
    });
  };
  const TimeUs turn_at = kStart + 10 * kHorizonUs;
  // 1000 x 10 / 200 x 10 = 500; 3 standard deviations are 47.
  EXPECT_NEAR(admitted(10, turn_at, false), 500, 50);
  EXPECT_TRUE(turn(1, 10, turn_at, false, 1).second.sparse_raised);
  EXPECT_FALSE(turn(1, 10, turn_at, false, 1).second.sparse_raise_capped);
  // Within a horizon of its last epoch's end: 1/20 (3 standard deviations: 21).
  EXPECT_NEAR(admitted(10, kStart + kHorizonUs + kHorizonUs / 2, false), 50, 22);
  EXPECT_FALSE(turn(1, 10, kStart + kHorizonUs + kHorizonUs / 2, false, 1).second.sparse_raised);
  // The key woke since: 1/20.
  EXPECT_NEAR(admitted(10, turn_at, true), 50, 22);
  // Half a request raised tenfold is one request, no more.
  for (std::uint64_t node = 1; node <= 20; ++node) {
    EXPECT_EQ(turn(node, 100, turn_at, false, 10).first, 1);
  }
  // A share of two requests stands (two, or three with its dither's fraction).
  for (std::uint64_t node = 1; node <= 20; ++node) {
    const int spent = turn(node, 400, turn_at, false, 30).first;
    EXPECT_GE(spent, 2);
    EXPECT_LE(spent, 3);
  }
  // The raise is held at kMaxSparseRaise: a turn 100 horizons long is raised
  // 16-fold (1000 x 1/20 x 16 = 800), counted.
  const TimeUs long_turn_at = kStart + 100 * kHorizonUs;
  EXPECT_NEAR(admitted(10, long_turn_at, false), 800, 40);
  EXPECT_TRUE(turn(1, 10, long_turn_at, false, 1).second.sparse_raise_capped);
}

// Admitted of 1000 nodes' sparse turns on a busy key (200 origins, a pool
// of 10): each node asking `asked_at_start` requests at kStart, its demand
// dense (no sparse pass) by its own (kDenseRequests) or by the crowd of
// origins (in.recent_others), then a turn 10 horizons on, after `between`
// (a wake, say, which may also set the turn's inputs), with this node's
// entries at `own_at_turn` of the key's 400.
int admitted_at_turns(ShareInputs in, std::uint64_t own_at_turn,
                      const std::function<void(FairShare&, ShareInputs&, TimeUs)>& between = {},
                      std::uint32_t asked_at_start = FairShare::kDenseRequests) {
  in.headroom = 10;
  in.refill = 0;
  in.others = 199;
  in.has_own = true;
  const TimeUs turn_at = kStart + 10 * kHorizonUs;
  return admitted_of([&](std::uint64_t node) {
    FairShare share;
    ShareInputs at = in;
    at.key_seed = node * 0x9e3779b97f4a7c15ULL;
    at.own_consumed = 1;
    at.all_consumed = 200;
    share.start_epoch(view_of(200), at, kStart);
    for (std::uint32_t i = 0; i < asked_at_start; ++i) share.count(kStart);
    EXPECT_TRUE(share.dense(kStart));
    at.own_consumed = own_at_turn;
    at.all_consumed = 400;
    if (between) between(share, at, turn_at);
    const bool raised = share.start_epoch(view_of(200), at, turn_at).sparse_raised;
    if (!between) {
      EXPECT_TRUE(raised);
    }
    return spend_epoch(share, 1, turn_at) > 0 ? FairShare::Answer::kCredit
                                              : FairShare::Answer::kRefused;
  });
}

// A sparse asker's turn goes on through a pause in the key's demand (a
// wake after a horizon or two without consumption: an overshoot the
// algorithm then refused whole), whatever the algorithm: the turn of
// ASparseAskersTurnCoversItsInterval, 500 of 1000 admitted. Not after an
// idle spell (kIdleSpellHorizons: a burst's end): 1/20 there, 50.
// admitted_at_turns' turn on a bucket (`repays`), a fixed window (`repays`
// and `steps`) or a log (neither), after a wake `wake_before_turn_us`
// before it that ended a quiet spell of `quiet_us`.
int admitted_after_wake(bool repays, bool steps, TimeUs wake_before_turn_us, TimeUs quiet_us) {
  return admitted_at_turns(ShareInputs{.repays_overshoot = repays,
                                       .rate_limit = 100,
                                       .rate_period_us = kUsPerSecond,
                                       .refill_step_us = steps ? kUsPerSecond : 0},
                           2, [&](FairShare& share, ShareInputs&, TimeUs turn_at) {
                             const TimeUs wake_at = turn_at - wake_before_turn_us;
                             share.note_wake(200, 1, wake_at, kHorizonUs, wake_at - quiet_us);
                           });
}

TEST(FairShareTest, ASparseTurnGoesOnThroughAPause) {
  // The key quiet for `quiet_horizons` before a wake half a horizon before
  // the turn.
  const auto admitted = [](bool repays, bool steps, std::int64_t quiet_horizons) {
    return admitted_after_wake(repays, steps, kHorizonUs / 2, quiet_horizons * kHorizonUs);
  };
  // 3 standard deviations: 47 and 21.
  EXPECT_NEAR(admitted(false, false, 1), 500, 50);
  EXPECT_NEAR(admitted(true, true, 2), 500, 50);
  EXPECT_NEAR(admitted(true, false, 1), 500, 50);
  EXPECT_NEAR(admitted(false, false, FairShare::kIdleSpellHorizons), 50, 22);
  EXPECT_NEAR(admitted(true, false, FairShare::kIdleSpellHorizons), 50, 22);
}

// A wake's epoch is a sparse turn too where no overshoot is repaid (a
// sliding log's from the wake at a node whose demand is dense, two
// horizons long) and this node's last epoch asked one request (a turn's):
// the turn of ASparseTurnGoesOnThroughAPause, raised by the time the key
// was busy since the last epoch began (10 horizons, less the quiet spell
// the wake ended) over the epoch's length. After a quiet horizon, 9 / 2: a
// chance of 1/200 x 10 x 4.5 = 0.225 (225 of 1000); after 2.5 horizons,
// 7.5 / 2: 0.1875 (187). The node's demand is dense by the crowd of
// origins (200 spending within a second against a pool of 10), as at 200
// nodes asking a request a second each. Not where its last epoch asked a
// burst's requests (dense by its own demand), nor where an overshoot is
// repaid (a bucket's wake), nor after an idle spell: 1/20, 50.
TEST(FairShareTest, ALogsWakeIsASparseTurnToo) {
  const auto admitted = [](bool repays, TimeUs quiet_us, std::uint32_t asked_last) {
    return admitted_at_turns(
        ShareInputs{.recent_others = 199,
                    .repays_overshoot = repays,
                    .rate_limit = 100,
                    .rate_period_us = kUsPerSecond},
        2,
        [&](FairShare& share, ShareInputs& at, TimeUs turn_at) {
          // Nothing consumed since the wake: its pool is the balance now.
          const TimeUs wake_at = turn_at - kHorizonUs / 2;
          share.note_wake(at.all_consumed, at.own_consumed, wake_at, kHorizonUs,
                          wake_at - quiet_us);
          at.from_wake = true;
          at.epoch_end_us = turn_at + 2 * kHorizonUs;
        },
        asked_last);
  };
  // 3 standard deviations: 40, 37 and 21.
  EXPECT_NEAR(admitted(false, kHorizonUs, 1), 225, 40);
  EXPECT_NEAR(admitted(false, 5 * kHorizonUs / 2, 1), 187, 37);
  EXPECT_NEAR(admitted(false, kHorizonUs, FairShare::kDenseRequests), 50, 22);
  EXPECT_NEAR(admitted(true, kHorizonUs, 1), 50, 22);
  EXPECT_NEAR(admitted(false, FairShare::kIdleSpellHorizons * kHorizonUs, 1), 50, 22);
}

// A log's wake turn under horizons of 30 s (gossip intervals of seconds):
// this node's last epoch began at kStart, and ended 30 s on (its length
// held at kMaxEpochUs, 16.8 s: the turn takes it to have begun at 13.2 s);
// the turn comes at 150 s, half a horizon after a wake that ended a quiet
// spell of 80 s (below an idle spell's 90 s). Busy 136.8 - 80 = 56.8 s
// against the turn's epoch of two horizons (60 s): no turn. The spell is
// beyond quiet_us_'s bound (kMaxQuietUs, 67.1 s); held there, it counted
// 69.7 s busy and raised the turn (18 / 16). Taken for the whole time
// since that epoch began: no turn. A spell of 20 s still raises it (116.8
// s busy: 31 / 16).
TEST(FairShareTest, ALogsWakeTurnTakesAQuietSpellBeyondItsBoundForTheWholeTime) {
  constexpr TimeUs kLongHorizonUs = 30 * kUsPerSecond;
  const ShareView view{.live_nodes = 200, .horizon_us = kLongHorizonUs};
  const auto raised = [&](TimeUs quiet_spell_us) {
    FairShare share;
    ShareInputs in{.headroom = 10,
                   .others = 199,
                   .recent_others = 199,
                   .has_own = true,
                   .repays_overshoot = false,
                   .own_consumed = 1,
                   .all_consumed = 200};
    share.start_epoch(view, in, kStart);
    share.count(kStart);
    const TimeUs turn_at = kStart + 150 * kUsPerSecond;
    const TimeUs wake_at = turn_at - kLongHorizonUs / 2;
    share.note_wake(200, 1, wake_at, kLongHorizonUs, wake_at - quiet_spell_us);
    in.from_wake = true;
    in.epoch_end_us = turn_at + 2 * kLongHorizonUs;
    return share.start_epoch(view, in, turn_at).sparse_raised;
  };
  EXPECT_FALSE(raised(80 * kUsPerSecond));
  EXPECT_TRUE(raised(20 * kUsPerSecond));
}

// On a fixed window, a node's first epoch after a wake that ended an idle
// spell, past the wake's own epochs (not from the wake), is a sparse turn
// covering the time since the wake: the turn of
// ASparseTurnGoesOnThroughAPause, the key idle for kIdleSpellHorizons
// before a wake 4 horizons before the turn, is raised 4-fold: 1/20 x 4,
// 200 of 1000. A wake within a horizon of the turn raises nothing (1/20,
// 50), nor does a wake on a bucket or a log (their first epochs after an
// idle spell: 50).
TEST(FairShareTest, AFixedWindowsTurnAfterAWakeCoversTheTimeSinceIt) {
  const auto admitted = [](bool repays, bool steps, TimeUs wake_before_turn_us) {
    return admitted_after_wake(repays, steps, wake_before_turn_us,
                               FairShare::kIdleSpellHorizons * kHorizonUs);
  };
  // 3 standard deviations: 38 and 21.
  EXPECT_NEAR(admitted(true, true, 4 * kHorizonUs), 200, 38);
  EXPECT_NEAR(admitted(true, true, kHorizonUs / 2), 50, 22);
  EXPECT_NEAR(admitted(true, false, 4 * kHorizonUs), 50, 22);
  EXPECT_NEAR(admitted(false, false, 4 * kHorizonUs), 50, 22);
}

// A sparse turn's weight where the refill accrues and no overshoot is
// repaid (a sliding window): at least an equal part of the origins seen. A
// node that spent none of the key's last 200 requests weighs an eighth of
// an equal part, 1/1600; its turn 10 horizons long on a pool of 10 is
// raised to a chance of 1/16 (1000 x 10 / 1600 x 10 = 62), and on a window
// to half (1/200: 500). Not on a log (its refill spendable at once) nor on
// a bucket (an overshoot repaid).
TEST(FairShareTest, ASparseTurnOnAWindowWeighsAnEqualPartAtLeast) {
  const auto admitted = [](bool accrues, bool repays, std::uint64_t own_at_turn) {
    return admitted_at_turns(ShareInputs{.refill_accrues = accrues, .repays_overshoot = repays},
                             own_at_turn);
  };
  // 3 standard deviations: 47 and 23.
  EXPECT_NEAR(admitted(true, false, 1), 500, 50);
  EXPECT_NEAR(admitted(false, false, 1), 62, 23);
  EXPECT_NEAR(admitted(true, true, 1), 62, 23);
  // A weight above an equal part stands: 8 of the last 200 requests, 7/8 x
  // 8/200 + 1/1600 = 1/28.1, raised tenfold: a request each.
  EXPECT_EQ(admitted(true, false, 9), 1000);
}

// A contended balance: where the algorithm's room frees as it is admitted
// (a sliding log or window: it repays no overshoot) and this node's demand
// is dense, a balance below the epoch's refill is shared kContendedBalanceX
// times over, once the burst has gone on here for a period. 5 nodes with
// equal parts of the key's consumption (weights of 1/5), epochs of 100 ms
// against a period of 1 s: at the 12th epoch, a balance of 4 and a refill of
// 10 give (4 x 4 + 10) / 5 = 5.2, not 14 / 5 = 2.8. Not at the 10th (a
// burst's later epochs: their overshoot its end would leave unrepaid), not
// where the algorithm repays an overshoot (a bucket's balance is no rate
// lost), nor where the balance is the refill or more (a burst's first
// epoch), nor where demand here is sparse. In a crowd too: 100 nodes, each
// in one burst with the others (a crowd's first requests thinned), with a
// balance and a refill 20 times as large, share it alike. Where the refill
// accrues over the epoch (a sliding window), kContendedAccruingBalanceX
// times: 4 x 8 / 5 = 6.4 at the epoch's start, not 3.2; there where demand
// here is sparse too, and where the balance is below two refills (a
// refill's share left unspent at the last epoch's end is in it).
TEST(FairShareTest, AContendedBalanceIsSharedOverWhereRoomFreesAsAdmitted) {
  // Requests admitted within the share of 30 asked at the `epochs`-th epoch
  // (a horizon each) against a period of `period_us`, and what its start
  // found, among `live` nodes spending alike (at 5, a balance and a refill
  // of 10 as given; at more, as large a part of them a node), the refill
  // accruing over the epoch if `accrues` (spent at its start: none of it).
  const auto epoch = [](std::int64_t balance, bool repays, bool dense, std::uint32_t epochs,
                        TimeUs period_us = kUsPerSecond, std::uint32_t live = 5,
                        bool accrues = false) {
    FairShare share;
    ShareInputs in{.headroom = balance * live / 5,
                   .refill = 10 * std::int64_t{live} / 5,
                   .refill_accrues = accrues,
                   .others = live - 1,
                   .recent_others = live - 1,
                   .burst_others = live - 1,
                   .has_own = true,
                   .repays_overshoot = repays,
                   .own_consumed = 10,
                   .all_consumed = 10 * std::uint64_t{live},
                   .key_seed = 5,
                   .rate_limit = 100,
                   .rate_period_us = period_us};
    TimeUs at = kStart;
    for (std::uint32_t i = 1; i < epochs; ++i, at += kHorizonUs) {
      share.start_epoch(view_of(live), in, at);
      for (std::uint32_t n = 0; dense && n < FairShare::kDenseRequests; ++n) share.count(at);
      in.own_consumed += 10;
      in.all_consumed += 10 * std::uint64_t{live};
    }
    const FairShare::EpochStart found = share.start_epoch(view_of(live), in, at);
    return std::pair{spend_epoch(share, 30, at), found};
  };
  const auto [contended, found] = epoch(4, false, true, 12);
  EXPECT_TRUE(found.contended_balance);
  EXPECT_GE(contended, 5);  // 5.2 and the dither's fraction
  EXPECT_LE(contended, 6);
  for (const auto& [admitted, start] :
       {epoch(4, false, true, 10), epoch(4, true, true, 12), epoch(4, false, false, 12)}) {
    EXPECT_FALSE(start.contended_balance);
    EXPECT_GE(admitted, 2);  // 2.8
    EXPECT_LE(admitted, 3);
  }
  // A period of a minute (600 horizons): from the kMaxBurstEpochs-th epoch.
  constexpr TimeUs kMinuteUs = 60 * kUsPerSecond;
  EXPECT_FALSE(
      epoch(4, false, true, FairShare::kMaxBurstEpochs - 1, kMinuteUs).second.contended_balance);
  EXPECT_TRUE(epoch(4, false, true, FairShare::kMaxBurstEpochs, kMinuteUs).second.contended_balance);
  // A balance of the refill: (10 + 10) / 5 = 4, as it stands.
  const auto [full, full_found] = epoch(10, false, true, 12);
  EXPECT_FALSE(full_found.contended_balance);
  EXPECT_GE(full, 4);
  EXPECT_LE(full, 5);
  // A crowd of 100: (80 x 4 + 200) / 100 = 5.2, not 280 / 100 = 2.8.
  const auto [crowd, crowd_found] = epoch(4, false, true, 12, kUsPerSecond, 100);
  EXPECT_TRUE(crowd_found.pass_thinned);  // the crowd's chance: its first request's
  EXPECT_TRUE(crowd_found.contended_balance);
  EXPECT_GE(crowd, 5);
  EXPECT_LE(crowd, 6);
  // The refill accruing: 6.4 at the start (3.2 at kContendedBalanceX).
  for (const bool dense : {true, false}) {
    const auto [window, window_found] = epoch(4, false, dense, 12, kUsPerSecond, 5, true);
    EXPECT_TRUE(window_found.contended_balance) << dense;
    EXPECT_GE(window, 6) << dense;
    EXPECT_LE(window, 7) << dense;
  }
  // There a balance below kContendedAccruingRefills refills is contended:
  // 15 x 8 / 5 = 24 at the start, not 3; at two refills, 4 as it stands.
  const auto [between, between_found] = epoch(15, false, true, 12, kUsPerSecond, 5, true);
  EXPECT_TRUE(between_found.contended_balance);
  EXPECT_GE(between, 24);
  EXPECT_LE(between, 25);
  const auto [two_refills, two_found] = epoch(20, false, true, 12, kUsPerSecond, 5, true);
  EXPECT_FALSE(two_found.contended_balance);
  EXPECT_GE(two_refills, 4);
  EXPECT_LE(two_refills, 5);
}

// One of a crowd of single requests: a crowd's first requests thinned here
// (kCrowdedNodes live nodes, kDenseRequests origins in one burst), and at
// most kSingleInCrowdMostAsked requests asked in the last burst this node
// asked in. Not a node asking two (it spends a share of its own), nor one
// among too few nodes for a crowd.
TEST(FairShareTest, ACrowdOfSingleRequestsIsTold) {
  const auto single = [](std::uint32_t live, int asked_last_burst) {
    FairShare share;
    ShareInputs in = crowd_inputs(1, 10, 20, 20, 20);
    in.has_own = true;
    share.start_epoch(view_of(live), in, kStart);
    // A burst this node asked in, ended by a wake after an idle spell.
    for (int i = 0; i < asked_last_burst; ++i) share.count(kStart + 1);
    const TimeUs at = kStart + 100 * kHorizonUs;
    share.note_wake(0, 0, at, kHorizonUs, at - (FairShare::kIdleSpellHorizons + 1) * kHorizonUs);
    return share.single_in_crowd();
  };
  EXPECT_TRUE(single(200, 1));
  EXPECT_TRUE(single(200, 0));  // asked in no burst yet
  EXPECT_FALSE(single(200, static_cast<int>(FairShare::kSingleInCrowdMostAsked) + 1));
  EXPECT_FALSE(single(FairShare::kCrowdedNodes - 1, 1));
}

// A request beyond the share and the crowd's chance is refused, and counted
// as a thinned pass; where the algorithm repays an overshoot, a kept pass
// holds though this node's demand on the key is dense (its share alone is
// then the weights', which lag behind who asks: `coldkeys` at 200 nodes),
// at the node's first request of a burst, where it asked at most one in the
// last burst it asked in. A node asking several a burst spends its share
// (`periodic` at 200 nodes, about 5 a job: passed at each epoch's first
// request, the token bucket +2.00 / +0.98% over 123 s, seeds 1 / 2).
TEST(FairShareTest, ACrowdsPassHoldsAtADenseNodeWhereTheAlgorithmRepays) {
  const auto kept = [](bool repays, int asked_last_burst, int asked_this_burst) {
    int thinned = 0;
    const int kept = admitted_of([&](std::uint64_t node) {
      FairShare share;
      ShareInputs in = crowd_inputs(node, 10, 12, 20, 20);
      in.has_own = true;
      in.repays_overshoot = repays;
      const TimeUs at = kStart + 100 * kHorizonUs;
      share.start_epoch(view_of(200), in, kStart);
      // A burst this node asked in, ended by the first of the wakes below.
      for (int i = 0; i < asked_last_burst; ++i) share.count(kStart + 1);
      asked_in_no_wake(share, at);
      for (int i = 0; i < asked_this_burst; ++i) share.count(at - 1);
      share.make_crowded_for(kStart, FairShare::kDenseMemoryUs);  // dense from here on
      in.all_consumed = 100;  // by others: a share of 1/96 of the pool
      thinned += share.start_epoch(view_of(200), in, at).pass_thinned ? 1 : 0;
      // Beyond any share below one request: kept only as a first request.
      return share.ask(11, at);
    });
    // Every pass a draw did not keep is counted; elsewhere a kept one
    // admits nothing at a dense node, as before.
    if (repays && asked_last_burst <= 1 && asked_this_burst == 0) {
      EXPECT_EQ(thinned, 1000 - kept);
    }
    return kept;
  };
  // The crowd's chance, half (10 over 20 recent origins), over the share's
  // 10/96: (1/2 - 10/96) / (86/96) = 38/86, 442 of 1000.
  EXPECT_NEAR(kept(true, 0, 0), 442, 50);
  EXPECT_NEAR(kept(true, 1, 0), 442, 50);
  EXPECT_EQ(kept(true, 2, 0), 0);  // several in its last burst
  EXPECT_EQ(kept(true, 0, 1), 0);  // not its first of this burst
  EXPECT_EQ(kept(false, 0, 0), 0);
}

// At a new burst (the key's entries quiet for a horizon) the crowd is larger
// than the origins show: a node meeting the key there (young here) counts
// every live node in it; and a key thinned here before is thinned at a new
// burst, or in an epoch from its wake, while kDenseRequests origins have an
// entry, however few of them spent in one burst (a burst spent in debt has
// few spenders; the next, its debt repaid, met no gate and passed: `coldkeys`
// at 200 nodes, bursts of 40-55 of a pool of 10). Neither elsewhere.
TEST(FairShareTest, AtANewBurstTheCrowdCountsEveryNodeAndAKeyThinnedBefore) {
  constexpr std::int64_t kPool = 10;
  constexpr std::uint32_t kLive = 200;
  const auto inputs = [](std::uint64_t node, std::uint32_t origins, std::uint32_t in_burst,
                         bool quiet) {
    ShareInputs in = crowd_inputs(node, kPool, origins, in_burst, in_burst);
    in.new_burst = quiet;
    return in;
  };
  constexpr std::uint32_t kFew = FairShare::kDenseRequests - 1;
  const auto meets = [&](std::uint32_t in_burst, bool quiet) {
    return admitted_of([&](std::uint64_t node) {
      FairShare share;
      share.start_epoch(view_of(kLive), inputs(node, 20, in_burst, quiet), kStart);
      return share.ask(1, kStart);
    });
  };
  // Young, the share is a pool of 10 over every live node: 1 in 20 (50 of
  // 1000; 3 standard deviations are 21), whatever the crowd.
  EXPECT_NEAR(meets(20, true), 50, 22);
  EXPECT_NEAR(meets(20, false), 50, 22);
  EXPECT_EQ(meets(1, true), 1000);  // no crowd in one burst: kept

  // Known for a while (not young) and asking rarely, its last burst's
  // spenders few: thinned at a new burst only where an earlier epoch was,
  // with the pool over the 20 origins as the crowd's chance (half), where
  // its share is the pool over them too (plus the rest of a first
  // request kept: every one).
  const TimeUs later = kStart + 100 * kHorizonUs;
  const auto after = [&](std::uint32_t first_in_burst, std::uint32_t between_origins, bool quiet,
                         bool from_wake = false) {
    return admitted_of([&](std::uint64_t node) {
      FairShare share;
      share.start_epoch(view_of(kLive), inputs(node, 20, first_in_burst, false), kStart);
      share.start_epoch(view_of(kLive), inputs(node, between_origins, 1, false), later);
      const TimeUs next = later + 100 * kHorizonUs;
      asked_in_no_wake(share, next);
      ShareInputs in = inputs(node, 20, 1, quiet);
      in.all_consumed = 100;  // by others since the marks: a share of the eighth alone
      in.from_wake = from_wake;
      in.epoch_end_us = next + kHorizonUs;
      share.start_epoch(view_of(kLive), in, next);
      return share.ask(kPool + 1, next);
    });
  };
  // Beyond the share (a request of 11): only a kept pass admits it. The
  // share is the eighth's part, 1/160 of the pool (1/16 of a request); the
  // crowd's chance, half, tops it up: (1/2 - 1/16) / (15/16) = 7/15, 467
  // of 1000.
  EXPECT_NEAR(after(20, 20, true), 467, 50);
  // In the wake's epoch too, where the share is of the pool at the wake
  // (what the others spent since counts back: 110 / 160 of a request, above
  // the crowd's half): thinned, nothing to top up, none kept.
  EXPECT_EQ(after(20, 20, false, /*from_wake=*/true), 0);
  EXPECT_EQ(after(20, 20, false), 1000);   // neither: not thinned, kept
  EXPECT_EQ(after(kFew, 20, true), 1000);  // never thinned
  EXPECT_EQ(after(20, kFew, true), 1000);  // too few origins in between: forgotten
}

// Where the algorithm repays no overshoot (a sliding log), every node counts
// every live node in the crowd at a new burst, known here for a while or
// not; elsewhere only a node meeting the key there does. Not outside a new
// burst, and the gate is the same.
TEST(FairShareTest, WithoutADebtEveryNodeCountsEveryLiveNodeAtANewBurst) {
  constexpr std::int64_t kPool = 10;
  constexpr std::uint32_t kLive = 200;
  const TimeUs later = kStart + 100 * kHorizonUs;
  const auto known_then_asked = [&](bool repays, bool new_burst, std::uint32_t in_burst) {
    return admitted_of([&](std::uint64_t node) {
      FairShare share;
      ShareInputs first = crowd_inputs(node, kPool, 20, 1, 1);
      first.has_own = true;
      share.start_epoch(view_of(kLive), first, kStart);
      asked_in_no_wake(share, later);
      ShareInputs in = crowd_inputs(node, kPool, 20, in_burst, in_burst);
      in.has_own = true;
      in.all_consumed = 100;  // by others since the mark: a share of the eighth alone
      in.new_burst = new_burst;
      in.repays_overshoot = repays;
      share.start_epoch(view_of(kLive), in, later);
      return share.ask(kPool + 1, later);
    });
  };
  // Beyond the share (a request of 11): only a kept pass admits it. The
  // share is the eighth's part, 1/160 of the pool (1/16 of a request). A
  // pool of 10 over every live node, 1 in 20, is below it: none kept; over
  // the 20 origins, half, tops it up: (1/2 - 1/16) / (15/16) = 7/15, 467
  // of 1000. Without a crowd in one burst: kept.
  EXPECT_EQ(known_then_asked(false, true, 20), 0);
  EXPECT_NEAR(known_then_asked(true, true, 20), 467, 50);
  EXPECT_NEAR(known_then_asked(false, false, 20), 467, 50);
  EXPECT_EQ(known_then_asked(false, true, 1), 1000);  // no crowd in one burst: kept
}

// A crowd counts the nodes that ask, a sliding log's single askers: a node
// that asked one request in one of every `every` bursts counts the live nodes
// times the part of the bursts it asked in (a running average) in the crowd
// at a new burst, not every live node; one that asked two in its last burst,
// or whose algorithm is not told to (ShareInputs::crowd_of_askers), still
// counts every live node; where every asker is told (a sliding window), the
// one that asked two counts the askers too.
TEST(FairShareTest, ACrowdOnALogOrAWindowCountsTheNodesThatAsk) {
  constexpr std::int64_t kPool = 10;
  constexpr std::uint32_t kLive = 200;
  constexpr TimeUs kApartUs = (FairShare::kIdleSpellHorizons + 1) * kHorizonUs;
  const TimeUs later = kStart + 100 * kApartUs;
  using Askers = ShareInputs::CrowdOfAskers;
  const auto kept = [&](Askers of_askers, int every, int asked_last_burst) {
    return admitted_of([&](std::uint64_t node) {
      FairShare share;
      ShareInputs first = crowd_inputs(node, kPool, 20, 1, 1);
      first.has_own = true;
      share.start_epoch(view_of(kLive), first, kStart);
      // 20 bursts, each ended by a wake after an idle spell; this node asked
      // in one of every `every` (an epoch, then its requests), the last of
      // them included.
      for (int i = 20; i >= 1; --i) {
        const TimeUs at = later - i * kApartUs;
        if (i % every == 1 % every) {
          share.start_epoch(view_of(kLive), first, at - kApartUs / 2);
          for (int k = 0; k < (i == 1 ? asked_last_burst : 1); ++k) share.count(at - kApartUs / 2);
        }
        share.note_wake(0, 0, at, kHorizonUs, at - kApartUs);
      }
      ShareInputs in = crowd_inputs(node, kPool, 20, 6, 6);
      in.has_own = true;
      in.all_consumed = 100;  // by others since the mark: a share of the eighth alone
      in.new_burst = true;
      in.repays_overshoot = false;
      in.crowd_of_askers = of_askers;
      share.start_epoch(view_of(kLive), in, later);
      return share.ask(kPool + 1, later);
    });
  };
  // Beyond the share (1/160 of the pool, 1/16 of a request): only a kept
  // pass admits it. Over every live node, 1 in 20, none is kept; over the
  // nodes that ask, where it asked in one burst of four (its part of the
  // bursts, a running average over about 8, stands at 23/63 right after a
  // burst it asked in): 10 over 73 nodes, a chance of
  // 0.137, topped up from the share's 1/16, (0.137 - 1/16) / (15/16): about
  // 79 of 1000.
  EXPECT_EQ(kept(Askers::kNone, 4, 1), 0);
  EXPECT_NEAR(kept(Askers::kSingleAskers, 4, 1), 79, 30);
  EXPECT_EQ(kept(Askers::kSingleAskers, 1, 1), 0);  // asked in every burst: every live node asks
  EXPECT_EQ(kept(Askers::kSingleAskers, 4, 2), 0);  // asked two in its last burst: every live node
  // A window's every asker (kEveryAsker): two in its last burst too.
  EXPECT_NEAR(kept(Askers::kEveryAsker, 4, 2), 79, 30);
}

// A fixed window's burst in one epoch (wake_end_in_step_us): the wake's
// horizons while `now` is in the window the wake lies in (the Limiter ends
// the epoch with that window: LimiterShareFixedWindowTest); none once that
// window is over, even within the wake's horizon: the next window's pool
// is its own (docs/cluster.md, "A fixed window's epoch ends with its
// window").
TEST(FairShareTest, AWakesEpochSpansItsHorizonsOnlyWithinTheWakesStep) {
  constexpr TimeUs kStepUs = 1'000'000;
  const auto end_after_wake_at = [&](TimeUs wake, TimeUs now, int horizons = 3) {
    FairShare share;
    share.note_wake(0, 0, wake, kHorizonUs, wake - 10 * kHorizonUs);
    return share.wake_end_in_step_us(view_of(20), now, horizons, kStepUs);
  };
  const TimeUs step_start = 10 * kStepUs;
  const TimeUs step_end = step_start + kStepUs;
  EXPECT_EQ(FairShare::step_end_us(step_start, kStepUs), step_end);
  EXPECT_EQ(FairShare::step_end_us(step_end - 1, kStepUs), step_end);
  EXPECT_EQ(end_after_wake_at(step_start, step_start + 1), step_start + 3 * kHorizonUs);
  EXPECT_EQ(end_after_wake_at(step_start, step_start + 3 * kHorizonUs), 0);
  // Half a horizon before the step's end: its horizons while the step
  // lasts, and past its end the wake's pool is no longer shared.
  const TimeUs late = step_end - kHorizonUs / 2;
  EXPECT_EQ(end_after_wake_at(late, late + 1), late + 3 * kHorizonUs);
  EXPECT_EQ(end_after_wake_at(late, late + 1, 1), late + kHorizonUs);
  EXPECT_EQ(end_after_wake_at(late, step_end + 1, 1), 0);
  EXPECT_EQ(end_after_wake_at(late, step_end + 1), 0);
}

// A key whose `limit` a second comes back whole at each step of `step_us`
// (a fixed window; 0: a bucket's inputs), its room full, this node with
// `own` of the `all` consumed and `others` other origins.
ShareInputs stepwise_inputs(std::int64_t limit, std::uint32_t others, std::uint64_t own,
                            std::uint64_t all, std::uint64_t key_seed, TimeUs step_us) {
  return ShareInputs{.headroom = limit,
                     .others = others,
                     .has_own = true,
                     .own_consumed = own,
                     .all_consumed = all,
                     .key_seed = key_seed,
                     .carries_debt = true,
                     .rate_limit = limit,
                     .rate_period_us = kUsPerSecond,
                     .capacity = limit,
                     .refill_step_us = step_us};
}

// A fixed window's weights, from whole bursts: two nodes spend on a key a
// job every 5 s, B's first request of a job coming after news of A's 60.
// At the next job's wake B weighs its part of the whole last job, 40 of
// 100, not its 40 against the 40 of others' it had not heard of at its
// first epoch in that job (where its marks moved): (7 x 0.4 + 1/2) / 8 =
// 0.41 of the pool of 100, where before it took (7 x 1 + 1/2) / 8 = 0.94
// and the two nodes' weights summed to 1.5 (docs/cluster.md, "A fixed
// window's weights, from whole bursts"). A bucket's marks are as before.
TEST(FairShareTest, AFixedWindowsWeightsComeFromWholeBursts) {
  constexpr TimeUs kStepUs = kUsPerSecond;
  const TimeUs first_job = kStart + 5 * kStepUs;
  const TimeUs second_job = first_job + 5 * kStepUs;
  const auto spent_at_second_job = [&](TimeUs step_us) {
    FairShare b;
    ShareInputs in = stepwise_inputs(100, 1, 100, 1000, 11, step_us);
    b.start_epoch(view_of(2), in, kStart);
    // The first job: B's first request after news of A's 60.
    (void)b.note_wake(1000, 100, first_job, kHorizonUs, kStart);
    in.from_wake = true;
    in.epoch_end_us = first_job + 3 * kHorizonUs;
    in.headroom = 40;
    in.all_consumed = 1060;
    b.start_epoch(view_of(2), in, first_job + 50'000);
    // B spends 40 of the job's 100; the second job.
    (void)b.note_wake(1100, 140, second_job, kHorizonUs, first_job + 200'000);
    in.epoch_end_us = second_job + 3 * kHorizonUs;
    in.headroom = 100;
    in.own_consumed = 140;
    in.all_consumed = 1100;
    const TimeUs now = second_job + 10'000;
    b.start_epoch(view_of(2), in, now);
    return spend_epoch(b, 200, now);
  };
  const int whole_steps = spent_at_second_job(kStepUs);
  EXPECT_GE(whole_steps, 40);
  EXPECT_LE(whole_steps, 42);
  EXPECT_GE(spent_at_second_job(0), 90);  // a bucket's inputs: marks as before
}

// A fixed window's pool stands until its window ends, and news of what
// others spent in it comes a horizon late. Ten nodes: this one spent none
// of the 600 the key's last epochs here saw, so it weighs (0 + 1/10) / 8 =
// 1/80. Its first epoch in a new window comes 50 ms in, after the nine
// others spent 600 of the window's 1,000 (its headroom 400): sharing what
// is left it gets 400 / 80 = 5; sharing the window's pool as it stood at
// its start (from_step), 1,000 / 80 = 12.5, as the nine did. A first epoch
// in a window is one in a window later than this node's last epoch's start
// and the key's wake (first_in_new_step).
TEST(FairShareTest, AFixedWindowsFirstEpochInANewWindowSharesItAsItStoodAtItsStart) {
  constexpr TimeUs kStepUs = kUsPerSecond;
  const TimeUs window = kStart + 10 * kStepUs;  // a window's start
  const ShareInputs before = stepwise_inputs(1000, 9, 100, 1000, 3, kStepUs);
  const TimeUs now = window + kHorizonUs / 2;
  const auto spent = [&](bool from_step) {
    FairShare share;
    share.start_epoch(view_of(10), before, window - 5 * kHorizonUs);  // the window before
    EXPECT_FALSE(share.first_in_new_step(window - 1, kStepUs));
    EXPECT_TRUE(share.first_in_new_step(now, kStepUs));
    ShareInputs in = before;
    in.headroom = 400;
    in.all_consumed = 1600;
    in.from_step = from_step;
    share.start_epoch(view_of(10), in, now);
    EXPECT_FALSE(share.first_in_new_step(now + 1, kStepUs));  // its second
    return spend_epoch(share, 100, now);
  };
  const int left = spent(false);
  const int at_start = spent(true);
  EXPECT_GE(left, 5);
  EXPECT_LE(left, 6);
  EXPECT_GE(at_start, 12);
  EXPECT_LE(at_start, 13);
  // Not where the key woke in this window: the wake's epoch shares its pool.
  FairShare woke;
  woke.start_epoch(view_of(10), before, window - 5 * kHorizonUs);
  woke.note_wake(1000, 100, window + 1, kHorizonUs, window - 5 * kHorizonUs);
  EXPECT_FALSE(woke.first_in_new_step(now, kStepUs));
}

// The askers' floor, told (share_askers_floored): a node that asked in none
// of the key's last 24 bursts counts its crowd from the floor, 12 of 200 live
// nodes, above the 6 origins its view shows. Not one that asked in every
// burst (it counts every live node), nor one whose view shows more recent
// origins than the floor's count.
TEST(FairShareTest, ACrowdCountedFromTheAskersFloorIsTold) {
  const auto floored = [](bool asks_rarely, std::uint32_t recent) {
    FairShare share;
    ShareInputs in = crowd_inputs(1, 10, 6, recent, 6);
    in.has_own = true;
    const TimeUs at = kStart + 100 * kHorizonUs;
    share.start_epoch(view_of(200), in, kStart);
    if (asks_rarely) asked_in_no_wake(share, at);
    in.all_consumed = 100;
    in.crowd_of_askers = ShareInputs::CrowdOfAskers::kEveryAsker;
    return share.start_epoch(view_of(200), in, at).askers_floored;
  };
  EXPECT_TRUE(floored(true, 6));
  EXPECT_FALSE(floored(false, 6));
  EXPECT_FALSE(floored(true, 20));
}

// Requests after an epoch's end (the algorithm refused them, so no epoch
// started) count towards density per span of the epoch's length: as many in
// one such span make demand dense, one per span over a long refusal do not.
TEST(FairShareTest, RequestsAfterAnEpochsEndCountPerSpanOfItsLength) {
  const ShareInputs in{.headroom = 0,
                       .refill = 0,
                       .others = 4,
                       .has_own = true,
                       .own_consumed = 1,
                       .all_consumed = 5};
  FairShare sparse;
  sparse.start_epoch(view_of(5), in, kStart);
  for (std::uint32_t i = 0; i < 2 * FairShare::kDenseRequests; ++i) {
    // One request half an epoch into each span after the end.
    const TimeUs at = kStart + kHorizonUs + i * kHorizonUs + kHorizonUs / 2;
    sparse.enter_span(at);
    EXPECT_FALSE(sparse.count(at));
  }
  FairShare dense;
  dense.start_epoch(view_of(5), in, kStart);
  const TimeUs past = kStart + 3 * kHorizonUs;  // in the third span after the end
  for (std::uint32_t i = 1; i < FairShare::kDenseRequests; ++i) {
    dense.enter_span(past + i);
    EXPECT_FALSE(dense.count(past + i));
  }
  dense.enter_span(past + kHorizonUs - 1);
  EXPECT_TRUE(dense.count(past + kHorizonUs - 1));
  // A new epoch counts afresh, and so does a span after its end numbered
  // as the last one counted before it (the 12th): one request in the epoch
  // and five in that span are not six in one span.
  const TimeUs next = kStart + 20 * kHorizonUs;
  sparse.start_epoch(view_of(5), in, next);
  EXPECT_EQ(sparse.ask(1, next), FairShare::Answer::kSparse);
  EXPECT_FALSE(sparse.count(next));
  const TimeUs twelfth = next + kHorizonUs + 11 * kHorizonUs;
  for (std::uint32_t i = 1; i < FairShare::kDenseRequests; ++i) {
    sparse.enter_span(twelfth + i);
    EXPECT_FALSE(sparse.count(twelfth + i));
  }
}

// The soak's cold keys (docs/reliability.md, "Soak"): a per-user key new at
// one of 3 nodes, burst 5, whose rule's keys are spread over all 3 (the hot
// users) is probed at 5/3 plus a dither in [0, 1). Its first request passes;
// a second one at the same node within the probe's epoch (80 ms there) is
// refused when the credit left, 2/3 + dither, is below one request: a third
// of the time. A third request is always refused.
TEST(FairShareTest, ASecondRequestInTheProbeOfABurstOfFiveSplitThreeWaysIsRefusedAThirdOfTheTime) {
  constexpr int kKeys = 3000;
  int second_refused = 0;
  int third_refused = 0;
  for (int k = 0; k < kKeys; ++k) {
    FairShare share;
    ShareInputs in{.headroom = 5,
                   .refill = 0,
                   .spenders = 3,
                   .sparse_rule = true,
                   .key_seed = static_cast<std::uint64_t>(k) * 7919};
    share.start_epoch(view_of(3), in, kStart);
    ASSERT_TRUE(share.probing());
    ASSERT_EQ(share.ask(1, kStart), FairShare::Answer::kCredit) << k;
    share.count(kStart);
    share.spend(1);
    const FairShare::Answer second = share.ask(1, kStart + 1000);
    share.count(kStart + 1000);
    if (second == FairShare::Answer::kRefused) {
      ++second_refused;
      continue;
    }
    ASSERT_EQ(second, FairShare::Answer::kCredit);
    share.spend(1);
    third_refused += share.ask(1, kStart + 2000) == FairShare::Answer::kRefused;
  }
  EXPECT_GT(second_refused, kKeys * 30 / 100);
  EXPECT_LT(second_refused, kKeys * 37 / 100);
  EXPECT_EQ(third_refused, kKeys - second_refused);
}

// Costs up to 2^50 against shares in 1/65536 units: no overflow, and a
// share never goes below zero.
TEST(FairShareTest, HugeCostsAreComparedWithoutOverflow) {
  FairShare share;
  ShareInputs in{.headroom = std::int64_t{1} << 50,
                 .refill = 0,
                 .others = 1,
                 .has_own = true,
                 .own_consumed = 5,
                 .all_consumed = 10};
  share.start_epoch(view_of(2), in, kStart);
  share.count(kStart);  // not the epoch's first request: no sparse pass
  // Half of 2^50 is the share.
  EXPECT_EQ(share.ask(std::int64_t{1} << 50, kStart), FairShare::Answer::kRefused);
  EXPECT_EQ(share.ask(std::int64_t{1} << 47, kStart), FairShare::Answer::kCredit);
  share.spend(std::int64_t{1} << 47);
  EXPECT_EQ(share.ask(1, kStart), FairShare::Answer::kCredit);
  share.spend(std::int64_t{1} << 50);  // more than is left: down to zero
  EXPECT_EQ(share.ask(1, kStart), FairShare::Answer::kRefused);
}

// One rule on the one shared key api=search.
Rule shared_rule(Algorithm algorithm, std::int64_t limit, AlgorithmOptions options = {}) {
  Rule rule;
  rule.name = "shared";
  ValueMatcher search;
  search.kind = ValueMatchKind::kExact;
  search.pattern = "search";
  rule.match.push_back({"api", search});
  rule.params = {limit, kUsPerSecond, limit};
  rule.algorithm = algorithm;
  rule.options = options;
  return rule;
}

// The Limiter's gate, on a replicated limiter whose cluster has 10 live
// nodes: a key nine other nodes spend on admits about a tenth of its balance
// per horizon, refuses the rest with retry_after the epoch's end and
// nothing remaining, for every replicated algorithm; a key only this node
// spends on is not gated; peeks and costs of 0 change nothing.
// A replicated limiter with `rule` among `live` nodes.
std::unique_ptr<Limiter> make_replicated_limiter(Rule rule, std::uint32_t live) {
  RuleSet rules;
  rules.rules.push_back(std::move(rule));
  auto limiter = std::make_unique<Limiter>(LimiterOptions{.replicated = true}, std::move(rules));
  limiter->enable_replication("self", 1, 0);
  limiter->set_share_view(view_of(live));
  return limiter;
}

// A replicated limiter with shared_rule(algorithm, 1000) among `live` nodes.
std::unique_ptr<Limiter> make_shared_limiter(Algorithm algorithm, std::uint32_t live = 10) {
  AlgorithmOptions options;
  if (algorithm == Algorithm::kSmoothBursty || algorithm == Algorithm::kSmoothWarmingUp) {
    options.max_delay_us = 0;  // a rate limit, not a scheduler
  }
  return make_replicated_limiter(shared_rule(algorithm, 1000, options), live);
}

// A check of api=search.
CheckOutput check_search(Limiter& limiter, TimeUs now, std::int64_t cost = 1,
                         CheckMode mode = CheckMode::kCheck) {
  const Descriptor d[] = {{"api", "search"}};
  CheckInput input{d, cost, nullptr};
  input.mode = mode;
  CheckOutput out;
  limiter.check(input, now, out);
  return out;
}

// The bytes of api=search's key (from a peek), after nine peers' news of a
// unit each at kStart: a key nine other nodes spend on.
std::string key_after_nine_peers(Limiter& limiter) {
  std::string key(check_search(limiter, kStart, 1, CheckMode::kPeek).rules.at(0).key);
  for (int i = 1; i <= 9; ++i) limiter.merge_remote(key, "peer" + std::to_string(i), 5, 1, kStart);
  return key;
}

class LimiterShareTest : public ::testing::TestWithParam<Algorithm> {
 protected:
  std::unique_ptr<Limiter> owned_;
  Limiter* make_owned(Algorithm algorithm) {
    owned_ = make_shared_limiter(algorithm);
    return owned_.get();
  }
};

TEST_P(LimiterShareTest, AKeyNineOthersSpendOnAdmitsAboutATenth) {
  Limiter& limiter = *make_owned(GetParam());
  const std::string key = key_after_nine_peers(limiter);
  int admitted = 0;
  CheckOutput refused;
  for (int i = 0; i < 500; ++i) {
    const CheckOutput out = check_search(limiter, kStart + 1);
    if (out.allowed) {
      ++admitted;
    } else if (refused.rules.empty()) {
      refused = out;
    }
  }
  // A young key (this node's first epoch): shared among the 10 live nodes.
  EXPECT_GE(admitted, 90);
  EXPECT_LE(admitted, 112);
  ASSERT_EQ(refused.rules.size(), 1u);
  EXPECT_EQ(refused.rules[0].retry_after_us, kHorizonUs);
  EXPECT_EQ(refused.rules[0].remaining, 0);
  EXPECT_GT(limiter.stats().share_refused, 0u);
  EXPECT_EQ(limiter.stats().share_epochs, 1u);
  // A reservation beyond the share is refused, not deferred: how soon the
  // share covers it depends on the others.
  const Descriptor d[] = {{"api", "search"}};
  CheckInput reserve{d, 1, nullptr};
  reserve.mode = CheckMode::kReserve;
  reserve.max_wait_us = 10 * kUsPerSecond;
  CheckOutput reserved;
  limiter.check(reserve, kStart + 1, reserved);
  EXPECT_FALSE(reserved.allowed);
  EXPECT_EQ(reserved.rules[0].retry_after_us, kHorizonUs);
  // The next epoch shares out again, by what each spent since: only this
  // node did, so most of it is this node's.
  int next = 0;
  for (int i = 0; i < 500; ++i) next += check_search(limiter, kStart + 1 + kHorizonUs).allowed ? 1 : 0;
  EXPECT_GT(next, 200);
  EXPECT_EQ(limiter.stats().share_epochs, 2u);
}

// A burst that starts here (this node's request is the key's first growth
// after a quiet spell) starts its epoch after the key's wake: where the
// algorithm repays an overspend, that epoch shares a burst's pool (counted),
// as the epochs of nodes whose burst starts with a peer's news do.
TEST_P(LimiterShareTest, ABurstThatStartsHereStartsAfterTheKeysWake) {
  Limiter& limiter = *make_owned(GetParam());
  const std::string key = key_after_nine_peers(limiter);
  check_search(limiter, kStart + 1);  // 1 us after the peers' news: no quiet spell, no wake
  EXPECT_EQ(limiter.stats().share_wake_epochs, 0u);
  const TimeUs burst = kStart + 1 + 10 * kHorizonUs;  // after a quiet second
  check_search(limiter, burst);
  check_search(limiter, burst + 1);  // the same epoch
  EXPECT_EQ(limiter.stats().share_epochs, 2u);
  const bool repays =
      GetParam() != Algorithm::kSlidingWindow && GetParam() != Algorithm::kSlidingLog;
  EXPECT_EQ(limiter.stats().share_wake_epochs, repays ? 1u : 0u);
}

// GCRA's and the leaky bucket's refill with its fraction, as a token
// bucket's: the part of the next unit's time already gone, from the wait
// for it (10 a second: a unit every 100 ms).
TEST(FreedFractionTest, IsThePartOfTheNextUnitsTimeAlreadyGone) {
  constexpr std::int64_t kSecondUs = 1'000'000;
  EXPECT_EQ(freed_fraction(25'000, 10, kSecondUs), 3u << (FairShare::kFractionBits - 2));
  EXPECT_EQ(freed_fraction(1, 10, kSecondUs),
            (std::uint64_t{99'999} << FairShare::kFractionBits) / 100'000);
  EXPECT_EQ(freed_fraction(99'999, 10, kSecondUs), 0u);  // 1/100,000 of a unit
  // A whole unit's wait or more, none, or no rate: nothing freed.
  EXPECT_EQ(freed_fraction(100'000, 10, kSecondUs), 0u);
  EXPECT_EQ(freed_fraction(kSecondUs, 10, kSecondUs), 0u);
  EXPECT_EQ(freed_fraction(0, 10, kSecondUs), 0u);
  EXPECT_EQ(freed_fraction(-1, 10, kSecondUs), 0u);
  EXPECT_EQ(freed_fraction(1, 0, kSecondUs), 0u);
  // At the largest limit, over a period near the largest (a unit every
  // 2 us), no overflow: half a unit's time gone.
  static_assert(2 * kMaxTokens <= kMaxPeriodUs);
  EXPECT_EQ(freed_fraction(1, kMaxTokens, 2 * kMaxTokens), 1u << (FairShare::kFractionBits - 1));
}

// A sliding log repays nothing, so the burst's pool is shared only where
// this node's demand on the key is dense, and over two horizons: the burst
// in one epoch, no second one to share again what the others spent unheard.
TEST(LimiterShareLogTest, ADenseBurstOnALogSharesTheWakesPoolOverTwoHorizons) {
  const std::unique_ptr<Limiter> limiter = make_shared_limiter(Algorithm::kSlidingLog);
  const std::string key = key_after_nine_peers(*limiter);
  // Dense demand here: kDenseRequests in one epoch.
  for (std::uint32_t i = 0; i < FairShare::kDenseRequests; ++i) check_search(*limiter, kStart + 1);
  EXPECT_EQ(limiter->stats().share_wake_epochs, 0u);  // no quiet spell before
  const TimeUs burst = kStart + 1 + 10 * kHorizonUs;  // after a quiet second
  const TimeUs wake_end = burst + FairShare::kLogWakeHorizons * kHorizonUs;
  const std::uint64_t epochs = limiter->stats().share_epochs;
  CheckOutput refused;
  for (int i = 0; i < 1000 && refused.rules.empty(); ++i) {
    const CheckOutput out = check_search(*limiter, burst);
    if (!out.allowed) refused = out;
  }
  ASSERT_FALSE(refused.rules.empty());
  EXPECT_EQ(refused.rules[0].retry_after_us, wake_end - burst);
  EXPECT_EQ(limiter->stats().share_wake_epochs, 1u);
  // A horizon later the same epoch goes on: nothing shared again.
  const CheckOutput later = check_search(*limiter, burst + kHorizonUs + 1);
  EXPECT_FALSE(later.allowed);
  EXPECT_EQ(later.rules[0].retry_after_us, wake_end - (burst + kHorizonUs + 1));
  EXPECT_EQ(limiter->stats().share_epochs, epochs + 1);
  // Once the two horizons are over, the next epoch: nothing was admitted
  // here since `burst`, a quiet spell, so it starts from a wake of its own.
  check_search(*limiter, wake_end);
  EXPECT_EQ(limiter->stats().share_epochs, epochs + 2);
  EXPECT_EQ(limiter->stats().share_wake_epochs, 2u);
}

// A log frees its room when its entries leave, which the algorithm times
// for this node alone: at a node whose view holds room now, a share of what
// frees later in the epoch was spendable at once, and 200 nodes, each
// within its view's room, spent it before it freed (bursts every 300 ms at
// 200 nodes: later windows 1.71 x the limit, then silence). Where demand
// is dense, an epoch ends where the log starts freeing, if that is a
// quarter of the way or more into it; the next shares what freed
// (docs/cluster.md, "A log's epoch ends where its room frees").
TEST(LimiterShareLogTest, ALogsEpochEndsWhereItsRoomStartsToFree) {
  const std::unique_ptr<Limiter> limiter = make_shared_limiter(Algorithm::kSlidingLog);
  const std::string key = key_after_nine_peers(*limiter);  // 9 units at kStart
  // Dense demand here (kDenseRequests in one epoch: a burst, not a user's
  // request now and then, whose epochs are not cut).
  for (std::uint32_t i = 0; i < FairShare::kDenseRequests; ++i) {
    ASSERT_TRUE(check_search(*limiter, kStart + 1).allowed);
  }
  limiter->merge_remote(key, "peer1", 5, 935, kStart);  // 934 more: 949 in all
  // 50 ms before they leave (half a horizon): room for 51 in this view.
  const TimeUs before = kStart + kUsPerSecond - kHorizonUs / 2;
  const std::uint64_t epochs = limiter->stats().share_epochs;
  int admitted_before = 0;
  for (int i = 0; i < 200; ++i) admitted_before += check_search(*limiter, before).allowed ? 1 : 0;
  // This node's weight is about 1/55 (its 6 of 940 spent since the first
  // epoch, an eighth shared among ten): of the 51 there are now, at most
  // one and the dither; of the 1,000 there will be, 18.
  EXPECT_LE(admitted_before, 2);
  EXPECT_EQ(limiter->stats().share_epochs, epochs + 1);
  EXPECT_EQ(limiter->stats().share_log_epochs_cut, 1u);
  // Once they have left, the next epoch shares them.
  int admitted_after = 0;
  for (int i = 0; i < 200; ++i) {
    admitted_after += check_search(*limiter, kStart + kUsPerSecond + 1).allowed ? 1 : 0;
  }
  EXPECT_GE(admitted_after, 10);
  EXPECT_EQ(limiter->stats().share_epochs, epochs + 2);
}

// A fixed window's room comes back whole at its window's end: an epoch
// that starts 30 ms before it (here the key's wake, a second after the
// nine peers' news) ends there, not a horizon on, and shares this window's
// room alone; the next window's first request starts the next epoch
// (docs/cluster.md, "A fixed window's epoch ends with its window").
TEST(LimiterShareFixedWindowTest, AnEpochEndsWithItsWindow) {
  const std::unique_ptr<Limiter> limiter = make_shared_limiter(Algorithm::kFixedWindow);
  key_after_nine_peers(*limiter);  // kStart is a window's start
  const TimeUs window_end = kStart + kUsPerSecond;
  const TimeUs before = window_end - 30'000;
  int admitted = 0;
  CheckOutput refused;
  for (int i = 0; i < 1000 && refused.rules.empty(); ++i) {
    const CheckOutput out = check_search(*limiter, before);
    if (out.allowed) ++admitted;
    if (!out.allowed) refused = out;
  }
  ASSERT_FALSE(refused.rules.empty());
  EXPECT_EQ(refused.rules[0].retry_after_us, window_end - before);
  // About a tenth of the window's 991 left: the share, not the window.
  EXPECT_GE(admitted, 50);
  EXPECT_LE(admitted, 150);
  const std::uint64_t epochs = limiter->stats().share_epochs;
  EXPECT_TRUE(check_search(*limiter, window_end).allowed);
  EXPECT_EQ(limiter->stats().share_epochs, epochs + 1);
}

// Sparse demand on a log (a request now and then) does not wait two
// horizons for a share: no wake's pool.
TEST(LimiterShareLogTest, SparseDemandOnALogSharesThePoolAsItStands) {
  const std::unique_ptr<Limiter> limiter = make_shared_limiter(Algorithm::kSlidingLog);
  const std::string key = key_after_nine_peers(*limiter);
  check_search(*limiter, kStart + 1);
  const TimeUs burst = kStart + 1 + 10 * kHorizonUs;
  CheckOutput refused;
  for (int i = 0; i < 1000 && refused.rules.empty(); ++i) {
    const CheckOutput out = check_search(*limiter, burst);
    if (!out.allowed) refused = out;
  }
  ASSERT_FALSE(refused.rules.empty());
  EXPECT_EQ(refused.rules[0].retry_after_us, kHorizonUs);
  EXPECT_EQ(limiter->stats().share_wake_epochs, 0u);
}

// Demand is what is asked: a request the log itself refuses (its view is
// full) counts towards this node's density as one its share saw would. A
// node that counted only what reached its share looked sparse through a
// long burst and kept a first request beyond its share in every epoch.
TEST(LimiterShareLogTest, RequestsTheLogRefusesCountAsDemand) {
  const std::unique_ptr<Limiter> limiter = make_shared_limiter(Algorithm::kSlidingLog);
  const std::string key = key_after_nine_peers(*limiter);
  // The share's first epoch sees one request; then the log is full.
  check_search(*limiter, kStart + 1);
  limiter->merge_remote(key, "peer1", 5, 2000, kStart + 1);
  for (std::uint32_t i = 1; i < FairShare::kDenseRequests; ++i) {
    EXPECT_FALSE(check_search(*limiter, kStart + 1).allowed);
  }
  EXPECT_EQ(limiter->stats().share_refused, 0u);  // the log refused them, not the share
  // After the log emptied and a quiet spell: dense, so the wake's pool over
  // two horizons (sparse: one horizon of the pool as it stands).
  const TimeUs burst = kStart + 1 + kUsPerSecond + 10 * kHorizonUs;
  CheckOutput refused;
  for (int i = 0; i < 1000 && refused.rules.empty(); ++i) {
    const CheckOutput out = check_search(*limiter, burst);
    if (!out.allowed) refused = out;
  }
  ASSERT_FALSE(refused.rules.empty());
  EXPECT_EQ(refused.rules[0].retry_after_us, FairShare::kLogWakeHorizons * kHorizonUs);
  EXPECT_EQ(limiter->stats().share_wake_epochs, 1u);
}

TEST_P(LimiterShareTest, AKeyOnlyThisNodeSpendsOnKeepsItsBurst) {
  Limiter& limiter = *make_owned(GetParam());
  ASSERT_TRUE(check_search(limiter, kStart).allowed);  // the probe's first
  // No news of another node: after the probe, the whole burst at once.
  int admitted = 0;
  for (int i = 0; i < 1200; ++i) admitted += check_search(limiter, kStart + kHorizonUs).allowed ? 1 : 0;
  EXPECT_GE(admitted, 900);
  EXPECT_EQ(limiter.stats().share_probes, 1u);
}

TEST_P(LimiterShareTest, PeeksAndCostsOfZeroPassNoGate) {
  Limiter& limiter = *make_owned(GetParam());
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(check_search(limiter, kStart, 1, CheckMode::kPeek).allowed);
    EXPECT_TRUE(check_search(limiter, kStart, 0).allowed);
  }
  EXPECT_EQ(limiter.stats().share_epochs, 0u);
}

INSTANTIATE_TEST_SUITE_P(ReplicatedAlgorithms, LimiterShareTest,
                         ::testing::Values(Algorithm::kTokenBucket, Algorithm::kLeakyBucket,
                                           Algorithm::kFixedWindow, Algorithm::kSlidingWindow,
                                           Algorithm::kSlidingLog, Algorithm::kGcra,
                                           Algorithm::kSmoothBursty),
                         [](const ::testing::TestParamInfo<Algorithm>& info) {
                           return std::string(algorithm_name(info.param));
                         });

// What a bucket-like algorithm regains within an epoch is spent as it comes
// back, not at the epoch's start, as the sliding window's is
// (ARefillThatAccruesBecomesSpendableAsTheEpochGoesBy). Spent at once by a burst that stopped
// before the epoch's end, it was a debt the idle bucket then forgave at its
// cap: an excess one limiter would not have admitted (a job at every node
// every 5 s, `periodic`; docs/cluster.md, "Fair shares": "A refill
// accrues").
class LimiterShareRefillTest : public ::testing::TestWithParam<Algorithm> {};

TEST_P(LimiterShareRefillTest, AnEpochsRefillIsSpendableAsItComesBack) {
  const std::unique_ptr<Limiter> limiter = make_shared_limiter(GetParam());
  // Nine peers spent 999 of the 1000: the balance is 1, and 100 come back
  // in an epoch (100 ms at 1000/s).
  const std::string key(check_search(*limiter, kStart, 1, CheckMode::kPeek).rules.at(0).key);
  for (int i = 1; i <= 9; ++i) {
    limiter->merge_remote(key, "peer" + std::to_string(i), 5, 111, kStart);
  }
  const auto burst = [&](TimeUs now) {
    int admitted = 0;
    for (int i = 0; i < 50; ++i) admitted += check_search(*limiter, now).allowed ? 1 : 0;
    return admitted;
  };
  // This node's share is a tenth (a young key among 10 live nodes): of the
  // balance at once, of the 100 as they come back.
  const int at_start = burst(kStart + 1);
  EXPECT_LE(at_start, 2);
  const int by_halfway = at_start + burst(kStart + 1 + kHorizonUs / 2);
  EXPECT_GE(by_halfway, 4);
  EXPECT_LE(by_halfway, 7);
  const int by_end = by_halfway + burst(kStart + kHorizonUs);
  EXPECT_GE(by_end, 9);
  EXPECT_LE(by_end, 12);
  EXPECT_EQ(limiter->stats().share_epochs, 1u);
}

INSTANTIATE_TEST_SUITE_P(Buckets, LimiterShareRefillTest,
                         ::testing::Values(Algorithm::kTokenBucket, Algorithm::kLeakyBucket,
                                           Algorithm::kGcra, Algorithm::kSmoothBursty),
                         [](const ::testing::TestParamInfo<Algorithm>& info) {
                           return std::string(algorithm_name(info.param));
                         });

// A forgiven debt takes the burst's end from the requests this node was
// asked in it, the ones the algorithm itself refused too (its view of the
// balance spent): a node whose bucket refused the burst's last 100 ms
// counted only its admissions, took the burst for ended early and carried
// a debt as large as the refill of those 100 ms too (`periodic`: a few of
// 20 nodes carried 6-7 where the others carried none).
TEST_P(LimiterShareRefillTest, RequestsTheAlgorithmRefusesMarkTheBurstsEnd) {
  const auto debt_carried = [&](std::vector<TimeUs> refused_after_us) {
    const std::unique_ptr<Limiter> limiter = make_shared_limiter(GetParam());
    const std::string key = key_after_nine_peers(*limiter);
    check_search(*limiter, kStart + 1);
    // A burst after a quiet spell: this node asks, the peers spend 1200.
    const TimeUs burst = kStart + 1 + kUsPerSecond;
    check_search(*limiter, burst);
    limiter->merge_remote(key, "peer1", 5, 1200, burst);
    // Asked later: the algorithm refuses (the balance is spent).
    for (const TimeUs after_us : refused_after_us) {
      EXPECT_FALSE(check_search(*limiter, burst + after_us).allowed);
    }
    // The next burst, after an idle spell that fills the bucket.
    check_search(*limiter, burst + 5 * kUsPerSecond);
    const Ledger::KeyState* state = limiter->ledger().state_with_share(key);
    return state == nullptr ? std::int64_t{-1} : state->share->debt();
  };
  // 200 over the balance at the wake, less what refilled by the burst's end
  // (and smooth bursty's request ahead, in its balance: Limiter::share_admits).
  const std::int64_t ahead = GetParam() == Algorithm::kSmoothBursty ? 1 : 0;
  EXPECT_EQ(debt_carried({}), 200 - ahead);
  EXPECT_EQ(debt_carried({kHorizonUs}), 100 - ahead);  // 100 ms of refill at 1000/s
  // A refusal in a later slot than the last one noted is noted too
  // (Limiter::kRefusedDemandSlotBits): the burst ended at 100 ms, not 50.
  EXPECT_EQ(debt_carried({kHorizonUs / 2, kHorizonUs}), 100 - ahead);
}

// Keys new at once (`coldkeys`): a per-user rule's new keys keep their first
// request beyond a probe's share (a user asking now and then loses nothing
// to a probe), until this node meets FairShare::kDenseRequests of them new
// within one horizon while the rule's spread is unknown: then it is most
// likely one of many nodes meeting the same keys, and the rule's probes are
// strict, as is its first epoch of a key others already spend on (200 nodes
// passing a first request each of every key admitted 11 x the limit before
// any news). Counted once per rule. Meeting them one a horizon changes
// nothing.
TEST(LimiterShareNewKeysTest, ManyKeysNewAtOnceMakeAPerUserRulesProbesStrict) {
  const auto make = [] {
    // A token bucket of 10/s, burst 10, per user.
    Rule rule;
    rule.name = "per-user";
    ValueMatcher each;
    each.each = true;
    rule.match.push_back({"user", each});
    rule.params = {10, kUsPerSecond, 10};
    return make_replicated_limiter(std::move(rule), 200);
  };
  const auto check_user = [](Limiter& limiter, int user, TimeUs now,
                              CheckMode mode = CheckMode::kCheck) {
    const std::string value = "u" + std::to_string(user);
    const Descriptor d[] = {{"user", value}};
    CheckInput input{d, 1, nullptr};
    input.mode = mode;
    CheckOutput out;
    limiter.check(input, now, out);
    return out;
  };
  // A key `peers` peers spend on, first met here at `now`: admitted?
  const auto first_after_peers = [&](Limiter& limiter, int user, TimeUs now, int peers) {
    const std::string key(check_user(limiter, user, now, CheckMode::kPeek).rules.at(0).key);
    for (int i = 1; i <= peers; ++i) {
      limiter.merge_remote(key, "peer" + std::to_string(i), 5, 1, now);
    }
    return check_user(limiter, user, now).allowed;
  };
  // One new key a horizon: each probe keeps its first request.
  const std::unique_ptr<Limiter> slow = make();
  for (int user = 0; user < 20; ++user) {
    EXPECT_TRUE(check_user(*slow, user, kStart + user * kHorizonUs).allowed) << user;
  }
  EXPECT_EQ(slow->stats().share_probes, 20u);
  // Fewer than kDenseRequests origins in one burst (a crowd's first
  // requests are thinned: ACrowdsFirstRequestsBeyondTheirSharesAreKeptByADraw).
  constexpr int kFewPeers = static_cast<int>(FairShare::kDenseRequests) - 2;
  EXPECT_TRUE(first_after_peers(*slow, 300, kStart + 20 * kHorizonUs, kFewPeers));
  EXPECT_EQ(slow->stats().share_crowded_starts, 0u);
  // Many at once: the first kDenseRequests pass as sparse users' would;
  // of the next 100, only those whose dither lifts a share of 10/200 of a
  // request to one (about 5%).
  const std::unique_ptr<Limiter> crowd = make();
  for (std::uint32_t user = 0; user < FairShare::kDenseRequests; ++user) {
    EXPECT_TRUE(check_user(*crowd, static_cast<int>(user), kStart + 1).allowed) << user;
  }
  EXPECT_EQ(crowd->stats().share_crowded_starts, 1u);
  EXPECT_EQ(slow->stats().share_keys_crowded, 0u);
  int admitted = 0;
  for (int user = 100; user < 200; ++user) admitted += check_user(*crowd, user, kStart + 2).allowed;
  EXPECT_LE(admitted, 15);
  EXPECT_GT(crowd->stats().share_refused, 85u);
  // A key a few peers already spend on, first met here: strict too.
  EXPECT_FALSE(first_after_peers(*crowd, 300, kStart + 3, kFewPeers));
  EXPECT_EQ(crowd->stats().share_crowded_starts, 1u);
  // Their keys are made crowded (200 live nodes, pools of 10): counted.
  EXPECT_GT(crowd->stats().share_keys_crowded, 90u);
}

// Nine peers' news on api=search (a unit each), then `tries` requests at
// once: how many were admitted.
int spend_after_nine_peers(Limiter& limiter, int tries) {
  key_after_nine_peers(limiter);
  int admitted = 0;
  for (int i = 0; i < tries; ++i) admitted += check_search(limiter, kStart + 1).allowed ? 1 : 0;
  return admitted;
}

// A node whose share refused part of 500 requests after nine peers' news,
// and one that admitted as many with no gate (one live node): no refusal.
struct RefusedAndAlone {
  std::unique_ptr<Limiter> shared;
  std::unique_ptr<Limiter> alone;
  int admitted = 0;
};
void spend_refused_and_alone(Algorithm algorithm, RefusedAndAlone& out) {
  out.shared = make_shared_limiter(algorithm);
  out.admitted = spend_after_nine_peers(*out.shared, 500);
  ASSERT_GT(out.shared->stats().share_refused, 0u);
  ASSERT_LT(out.admitted, 500);
  out.alone = make_shared_limiter(algorithm, 1);
  ASSERT_EQ(spend_after_nine_peers(*out.alone, out.admitted), out.admitted);
  ASSERT_EQ(out.alone->stats().share_refused, 0u);
}

// A sliding window is credited the room this node's share refused
// (sliding_window.h, "Credit"): after a burst the share cut short, the
// window's estimate later in the next window is lower than that of a node
// that admitted as much with no share refusing.
TEST(LimiterShareWindowTest, ASlidingWindowIsCreditedTheRoomItsShareRefused) {
  const auto remaining_at = [](Limiter& limiter, TimeUs now) {
    return check_search(limiter, now, 1, CheckMode::kPeek).rules.at(0).remaining;
  };
  RefusedAndAlone nodes;
  ASSERT_NO_FATAL_FAILURE(spend_refused_and_alone(Algorithm::kSlidingWindow, nodes));
  // At the next window's start the two agree; halfway through it the one
  // whose share refused has the refused room back.
  const TimeUs next = kStart + kUsPerSecond;
  EXPECT_EQ(remaining_at(*nodes.shared, next), remaining_at(*nodes.alone, next));
  EXPECT_GT(remaining_at(*nodes.shared, next + kUsPerSecond / 2),
            remaining_at(*nodes.alone, next + kUsPerSecond / 2));
}

// A fixed window is given back, in the next window, the room this node's
// share refused (fixed_window.h, "Credit"); a node that admitted as much with
// no share refusing gets the limit there, as the textbook counter.
TEST(LimiterShareWindowTest, AFixedWindowIsGivenBackTheRoomItsShareRefused) {
  RefusedAndAlone nodes;
  ASSERT_NO_FATAL_FAILURE(spend_refused_and_alone(Algorithm::kFixedWindow, nodes));
  const TimeUs next = kStart + kUsPerSecond;
  // The window had 1000 - 9 - admitted left when the share refused.
  const std::int64_t room = 1000 - 9 - nodes.admitted;
  EXPECT_TRUE(check_search(*nodes.shared, next, 1000 + room, CheckMode::kPeek).allowed);
  EXPECT_FALSE(check_search(*nodes.shared, next, 1000 + room + 1, CheckMode::kPeek).allowed);
  EXPECT_FALSE(check_search(*nodes.alone, next, 1001, CheckMode::kPeek).allowed);
  // Reported as at most the limit.
  EXPECT_EQ(check_search(*nodes.shared, next, 1, CheckMode::kPeek).rules.at(0).remaining, 1000);
}

// A shadow rule admits what its share refuses, and says so.
TEST(LimiterShareModesTest, ShadowAdmitsWhatTheShareRefuses) {
  AlgorithmOptions shadow;
  shadow.throttle.mode = alg::ThrottleMode::kShadow;
  RuleSet rules;
  rules.rules.push_back(shared_rule(Algorithm::kTokenBucket, 100, shadow));
  Limiter limiter({.replicated = true}, std::move(rules));
  limiter.enable_replication("self", 1, 0);
  limiter.set_share_view(view_of(10));
  const Descriptor d[] = {{"api", "search"}};
  CheckOutput out;
  int over = 0;
  for (int i = 0; i < 50; ++i) {
    limiter.check({d, 1, nullptr}, kStart, out);
    EXPECT_TRUE(out.allowed);
    over += out.rules[0].over_limit ? 1 : 0;
  }
  EXPECT_GE(over, 35);  // all but about a tenth of 110
  EXPECT_EQ(limiter.stats().share_refused, static_cast<std::uint64_t>(over));
}

// Idle shares: at a wake, a node that asked in few of the key's bursts gets
// its share of the pool raised by 1 / that fraction (at most
// kMaxIdleRaiseX4 / 4): the shares of the nodes that ask in a burst must sum
// to the pool, not to the fraction of it the asking nodes hold. Weighing
// half of a pool of 100: 50; asking in every other burst: 75 (1.5 x, the
// most); missing one burst in eight (above kIdleRaiseBelowX63): 50.
TEST(FairShareTest, ANodeAskingInFewOfAKeysBurstsHasItsShareRaised) {
  const auto share_after = [](int ask_every) {
    FairShare share;
    ShareInputs in{.headroom = 100, .others = 1, .has_own = true};
    share.start_epoch(view_of(2), in, kStart);  // weighs half
    share.count(kStart);
    TimeUs at = kStart;
    TimeUs last_change = kStart;
    for (int burst = 0; burst < 24; ++burst) {
      at += kUsPerSecond;
      share.note_wake(0, 0, at, kHorizonUs, last_change);
      last_change = at;
      if (burst % ask_every != 0) share.count(at);
    }
    at += kUsPerSecond;
    share.note_wake(0, 0, at, kHorizonUs, last_change);
    in.from_wake = true;
    in.epoch_end_us = at + kHorizonUs;
    const bool capped = share.start_epoch(view_of(2), in, at).idle_raise_capped;
    return std::pair{spend_epoch(share, 1000, at), capped};
  };
  const auto near = [](int admitted, int expected) {
    return admitted >= expected && admitted <= expected + 1;  // the dither
  };
  const auto [every, every_capped] = share_after(1000);  // asked in every burst but the first
  EXPECT_PRED2(near, every, 50);
  EXPECT_FALSE(every_capped);
  const auto [half, half_capped] = share_after(2);  // 2 x, held at 1.5 x (counted)
  EXPECT_PRED2(near, half, 75);
  EXPECT_TRUE(half_capped);
  const auto [most, most_capped] = share_after(8);
  EXPECT_PRED2(near, most, 50);
  EXPECT_FALSE(most_capped);
}

}  // namespace
}  // namespace rlimit::core
