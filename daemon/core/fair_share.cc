#include "core/fair_share.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <limits>
#include <numeric>

#include "core/algorithms/algorithm.h"  // detail::floor_div
#include "core/stable_hash.h"

namespace rlimit::core {
namespace {

using i128 = __int128;

// Growth of a counter since a mark; an entry replaced by a new incarnation
// (after garbage collection) starts below it: all of it is growth.
std::uint64_t since(std::uint64_t now_value, std::uint64_t mark) {
  return now_value >= mark ? now_value - mark : now_value;
}

// The step of `step_us` that `t` lies in: a window's index, as the fixed
// window counts it.
i128 step_index(TimeUs t, TimeUs step_us) { return algorithms::detail::floor_div(t, step_us); }

// The step of a stepwise refill `t` lies in (ShareInputs::refill_step_us).
i128 step_of(const ShareInputs& in, TimeUs t) { return step_index(t, in.refill_step_us); }

// How many steps of a stepwise refill start after `from_us`, up to `to_us`.
i128 steps_between(const ShareInputs& in, TimeUs from_us, TimeUs to_us) {
  return step_of(in, to_us) - step_of(in, from_us);
}

// What the algorithm refills from `from_us` to `to_us`, in 2^-kFractionBits
// of a unit: at its rate (its fraction kept), or `rate_limit` at each
// step's start between them (a fixed window); a sliding window at its rate
// from the end of the step `from_us` lies in, as the weight of that step's
// count falls in the next (docs/cluster.md, "A sliding window's burst
// across a window's start").
i128 refilled_units(const ShareInputs& in, TimeUs from_us, TimeUs to_us) {
  if (to_us <= from_us) return 0;
  if (in.whole_steps()) {
    return i128{in.rate_limit} * steps_between(in, from_us, to_us) << FairShare::kFractionBits;
  }
  if (in.refill_step_us > 0) {
    const auto next_step_us = static_cast<TimeUs>((step_of(in, from_us) + 1) * in.refill_step_us);
    if (to_us <= next_step_us) return 0;
    return (i128{in.rate_limit} * (to_us - next_step_us) << FairShare::kFractionBits) /
           in.refill_step_us;
  }
  return (i128{in.rate_limit} * (to_us - from_us) << FairShare::kFractionBits) /
         std::max<std::int64_t>(1, in.rate_period_us);
}

// The same in whole units, rounded down.
i128 refilled(const ShareInputs& in, TimeUs from_us, TimeUs to_us) {
  return refilled_units(in, from_us, to_us) >> FairShare::kFractionBits;
}

// Enough live nodes to take a pool (in units) with a request each, and at
// least kCrowdedNodes of them: a crowd whose first requests alone would
// spend it.
bool crowd_of(std::int64_t live_nodes, i128 pool) {
  return live_nodes >= FairShare::kCrowdedNodes &&
         pool < (i128{live_nodes} << FairShare::kFractionBits);
}

// The draws an epoch may make. Each steps over the nodes by its own
// irrational (the fraction of the golden ratio, of the square root of 2, of
// 3, in 2^-64), so that one node's draws in one epoch are not one draw
// shifted.
enum class Draw : std::uint64_t { kShare = 1, kCrowd = 2, kCarry = 3 };

// A fraction in 2^-kFractionBits drawn from `dither_seed` (the key's and
// the node's) at `at`, independent of the other nodes'.
std::int64_t independent_drawn(std::uint64_t dither_seed, Draw draw, TimeUs at) {
  const auto time = static_cast<std::uint64_t>(at);
  const std::uint64_t seed = draw == Draw::kShare   ? dither_seed ^ time
                             : draw == Draw::kCrowd ? dither_seed ^ ~time
                                                    : dither_seed ^ std::rotl(time, 32);
  return static_cast<std::int64_t>(splitmix64(seed) &
                                   ((std::uint64_t{1} << FairShare::kFractionBits) - 1));
}

// A fraction in 2^-kFractionBits for a key (`key_seed`) at `at`, spread
// over the nodes (docs/cluster.md, "Fair shares": "Draws spread over the
// nodes"): every node starts from the same point, a hash of the key, the
// news horizon `at` falls in and the cluster's seed, and steps from it by
// its place among the live nodes times the draw's irrational, the places
// shuffled anew each horizon the same way at every node (an affine map of 0
// to n - 1, so no node's draws stay low). N nodes each keeping a request
// with the chance p then keep N p of them within a few, where independent
// draws keep N p give or take the square root of N p (1 - p). Where the
// nodes' views of the live nodes differ, places may collide: the draws are
// then as independent ones, no worse. Independent where the algorithm's
// draws are not spread (ShareInputs::spread_draws): independent_drawn.
std::int64_t spread_drawn(const ShareView& view, const ShareInputs& in, Draw draw, TimeUs at) {
  if (!in.spread_draws) return independent_drawn(in.dither_seed, draw, at);
  static constexpr std::uint64_t kSteps[] = {0x9E3779B97F4A7C15ull, 0x6A09E667F3BCC908ull,
                                             0xBB67AE8584CAA73Bull};
  const auto which = static_cast<std::uint64_t>(draw);
  const auto horizon = static_cast<std::uint64_t>(at / std::max<TimeUs>(1, view.horizon_us));
  const std::uint64_t common =
      splitmix64(in.key_seed ^ which ^ splitmix64(horizon ^ view.draw_seed));
  const std::uint64_t n = std::max<std::uint32_t>(1, view.live_nodes);
  std::uint64_t place = view.rank % n;
  if (n > 1) {
    const std::uint64_t shuffle = splitmix64(common);
    // The step of the map, coprime to n: the next from a drawn one (ends at
    // 1 at the latest; a few tries on average).
    std::uint64_t step = 1 + shuffle % (n - 1);
    while (std::gcd(step, n) != 1) step = step % (n - 1) + 1;
    place = (step * place + (shuffle >> 32) % n) % n;
  }
  const std::uint64_t spread = common + place * kSteps[which - 1];
  return static_cast<std::int64_t>(spread >> (64 - FairShare::kFractionBits));
}

}  // namespace

// One per key this node checks (docs/cluster.md, "Fair shares": memory).
static_assert(sizeof(FairShare) <= 176);

FairShare::Wake FairShare::note_wake(std::uint64_t all_before, std::uint64_t own_before, TimeUs now,
                                     TimeUs quiet_us, TimeUs last_change_us,
                                     TimeUs last_consumed_us) {
  Wake found;
  // What every node consumed since the last wake: the burst it began.
  const std::uint64_t burst_consumed = since(all_before, all_at_wake_);
  // A forgiven debt: the burst since the last wake ended. Its end is this
  // node's last request in it, or, if later, the newest consumption it
  // heard of less a horizon (news arrives up to about a horizon after the
  // fact): a node whose own demand stopped early does not take the burst
  // for ended (an end too early takes a debt too large). Where the news
  // carries its age (news_aged_: an algorithm that does not repay an
  // overshoot, ShareInputs::repays_overshoot), the newest consumption is
  // when it happened: the burst's end itself. Less a horizon there, a
  // sliding window's job across a window's start ended early at the nodes
  // whose own requests stopped before its end, which counted less of the
  // window's refill over the burst than it freed and carried a debt the
  // cluster had not run up (200 nodes, `periodic` from 3.9 s, 60 s, seeds
  // 1 / 2: 1,043 / 1,070 debts carried, -2.37 / -2.75% against the ideal;
  // 193 / 330 and -0.99 / -0.46% so; docs/cluster.md, "A burst's end, where
  // news carries its age").
  if (burst_balance_ >= 0 && burst_woke_us_ == 0 && woke_us_ > 0) {
    const TimeUs news_lag_us = news_aged_ ? 0 : quiet_us;
    const TimeUs heard_end = last_consumed_us > 0 ? last_consumed_us - news_lag_us : 0;
    last_asked_us_ = std::clamp(std::max(last_asked_us_, heard_end), woke_us_, now);
    burst_balance_ = static_cast<std::int64_t>(std::clamp<i128>(
        i128(burst_consumed) - burst_balance_,
        std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()));
    burst_woke_us_ = woke_us_;
    burst_refused_ = refused_since_wake_;
  } else if (burst_woke_us_ == 0 || burst_consumed > kMostStragglerUnits) {
    burst_balance_ = -1;
    burst_woke_us_ = 0;
  } else {
    found.straggler = true;
  }
  // Otherwise, where a debt or credit still waits for an epoch to carry it
  // (this node asked nothing since the last wake), and that wake brought a
  // straggler's news (a retransmission after a loss that came after a quiet
  // spell), it is kept for the next. On `periodic` at 200 nodes most nodes
  // lost their error of the first job so: a fixed window's debt, and a
  // bucket's credit for a cold start that fell short (GCRA, seed 1: 16 of
  // 200 nodes carried the first job's 19 short; seeds 1-4 -1.12 / -0.98 /
  // -1.40 / -0.70% over 30 s where they keep it through a straggler's
  // wake: +0.14 / -0.28 / +0.98 / -0.70%). Not after a burst this node did
  // not ask in (its own error is not known here).
  debt_ = 0;
  burst_carry_ = 0;
  if (burst_pool_ >= 0 && woke_us_ > 0 &&
      last_change_us - woke_us_ <= (kLogWakeHorizons + 1) * quiet_us) {
    const i128 error = i128(burst_consumed) - burst_pool_;
    // Crowded: the burst consumed kCrowdedPools times the pool at its wake or more
    // (which holds a horizon's refill, so a burst of up to three horizons
    // cannot get there by refill alone) and kDenseRequests beyond it: many
    // nodes, each asking a few requests, passed their sparse first request
    // at once. Dense from now: no node keeps a first request beyond its
    // share, as where its own demand is dense (docs/cluster.md, "Fair
    // shares": "Crowded bursts").
    if (error >= std::max<i128>(kDenseRequests, (kCrowdedPools - 1) * i128{burst_pool_})) {
      dense_until_us_ = now + kDenseMemoryUs;
      found.crowded = true;
    } else if (burst_consumed > 0 &&
               kDisprovedCrowdPools * i128{burst_consumed} <= burst_pool_) {
      // A crowd disproved (kDisprovedCrowdPools): the burst spent an eighth
      // of its pool or less, where a crowd, each node keeping a first
      // request, spends about all of it. The key's crowd marks go,
      // whatever set them: a start among many keys new at once
      // (make_crowded), a crowded burst or epoch, a thinned crowd
      // (crowd_thinned_), this node's own dense demand (whose share then
      // refused while the pool went unspent); what still holds sets them
      // again. A wake with nothing consumed since the last is no evidence
      // (the last wake was noted by a request that its share then refused:
      // demand held back, not a burst that asked little; judged at the
      // next, below): on `coldkeys` at 200 nodes such wakes, counted too,
      // took the run from +1.28% to +5.14% of the ideal.
      found.crowd_disproved = drop_crowd_marks(now);
    }
    if (pool_carries_ && (error > 0 || refused_since_wake_)) {
      burst_carry_ = static_cast<std::int32_t>(
          std::clamp<i128>(error, std::max(-burst_pool_, -kMaxCarriedUnits), kMaxCarriedUnits));
    }
  }
  // A run of small bursts disproves a crowd too (kDisprovingBurstRun), each
  // at most a quarter (kRunBurstPools) of the pool this node's last epoch
  // saw: a node that asks a key now and then notes no pool at its wakes (it
  // asks within a horizon of few of them), and held a start's crowd marks
  // for up to a minute (`hotkeys` at 50 nodes: a third of the refusals on
  // users below their limit). A wake with nothing consumed since the last
  // judges nothing (above).
  if (burst_consumed > 0) {
    const bool small = kRunBurstPools * i128{burst_consumed} <= pool_seen_;
    small_bursts_ = small ? std::min<std::uint32_t>(small_bursts_ + 1, kMaxBurstRun) : 0;
    if (small_burst_run() && drop_crowd_marks(now)) {
      found.crowd_disproved = true;
    }
  }
  // A burst ended (a wake after a spell of kIdleSpellHorizons news horizons
  // without consumption: not a pause in a burst that a small refill makes):
  // did this node ask in it?
  if (now - last_change_us >= kIdleSpellHorizons * quiet_us) {
    asked_wakes_x63_ = (7 * asked_wakes_x63_ + (asked_in_burst_ > 0 ? 63 : 0) + 4) / 8;
    static_assert((7 * kLeastAskedWakesX63 + 4) / 8 == kLeastAskedWakesX63,
                  "the running average's floor, which a crowd of askers is counted from");
    if (asked_in_burst_ > 0) asked_last_burst_ = asked_in_burst_;
    asked_in_burst_ = 0;
    burst_epochs_ = 0;
  }
  // The pool noted for the checks above is dropped, but at a wake with
  // nothing consumed since the last: that one was noted by a request its
  // share then refused (the entries did not grow), and the burst it began
  // goes on in the news that woke the key now; the next wake judges that
  // burst whole against the pool noted at its start, crowded or not.
  // Dropped, such a burst was judged only where an epoch here came within a
  // horizon of the news (`hotkeys` at 50 nodes, seeds 1 / 2: -1.18 / -1.16%
  // of the ideal, -0.99 / -1.00% kept; `coldkeys` at 200 nodes, the token
  // bucket: +1.28%, +0.92% kept, crowded bursts 2,743 -> 7,192). Not a
  // log's carried pool (pool_carries_), which its epoch notes afresh.
  if (pool_carries_ || burst_consumed > 0) burst_pool_ = -1;
  refused_since_wake_ = false;
  quiet_us_ = static_cast<std::uint32_t>(std::clamp<TimeUs>(now - last_change_us, 0, kMaxQuietUs));
  woke_us_ = now;
  all_at_wake_ = all_before;
  own_at_wake_ = own_before;
  return found;
}

TimeUs FairShare::wake_end_in_step_us(const ShareView& view, TimeUs now, int horizons,
                                      TimeUs step_us) const {
  assert(step_us > 0);
  return now < step_end_us(woke_us_, step_us) ? wake_end_us(view, now, horizons) : 0;
}

TimeUs FairShare::step_end_us(TimeUs t, TimeUs step_us) {
  assert(step_us > 0);
  return static_cast<TimeUs>((step_index(t, step_us) + 1) * step_us);
}

bool FairShare::first_in_new_step(TimeUs now, TimeUs step_us) const {
  assert(step_us > 0);
  if (epoch_us_ == 0) return false;
  // The last epoch's start (its length is clamped only past kMaxEpochUs,
  // and then the start found is later: a first epoch may be missed, none
  // is found wrongly).
  const TimeUs last_start_us = epoch_end_us_ - epoch_us_;
  const i128 step = step_index(now, step_us);
  return step_index(last_start_us, step_us) < step && step_index(woke_us_, step_us) < step;
}

bool FairShare::drop_crowd_marks(TimeUs now) {
  const bool marked = dense(now) || crowded_ || crowd_thinned_;
  dense_until_us_ = -1;
  crowded_ = false;
  crowd_thinned_ = false;
  return marked;
}

FairShare::EpochStart FairShare::start_epoch(const ShareView& view, const ShareInputs& in,
                                             TimeUs now) {
  EpochStart found;
  probing_ = false;
  strict_ = false;
  crowd_pass_ = 0;
  unlimited_ = false;
  // What this node asked in its last epoch (or the span after it, where
  // the algorithm refused: enter_span).
  const std::uint32_t asked_last = asked_;
  asked_ = 0;
  past_span_ = 0;
  accruing_ = 0;
  const auto end_epoch_at = [&](TimeUs end) {
    epoch_end_us_ = end;
    epoch_us_ = static_cast<std::uint32_t>(std::clamp<TimeUs>(end - now, 1, kMaxEpochUs));
  };
  news_aged_ = !in.repays_overshoot;
  // No idle spell since this node's last epoch (note_wake starts the count
  // anew at one): a pause in the key's demand, not a burst's end.
  const bool no_idle_spell_since_last = burst_epochs_ > 0;
  if (burst_epochs_ < kMaxBurstEpochs) ++burst_epochs_;
  const bool first_here = epoch_us_ == 0;
  // A fixed window's burst is shared in one epoch (the wake's, over
  // kFixedWindowWakeHorizons), so its weights are the burst's whole
  // allocation, and where they sum above one the burst overshoots its pool.
  // Marks moved at an epoch's start once kWeightWindowUs had passed, in a
  // burst, where each node had heard a different part of it: a node whose
  // mark came late in the last burst counted all of its own spending there
  // against only the part of the others' it had not yet heard of (`periodic`
  // at 200 nodes: one node's weight 0.064, 7 x the others', a job's weights
  // summing to 1.01-1.20, each job up to 26 beyond its pool, seed 1, 30 s).
  // So where the room comes back in whole steps the marks move at a wake,
  // to the sums just before it, and the long window ends there: whole
  // bursts, the same at every node that heard them (docs/cluster.md, "A
  // fixed window's weights, from whole bursts"). A key's first marks are
  // still taken at this node's first epoch (its second burst weighs the
  // first from there): a key new to the cluster marked from nothing, its
  // first burst whole too, took `coldkeys` at 50 nodes to 1.48 x the limit
  // in a later window (1.25 x; 15 s, seeds 1-4). Other algorithms keep their marks: their
  // later epochs in a burst share again what the first mis-weighed, and
  // marked so (a new key's from nothing too) the token bucket, smooth
  // bursty, GCRA and the sliding log fell 0.7-0.8 points further below the
  // ideal (the same scenario, 120 s, seeds 1-4).
  const bool burst_marks = in.whole_steps();
  if (first_here) {
    // The first epoch here: news of who else spends may still be arriving.
    young_until_us_ = now + view.horizon_us;
    prev_own_ = mark_own_ = in.own_consumed;
    prev_all_ = mark_all_ = in.all_consumed;
    mark_us_ = now;
  } else if (burst_marks && in.from_wake && woke_us_ > mark_us_ &&
             woke_us_ - mark_us_ >= kWeightWindowUs) {
    prev_own_ = mark_own_;
    prev_all_ = mark_all_;
    mark_own_ = own_at_wake_;
    mark_all_ = all_at_wake_;
    mark_us_ = woke_us_;
  } else if (now - mark_us_ >= (burst_marks ? 2 : 1) * kWeightWindowUs) {
    // (Where the marks are a burst's, only where no wake moved them for
    // twice the window: demand without quiet spells.)
    prev_own_ = mark_own_;
    prev_all_ = mark_all_;
    mark_own_ = in.own_consumed;
    mark_all_ = in.all_consumed;
    mark_us_ = now;
  }
  const std::int64_t n = std::max<std::uint32_t>(1, view.live_nodes);
  carry_forgiven_debt(view, in, now, found);
  const auto headroom = static_cast<std::int64_t>(
      std::min<i128>(i128{in.headroom} - debt_, std::numeric_limits<std::int64_t>::max()));
  const i128 balance = units(std::max<std::int64_t>(0, headroom));
  assert(in.refill_fraction < (1u << kFractionBits));
  i128 refill = units(std::max<std::int64_t>(0, in.refill)) + in.refill_fraction;
  // A debt beyond the balance left comes out of the refill: the shares
  // never take this node's view of the balance below the debt. Without it
  // a burst's later epochs, the balance spent, shared their whole refill
  // (`periodic`, 20 nodes, the token bucket, seeds 1-4: -0.56..+0.56%
  // without, -0.28..+0.28% with, measured before the burst's end counted
  // the requests the algorithm refused).
  if (headroom < 0) refill = std::max<i128>(0, refill - units(-headroom));
  // What is shared out at once; an accruing refill is shared alike below
  // and becomes spendable as the epoch goes by.
  const i128 pool = in.refill_accrues ? balance : balance + refill;
  const i128 later = in.refill_accrues ? refill : 0;
  pool_seen_ = static_cast<std::uint32_t>(
      std::clamp<i128>((pool + later) >> kFractionBits, 0, kMaxPoolSeen));
  // Up to one unit, so shares below one request admit one with their size
  // as the probability (spread over the nodes: spread_drawn).
  const std::int64_t dither = spread_drawn(view, in, Draw::kShare, now);

  if (in.others == 0) {
    // Probed before and no news of another spender since: the whole balance;
    // but where keys are routed, only once this node spent on the key (its
    // probe may have admitted nothing, and then no news reaches it: 200
    // nodes whose strict probes of a key admitted 15 requests in all took
    // the whole balance each at the next burst, 7.8 x the limit). Until
    // then it probes again.
    if (in.has_own || (probe_ways_ > 0 && !view.routed) || in.spenders == 0) {
      probe_ways_ = std::max<std::uint32_t>(probe_ways_, 1);
      unlimited_ = true;
      end_epoch_at(now + view.horizon_us);
      return found;
    }
    // New here, and nobody else known to spend yet: probe at an equal share.
    probing_ = true;
    const std::int64_t ways = std::min<std::int64_t>(n, in.spenders);
    probe_ways_ = static_cast<std::uint32_t>(std::min<std::int64_t>(ways, kMaxProbeWays));
    credit_ = pool / ways + dither;
    accruing_ = later / ways;
    // Where demand is sparse (a user's requests now and then), a probe
    // splitting a burst of one or two ways would refuse most first requests.
    strict_ = !in.sparse_rule;
    // Not where keys are routed, for an algorithm that repays an overshoot:
    // a probe's key may be one user's on a few nodes (`owners1000`: 100,000
    // users' keys new at once, each on 4 nodes); the key's owners tell a
    // crowd if there is one (its asks and spenders: Limiter::note_crowd),
    // and what the untold admit meanwhile is repaid. A sliding log or
    // window repays none: its key is crowded at once, as before.
    if (strict_ && in.crowded_start && crowd_of(n, pool) && !(view.routed && in.repays_overshoot)) {
      make_crowded(now);
      found.made_crowded = true;
    }
    end_epoch_at(now + view.horizon_us);
    young_until_us_ = epoch_end_us_ + view.horizon_us;
    return found;
  }

  // Met here for the first time while others spend on it, among many of the
  // rule's keys new at once, with a pool a crowd would spend: one of many
  // nodes meeting it at once (`coldkeys` at 50 nodes: half the nodes met
  // each key after news of its first spenders, and their first requests
  // alone admitted 2.5 x its burst). Such a key is crowded, as its origins
  // would show had the strict epochs let them spend: without that, the
  // keys' next bursts found too few origins to tell, and each node passed
  // its first request of each (2.9 x the limit in the second burst). The
  // same for a strict probe's key, above.
  strict_ = first_here && in.crowded_start && crowd_of(n, pool);
  if (strict_) {
    make_crowded(now);
    found.made_crowded = true;
  }
  // The origins known to spend on the key, this node included.
  const std::int64_t seen = std::int64_t{in.others} + 1;
  constexpr i128 kOne = i128{1} << kFractionBits;
  // This node's part of the consumption since the previous mark, and of the
  // current window alone once it spans a few horizons (so a node whose
  // peers stopped grows its share within a second, not two windows).
  // Where the marks are a burst's and this epoch is the burst's (from the
  // wake they were moved to), the long window ends at the mark.
  const bool whole_bursts =
      burst_marks && in.from_wake && mark_us_ == woke_us_ && mark_all_ > prev_all_;
  const std::uint64_t own_to = whole_bursts ? mark_own_ : in.own_consumed;
  const std::uint64_t all_to = whole_bursts ? mark_all_ : in.all_consumed;
  const std::uint64_t own_long = std::min(since(own_to, prev_own_), since(all_to, prev_all_));
  const std::uint64_t all_long = since(all_to, prev_all_);
  i128 weight = all_long > 0 ? kOne * own_long / all_long : kOne / seen;
  const std::uint64_t all_now = since(in.all_consumed, mark_all_);
  if (now - mark_us_ >= 4 * view.horizon_us && all_now > 0) {
    const std::uint64_t own_now = std::min(since(in.own_consumed, mark_own_), all_now);
    weight = (weight + kOne * own_now / all_now) / 2;
  }
  // An eighth shared equally: no origin starves (a node that has not spent
  // yet gets 1/(8 seen)), and the weights of one view still sum to one. A
  // node that probed the key shares it as many ways as its probe did, if
  // more: nodes whose probe admitted nothing have no entry in any view, and
  // each would take 1/(8 seen) on top of the spenders' eighths (200 nodes
  // meeting a key at once: half of them, and the weights summed to 1.12 at
  // the next burst, an excess a log keeps: it has no debt to repay it).
  const std::int64_t equal_ways = std::max<std::int64_t>(seen, probe_ways_);
  weight = (7 * weight + kOne / equal_ways) / 8;
  // Right after this node first met the key, news of who else spends is
  // still arriving: every live node may be about to.
  if (now < young_until_us_) {
    weight = weight * seen / std::max(seen, n);
    // A fresh window while young (docs/cluster.md, "A fresh window, shared
    // as a probe"): where the algorithm's room comes back whole at each step
    // (a fixed window) and the key woke in an earlier step, the pool is a
    // new window's that no node has spent from: this node's part is at
    // least its probe's, one of as many ways. Scaled to every live node
    // alone, the weights summed to about a third: a job across a window's
    // start at 200 nodes (`periodic`, jobs from 3.9 s) admitted 38 of its
    // second window's 100 at the key's first job.
    if (probe_ways_ > 1 && in.whole_steps() && woke_us_ > 0 &&
        steps_between(in, woke_us_, now) > 0) {
      weight = std::max<i128>(weight, kOne / probe_ways_);
    }
  }
  // The pool shared: as it stands; or, late in a burst, as it stood at the
  // key's wake, less what this node spent since, in an epoch that ends with
  // the wake's horizon, as every node's such epoch does.
  i128 shared = pool;
  i128 spent_since_wake = 0;
  // Where the Limiter set the epoch's end (the wake's horizon's, a log's
  // cut), there; else a horizon on.
  const TimeUs end = in.epoch_end_us > now ? in.epoch_end_us : now + view.horizon_us;
  // The balance as it stood at the last wake: what is left plus what every
  // node spent since.
  const std::uint64_t spent_all = since(in.all_consumed, all_at_wake_);
  const i128 at_wake = std::max<i128>(0, i128{headroom} + i128(spent_all));
  if (in.from_wake) {
    assert(in.epoch_end_us > now);  // FairShare::wake_end_us
    const std::uint64_t spent_own = std::min(since(in.own_consumed, own_at_wake_), spent_all);
    shared = (at_wake << kFractionBits) + (in.refill_accrues ? 0 : refill);
    if (in.carry_burst_error) {
      // An excess less what the algorithm holds back of it already (its
      // own carry, in the headroom above); a shortfall whole.
      assert(in.algorithm_held >= 0);
      const i128 carry = burst_carry_ > 0
                             ? std::max<i128>(0, i128{burst_carry_} - in.algorithm_held)
                             : i128{burst_carry_};
      shared = std::max<i128>(0, shared - (carry << kFractionBits));
      if (burst_pool_ < 0 || !pool_carries_) {
        burst_pool_ = static_cast<std::int64_t>(
            std::min<i128>(shared >> kFractionBits, std::numeric_limits<std::int64_t>::max()));
        pool_carries_ = true;
      }
    }
    spent_since_wake = i128(spent_own) << kFractionBits;
  } else if (in.from_step) {
    // The step's pool as it stood at its start, nothing spent here since
    // (this node's first epoch in it; the last one ended with its step).
    assert(in.whole_steps());
    shared = units(std::max<std::int64_t>(0, in.capacity - debt_));
  }
  if (burst_pool_ < 0 && woke_us_ > 0 && now < woke_us_ + view.horizon_us) {
    // The first epoch within a horizon of the wake notes the pool as it
    // stood then, for the crowding check at the next wake (note_wake).
    burst_pool_ = static_cast<std::int64_t>(std::min<i128>(
        at_wake + std::max<std::int64_t>(0, in.refill), std::numeric_limits<std::int64_t>::max()));
    pool_carries_ = false;
  }
  // Crowded origins (kCrowdedOrigins): dense from now, as after a crowded
  // burst.
  const i128 pool_requests = shared >> kFractionBits;
  // Origins spending at about the same time (kCrowdedWithinUs), this node
  // among them.
  const std::int64_t recent = std::int64_t{in.recent_others} + 1;
  found.crowded_origins = recent >= kCrowdedOrigins &&
                          i128{recent} >= kCrowdedOriginsPerPool * pool_requests;
  if (found.crowded_origins) dense_until_us_ = now + kDenseMemoryUs;
  // A crowd's first requests, thinned. Where at least kDenseRequests
  // origins spent on the key in one burst (kBurstHorizons), among enough
  // live nodes for a crowd (kCrowdedNodes), and more nodes spend on it than
  // its pool holds requests, each node's first request of an epoch, kept
  // beyond its share as sparse demand's is, would together spend the pool
  // many times over: `coldkeys` at 200 nodes, each node asking about one
  // request of a key a burst, admitted 2.44 x the limit in its second
  // second (the nodes meeting a key first there, and those that met it
  // before without making it dense), then 0.29 x repaying it. So a node's
  // first request is admitted with the crowd's chance, the pool over the
  // crowd: the spenders (every origin with an entry, this node included,
  // or the recent ones if more), or, if more, the live nodes times the part
  // of the key's bursts this node asked in (asked_wakes_x63_: only about a
  // pool of the askers spend in a burst and gain an entry; 22-39 origins
  // had one where 125 nodes asked). The share's dither already admits it
  // with the share's size as the chance, so a draw keeps it beyond the
  // share only with what tops that up to the crowd's (before, the draw's
  // chance came on top of the share's: a full bucket's burst admitted 17.0
  // of a pool of 10-11 on average, 15.8 since, and the cycles of overshoot
  // and silent repayment lost room at the cap; docs/cluster.md, "A crowd's
  // chance, counted once"). Together they keep about the pool. The recent
  // origins alone, a lower bound on who asks, kept too many (1.57 x,
  // measured with the gate on a second's origins). On every algorithm:
  // the sliding window was once left out within a run of bursts (its
  // credit for the room a share refused stood in), and `coldkeys` at 200
  // nodes ran +17.5% over the ideal with later windows from 2.34 x down to
  // 0.02 x the limit, -1.83% and 1.09 / 0.32 x with its crowd thinned
  // (docs/cluster.md, "A window's crowd, thinned in every burst").
  // At a new burst (the key's entries quiet for a horizon: ShareInputs::
  // new_burst) the crowd is larger than the origins show. A node meeting the key
  // there (young here) has heard only of the last burst's spenders, about
  // as many as its pool held, while every live node may be about to ask: it
  // counts every live node in the crowd. Such nodes kept 1,248 of the 1,659
  // requests `coldkeys`' second burst at 200 nodes admitted (traced, seed
  // 1). Not where the news is of this burst (no quiet spell): the young
  // nodes of `periodic`'s first job at 200 nodes would count every live
  // node too (measured with such a node also thinned wherever 6 origins had
  // an entry, below: GCRA, seed 1, 1.01 x the limit in that job against
  // the ideal's 1.20; 1.10 before). And a key thinned here (crowd_thinned_)
  // stays in the crowd at each new burst while kDenseRequests origins have
  // an entry: a well-thinned burst leaves fewer spenders within a horizon
  // than the gate asks, and the next burst's nodes passed again (567 and
  // 747 such passes in bursts 3 and 4, measured with the young node's half
  // alone, thinned wherever 6 origins had an entry); and in the epoch from
  // the wake (ShareInputs::from_wake), for a node whose first request came
  // after news of the burst's first spenders (no quiet key), in a burst
  // after one spent in debt, whose few spenders open no gate: such nodes
  // passed their first requests unthinned, 40-55 admitted of a pool of 10.
  // The young node's count opens no
  // gate (as many origins as before must have spent in one burst), and the
  // kept bit opens it only at a new burst: `hotkeys` at 50 nodes (users
  // asking now and then, most of their keys quiet between requests) lost
  // 9.04% of the ideal (-1.29% without) when a young node at a new burst
  // was thinned wherever 6 origins had an entry and a key once thinned was
  // thinned at every epoch.
  // A sliding log repays no burst's overshoot (it carries only a run's
  // first period's, SlidingLog): there every node counts every live
  // node in the crowd at a new burst, young here or not, and a new burst is
  // one its entries show began within a horizon (ShareInputs::new_burst),
  // not only a quiet key. Each node asks about one request of a key a burst
  // in `coldkeys` at 200 nodes; with the crowd as the origins show (10-25),
  // each burst after the first admitted 1.2-2.5 x the limit and the run
  // +62% over the ideal (seed 1, 9 s), and most nodes asked after news of
  // the burst's first spenders had come, so the key was no longer quiet
  // (+53% with the young nodes' new burst from the entries alone; +37% with
  // every node counting every live node, but at a quiet key only).
  i128 crowd_chance = -1;  // a request's chance in the crowd, x kOne; -1: no crowd
  const bool crowd_seen = seen >= kDenseRequests;
  if (!crowd_seen) crowd_thinned_ = false;
  if (!strict_ && n >= kCrowdedNodes && crowd_seen &&
      ((crowd_thinned_ && (in.new_burst || in.from_wake)) ||
       std::int64_t{in.burst_others} + 1 >= kDenseRequests)) {
    crowd_thinned_ = true;
    const bool meets_new_burst = in.new_burst && (now < young_until_us_ || !in.repays_overshoot);
    const std::int64_t asked_crowd = n * asked_wakes_x63_ / 63;
    // A sliding log's or window's crowd of single requests
    // (ShareInputs::crowd_of_askers):
    // about as many nodes ask as the live nodes times the part of the
    // bursts this node asked in, each a request or so, and the pool over
    // them is each one's chance. Over every live node (a new burst) or
    // every origin ever seen (which grows towards every node as a run goes
    // on) the chances summed to the pool times the part that asks: at 200
    // nodes, 199 requests a key-burst from about 126 nodes, the bursts
    // averaged 9.22 of a room of 10 (`coldkeys`, 6-15 s, seed 1) and the
    // run ran -3.08% under the ideal over 60 s; +0.67% so (docs/cluster.md,
    // "A crowd of single requests, as many as ask"). A node asking two or
    // more a burst keeps the larger crowd on a log: at 100 nodes, about two
    // a node, the crowd of askers at every node took the steady state from
    // +0.67% to +2.06% (20-30 s). A sliding window counts every asker's:
    // at 200 nodes over 60 s -1.07% -> -0.96%, at 100 nodes over 30 s
    // -0.30% -> +0.09% (seed 1).
    // (crowd_thinned_ is set above: single_in_crowd() is this node's last
    // burst's count alone.)
    using Askers = ShareInputs::CrowdOfAskers;
    const bool of_askers = in.crowd_of_askers == Askers::kEveryAsker ||
                           (in.crowd_of_askers == Askers::kSingleAskers && single_in_crowd());
    const std::int64_t counted =
        of_askers ? recent : std::max({recent, seen, meets_new_burst ? n : 0});
    const std::int64_t crowd = std::max(counted, asked_crowd);
    // The crowd stands where the askers' floor put it: this node asked in
    // hardly any of the key's recent bursts (counted: share_askers_floored).
    found.askers_floored = asked_wakes_x63_ <= kLeastAskedWakesX63 && asked_crowd > counted;
    crowd_chance = std::min<i128>((pool + later) / crowd, kOne);
  }
  // A burst's share is spent only where this node asks in it: where it asked
  // in a fraction of the key's bursts, the shares of the nodes that ask sum
  // below the pool by that much (200 nodes, each asking about one request
  // of a burst: 0.75 x the limit), so raise it by as much (kMaxIdleRaiseX4).
  if (in.from_wake && asked_wakes_x63_ <= kIdleRaiseBelowX63) {
    // 63 / (the fraction, x63), the fraction no less than 4 / kMaxIdleRaiseX4.
    constexpr i128 kLeastAskedX63 = (63 * 4 + kMaxIdleRaiseX4 - 1) / kMaxIdleRaiseX4;
    found.idle_raise_capped = asked_wakes_x63_ < kLeastAskedX63;
    weight = weight * 63 / std::max<i128>(kLeastAskedX63, asked_wakes_x63_);
  }
  // A sparse asker's turn (docs/cluster.md, "Fair shares": "A sparse
  // asker's turn covers its interval"). The weights sum to one over the
  // nodes that take a share each horizon; a node asking less often takes
  // one only every so many horizons, and its part of the horizons between
  // went to nobody: 200 nodes asking a request a second each (`steady` at
  // 200 nodes: Poisson demand at twice a limit of 100/s) admitted 58 a
  // second on a sliding window, 92 on a token bucket. So where this node
  // asked nothing for a horizon or more after its last epoch ended, while
  // the key stayed busy (no wake since that epoch began: a wake's epoch
  // shares the wake's pool instead), a share below one request (its refill
  // part spendable at once: the request that opened the epoch is likely its
  // only one in it, and an accruing refill stood at nothing there) is
  // raised by the time since that epoch began, in horizons (its turn's
  // length; at most kMaxSparseRaise), up to one request: the chance its
  // request has of being admitted. Never beyond one: a crowd arriving at
  // once on a key asked now and then takes at most a request a node, as
  // sparse demand's first requests do. A node asking within a horizon of
  // its last epoch's end keeps its share as it is: dense demand's epochs
  // follow each other. A fixed window's first epoch in a new window (its
  // pool the window's as it stood at its start: ShareInputs::from_step) is
  // a turn too: a node asking once a second opens one in nearly every
  // window (`steady` at 200 nodes on the fixed window: -23.4% against the
  // ideal, -14.9% with every turn raised but those, -4.6% with those too).
  // (The last epoch's span is still epoch_end_us_ and epoch_us_ here:
  // end_epoch_at sets this one's below.)
  const TimeUs last_start_us = epoch_end_us_ - epoch_us_;
  i128 sparse_raise = 0;  // x kRaiseUnit; 0: none
  constexpr i128 kRaiseUnit = 16;
  // A wake since that epoch began ends the turn (a wake's epoch shares the
  // wake's pool), but for a pause shorter than an idle spell
  // (kIdleSpellHorizons: no burst ended). At 200 nodes a turn that
  // admitted its one request at many nodes at once overshot by a dozen;
  // the algorithm then refused nearly every request for a horizon or so,
  // the key woke, and every node's next turn, a second on, went unraised:
  // 38 admitted in the window from 5.6 s (`storm`, the sliding window, seed
  // 3, traced); smooth bursty's fewest later window there 0.37 x the limit
  // (the second after the storm), 0.64 x so (seed 1; docs/cluster.md, "A
  // sparse turn goes on through a pause").
  // On a fixed window (whole steps), a node's first epoch after a wake that
  // ended an idle spell, past the wake's own epochs (not from_wake), is a
  // turn too, covering the time since the wake: the key has been busy
  // since, and this node's part of those horizons went to nobody, while
  // the window loses at its end whatever its pool still holds. In the
  // second after the retry storm at 200 nodes (`storm`, seed 1, traced),
  // each node asking a request a second, such epochs shared the pool by
  // weights of about 1/200, unraised: 0.03-0.49 of a request, and the
  // window admitted 4-9 a 100 ms against a demand of 16-25 once the wake's
  // epochs ended. `steady` at 200 nodes, seeds 1-3: -1.64 / -1.54 /
  // -1.00% against the ideal -> -1.21 / -1.07 / -0.71%. Not on the other
  // algorithms, measured mixed there: the sliding log's `storm` at 200
  // nodes, seed 2, fewest later window 0.50 -> 0.62 x the limit but most
  // 1.41 -> 1.53 x; the sliding window's `storm` there -0.40 -> -0.76%;
  // the token bucket's `periodic` at 200 nodes -0.14 -> -0.28%
  // (docs/cluster.md, "A fixed window's turn after a wake").
  const bool turn_since_wake =
      in.whole_steps() && !in.from_wake && !no_idle_spell_since_last && woke_us_ > last_start_us;
  const bool turn_goes_on =
      woke_us_ <= last_start_us || no_idle_spell_since_last || turn_since_wake;
  // A wake's epoch is a turn too where no overshoot is repaid (a sliding
  // log's epoch from the wake at a node whose demand is dense, over
  // kLogWakeHorizons: FairShare's caller) and this node's last epoch asked
  // one request (a turn's, not a burst's), its turn raised by the time the
  // key was busy since the last epoch began over this epoch's length. At
  // 200 nodes asking a request a second each (`steady`), every node's
  // demand is made dense by the crowd of origins (kCrowdedOrigins), so an
  // overshoot the log then refused for a few horizons woke the key, and
  // the wake's epochs shared its pool by weights of about 1/185, unraised:
  // mostly 0.15-0.5 of a request each, while 36 of the 200 nodes started
  // an epoch in the first 220 ms. The log admitted 68 in the second from
  // 20.8 s, as the 96 it admitted a second before freed (seed 1, traced),
  // and ran -5.20 / -6.29 / -6.16% against the ideal (seeds 1-3); -2.01 /
  // -2.57 / -1.93% so, and at 50 nodes -1.83 / -1.58 / -3.20% -> -0.58 /
  // -0.25 / -0.65%. Not after a burst's epoch: aligned bursts every 300
  // ms at 50 nodes (a few requests a node each, the 200 ms between them a
  // pause, not an idle spell) had their wakes' epochs raised too, and ran
  // +4.35% over the ideal with a silent later window (+1.52% so, as
  // before). Nor over the quiet spell: at 200 nodes the same bursts (a
  // request a node each) raised by their whole interval ran +4.71%
  // (+3.26% so, +3.29% before). Not where an overshoot is repaid (a
  // bucket's or a fixed window's wake), measured mixed there (every wake's
  // epoch a turn, raised by its whole interval): the fixed window's
  // `steady` at 200 nodes -1.64% -> -1.21%, but its `storm` -1.75% ->
  // -2.68%; the token bucket's `storm` at 50 nodes most later window 1.15
  // -> 1.26 x, GCRA's at 200 nodes fewest 0.76 -> 0.67 x (docs/cluster.md,
  // "A log's wake is a turn too").
  const bool wake_is_turn = in.from_wake && !in.repays_overshoot && asked_last <= 1;
  if (!first_here && (!in.from_wake || wake_is_turn) && now >= young_until_us_ && turn_goes_on &&
      view.horizon_us > 0 && now - epoch_end_us_ > view.horizon_us) {
    const TimeUs epoch_length_us =
        in.from_wake ? std::max<TimeUs>(view.horizon_us, end - now) : view.horizon_us;
    // A wake's turn covers the time the key was busy since this node's last
    // epoch began: no node spent in the quiet spell the wake ended, and
    // what it left the wake's pool holds. A fixed window's turn since a
    // wake covers the time since it. Either, no longer than its epoch, is
    // no turn (a turn's raise is at least one epoch's share: elsewhere
    // the time since the last start exceeds a horizon).
    // A quiet spell held at its bound (kMaxQuietUs, reached only with
    // horizons of over 22 s) is taken for the whole time since that epoch
    // began: no turn, rather than a raise for a quiet time counted busy.
    const bool quiet_since = in.from_wake && woke_us_ > last_start_us;
    const TimeUs quiet_spell_us =
        quiet_us_ == kMaxQuietUs ? now - last_start_us : TimeUs{quiet_us_};
    const TimeUs busy_us =
        turn_since_wake ? now - woke_us_ : now - last_start_us - (quiet_since ? quiet_spell_us : 0);
    const i128 raise = kRaiseUnit * busy_us / epoch_length_us;
    if ((!in.from_wake && !turn_since_wake) || raise > kRaiseUnit) {
      found.sparse_raised = true;
      found.sparse_raise_capped = raise > kRaiseUnit * kMaxSparseRaise;
      sparse_raise = std::min<i128>(raise, kRaiseUnit * kMaxSparseRaise);
    }
  }
  // Where the refill accrues and no overshoot is repaid (a sliding window),
  // what the shares leave unspent is lost for good: the floor below and the
  // contended balance's window forms (kContendedAccruingRefills,
  // kContendedAccruingBalanceX, at nodes whose demand is not dense too).
  const bool unspent_is_lost = in.refill_accrues && !in.repays_overshoot;
  // A sparse asker's weight is at least an equal part of the origins seen
  // there. Asking about once a turn, its part of the last one to two
  // seconds' consumption is a count of a few requests: chance, not demand.
  // A node
  // refused in its last turns weighs an eighth of an equal part and its turn
  // spends nearly nothing, while the lucky ones' turns stop at one request:
  // the turns together spend below the refill, and a window never gets back
  // what no one spends (`steady` at 200 nodes, seeds 1 / 2: -2.78 / -3.79% ->
  // -1.19 / -3.18% against the ideal with the contended balance below two
  // refills, before a turn went on through a pause, above). Each turn still
  // admits at most one request; an overshoot lowers the next balance, which
  // the contended balance shares out. Not elsewhere: the log fell further
  // (-5.31 -> -6.96%, seed 1), the token bucket's most in a window rose from
  // 1.38 to 1.49 x the limit (docs/cluster.md, "A sparse turn's weight, an
  // equal part at least").
  if (sparse_raise > 0 && unspent_is_lost) {
    weight = std::max<i128>(weight, kOne / seen);
  }
  i128 share = shared * weight / kOne - spent_since_wake;
  i128 accruing = later * weight / kOne;
  // A contended balance (docs/cluster.md, "A contended balance, shared
  // over"). Where the algorithm's room frees as it is admitted (a sliding
  // log or window: it repays no overshoot), what the cluster leaves unspent
  // it never gets back, as a bucket's refill would: admitting r a period,
  // a window frees r a period and holds the limit less r as its balance. In
  // steady contention the shares' leftovers (Poisson arrivals against a
  // share that accrues over the epoch) settle that balance where it equals
  // what they leave: 5 nodes at twice a limit of 100/s (`steady`) saw a
  // balance of 5.9 at their epochs' starts, shared 2.7 a node and spent 2.0
  // of it, and ran 2.0% under the ideal on a sliding window (+0.1% with fair
  // shares off). So where this node's demand is dense and the balance is
  // below the epoch's refill (contention: the key is spent about as it
  // frees; a burst's first epoch finds its full balance; two refills where
  // the refill accrues, kContendedAccruingRefills), the balance is
  // counted kContendedBalanceX times (kContendedAccruingBalanceX where the
  // refill accrues: a window's): the balance the leftovers settle at falls
  // about as much. The shares then sum to at most the pool and that many
  // times less one the refill; an overshoot lowers the next balance, which
  // the next epoch's shares then come out of. Only once the burst has gone
  // on here for a period (this node's epochs since the key's last idle
  // spell, about a horizon each): steady contention, not a burst's later
  // epochs, whose overshoot the burst's end leaves unrepaid (a 200 ms job
  // at 20 nodes across a window's start, `periodic` from 3.9 s: +0.76% ->
  // +2.14% against the ideal with every burst's epochs counted, seed 1).
  // Or kMaxBurstEpochs of them, where a period holds more horizons (a
  // limit a minute): an epoch's extra, at most 3 refills of one horizon
  // (7 on a window), is then a small part of the period's limit. In a
  // crowd too (a crowd's chance, above, is its first request's; the share
  // is what it spends beyond): 100 nodes asking 20 a second each at twice
  // a limit of 1000/s (`nodes100`) are a crowd at nearly every epoch, and
  // left out so the window ran -5.27% against the ideal, the log -1.28%
  // (-2.12%, -1.54% counted 8 times, and -0.04% with them, seed 1; -0.47%
  // and +4.59% with fair shares off; docs/cluster.md, "A contended balance
  // in a crowd"). And where the refill accrues (a window) at a node whose
  // demand is not dense too: 20 nodes asking 10 a second each (`steady`)
  // have no dense node and no crowd, and ran -1.27% on average (seeds 1-4;
  // -0.79% so). Not on a log: a sparse node's first request passes beyond
  // its share (ask), and with the refill spendable at once the two more
  // than covered its demand (20 nodes: -0.04 / -0.39% -> +0.75 / +0.54%,
  // an overshoot a log keeps).
  // (A fixed window's first epoch in a window, from_step, repays.)
  if (!in.repays_overshoot && !in.from_wake && (dense(now) || unspent_is_lost) && balance > 0 &&
      balance < (unspent_is_lost ? kContendedAccruingRefills : 1) * refill &&
      (burst_epochs_ == kMaxBurstEpochs ||
       i128{burst_epochs_} * view.horizon_us > in.rate_period_us)) {
    const std::int64_t times = unspent_is_lost ? kContendedAccruingBalanceX : kContendedBalanceX;
    share += (times - 1) * balance * weight / kOne;
    found.contended_balance = true;
  }
  if (sparse_raise > 0 && share + accruing < kOne) {
    share = std::min(kOne, (share + accruing) * sparse_raise / kRaiseUnit);
    accruing = 0;
  }
  credit_ = share + dither;
  if (crowd_chance >= 0) {
    // The share's dither already admits a request with its size as the
    // chance: the draw keeps the first request beyond it only with what
    // tops that up to the crowd's chance.
    const i128 own_chance = std::clamp<i128>(share, 0, kOne);
    const i128 top_up =
        crowd_chance > own_chance ? (crowd_chance - own_chance) * kOne / (kOne - own_chance) : 0;
    const std::int64_t draw = spread_drawn(view, in, Draw::kCrowd, now);
    if (draw < top_up) {
      // Kept even where this node's demand was dense lately, at its first
      // request of the burst, if it asked at most one in the last burst it
      // asked in and the algorithm repays an overshoot: `coldkeys`' keys
      // are dense at every node for a minute
      // after their crowded start, and without the pass a node asking
      // about one request a burst had its share alone, the weights' (who
      // spent, not who asks): GCRA at 200 nodes, seed 1, lost 637 tokens
      // at the cap from the 6th second to the 20th without dense nodes,
      // 221 with them (measured with the crowd's chance as a floor under
      // the share rather than a draw; 343 as shipped). A node asking many
      // spends its share (`aligned`, 10 a burst: with the pass at every
      // dense node ctest's run at 200 nodes ended 1.89% off the ideal,
      // bound 1%; `periodic` at 200 nodes, about 5 a job, with the pass at
      // each epoch's first request where the last epoch asked at most one:
      // the token bucket +2.00% over 123 s, +0.35% with the pass held to
      // the burst's first), and a log keeps any overshoot (`coldkeys` at
      // 50 nodes on the log, the floor at dense nodes too: +16.5%).
      crowd_pass_ = in.repays_overshoot && asked_in_burst_ == 0 && asked_last_burst_ <= 1 ? 1 : 0;
    } else {
      strict_ = true;
      found.pass_thinned = true;
    }
  }
  accruing_ = accruing;
  end_epoch_at(end);
  return found;
}

void FairShare::carry_forgiven_debt(const ShareView& view, const ShareInputs& in, TimeUs now,
                                    EpochStart& found) {
  stepwise_ = in.carries_debt && in.refill_step_us > 0;
  if (!in.carries_debt) {
    debt_ = 0;
    burst_balance_ = -1;
    burst_woke_us_ = 0;
    return;
  }
  // A key new to the cluster (all that was ever consumed of it and what is
  // left fit its capacity and an epoch's refill): its first burst is one
  // too, woken at this node's first epoch, from nothing consumed (no wake
  // was noted, so the sums at the wake are still 0). Its
  // overshoot is the largest of a job's (a probe's, then the first news
  // arriving): not carried, `periodic` ended +0.00..+0.84% over the ideal
  // at 20 nodes (seeds 1-4) where it now ends -0.14..+0.42% (docs/
  // cluster.md, "A forgiven debt, carried").
  if (woke_us_ == 0 && epoch_us_ == 0 &&
      i128{in.headroom} + in.all_consumed <=
          i128{in.capacity} + std::max<std::int64_t>(0, in.refill)) {
    woke_us_ = now;
  }
  // Where the algorithm refills in steps (a fixed window), a debt is held
  // in the wake's step only: the next step starts afresh from what the last
  // one overspent (a fixed window carries its count beyond the limit, and
  // repays it), and would take it again at each step of a burst. A credit
  // is held through the burst's later steps where the algorithm's room
  // comes back whole (ShareInputs::whole_steps): what it admitted beyond the
  // wake's window the window's count carries into the next as a debt, and
  // repaid there the credit was lost, so the next step shares it out again,
  // and so on until the burst's last, which the idle window forgives
  // (docs/cluster.md, "A credit through a burst's windows"). Not on a
  // sliding window, which carries its overshoot otherwise (`periodic`
  // across a window's start at 200 nodes, 120 s: +2.70% -> +11.31%). A
  // sliding window's debt is held in the wake's step and the next: what
  // the share held back in the wake's window, the next window's estimate
  // (the wake's window's count, weighted by what is left of it) would give
  // back (docs/cluster.md, "A sliding window's debt, held a window on").
  // Nor is a balance noted after the wake's step: it lost what the last
  // left, and the balance at the wake cannot be told.
  const bool wake_step = woke_us_ == 0 || !stepwise_ || steps_between(in, woke_us_, now) == 0;
  // A debt is carried by the first epoch after the wake, within a horizon
  // of it; where the algorithm refills in steps, whenever it comes (a node
  // whose first request came late in the burst).
  const bool after_horizon = now >= woke_us_ + view.horizon_us;
  if (woke_us_ == 0 || (after_horizon && !stepwise_)) return;
  // What every node consumed since the wake, as this node heard of it.
  const i128 spent_since_wake = since(in.all_consumed, all_at_wake_);
  if (burst_woke_us_ > 0) {
    const std::int64_t most = std::min(in.capacity * kMaxDebtX8 / 8, kMaxCarriedUnits);
    const std::int64_t most_credit =
        in.whole_steps() ? std::min(in.capacity * kMaxStepCreditX8 / 8, kMaxCarriedUnits) : most;
    const std::int64_t debt = forgiven_debt(view, in, spent_since_wake);
    debt_ = static_cast<std::int32_t>(std::clamp(debt, -most_credit, most));
    found.debt_carried = debt_ > 0;
    found.credit_carried = debt_ < 0;
    found.debt_capped = debt > most || debt < -most_credit;
    burst_balance_ = -1;
    burst_woke_us_ = 0;
  }
  // The balance as it stood at the wake: what is left plus what every node
  // spent since (what refilled since, within a horizon, is not taken off: a
  // bucket at its cap when the news came held some of it back, and a
  // balance taken too low would make the next debt too large).
  if (burst_balance_ < 0 && wake_step && !after_horizon) {
    burst_balance_ = static_cast<std::int64_t>(
        std::clamp<i128>(i128{in.headroom} - debt_ + spent_since_wake, 0,
                         std::numeric_limits<std::int64_t>::max()));
  }
  if (!wake_step) {  // (the algorithm refills in steps)
    const bool held =
        debt_ < 0 ? in.whole_steps() : !in.whole_steps() && steps_between(in, woke_us_, now) <= 1;
    if (!held) debt_ = 0;
  }
}

std::int64_t FairShare::forgiven_debt(const ShareView& view, const ShareInputs& in,
                                      i128 spent_since_wake) const {
  // With P the balance shared out at the burst's wake (less the debt
  // carried into it, o) and C what every node consumed from then to this
  // wake, one bucket admits P + o and what it refilled by the burst's end,
  // rounded down (whole requests: the ideal admits 119 of a 200 ms burst
  // at 100/s from 100, not 120; smooth bursty's request ahead is in its
  // balance and its cap: Limiter::share_admits). What
  // the cluster consumed beyond that, the idle spell forgave at the cap,
  // and it is the debt, with the o this burst repaid: C - P - floor(burst).
  // Forgiven only where the idle spell filled the bucket: at the wake it
  // stood at its cap (then, if anything was overspent, the idle refill
  // exceeded the cap, and the ideal's bucket stood there too). A quiet
  // spell that did not is a debt being repaid while demand may go on,
  // refused (after a partition, 5 nodes: the silence that repaid 8 s of
  // overspend looked like the end of a burst, and a debt was carried over
  // what was already repaid). The burst's refill and the idle spell's
  // rounded down apart lost a token where the bucket stood at its cap only
  // by the burst's fraction and the idle refill's (`coldkeys`, 5 nodes:
  // 9.9 s of bursts and 0.9 s idle at 10/s carried a debt of 1 a key a
  // second that was none: -1.13% against the ideal's +0.16%).
  if (i128{in.headroom} + spent_since_wake < in.capacity) return 0;
  if (in.refill_step_us > 0 && steps_between(in, last_asked_us_, woke_us_) < in.forget_steps) {
    return 0;
  }
  const i128 burst_refill = refilled(in, burst_woke_us_, last_asked_us_);
  const i128 over = i128{burst_balance_} - burst_refill;
  // What the idle spell forgave (or lost, a shortfall), counted with the
  // refills' fractions where the refill is continuous. One bucket, from the
  // wake's balance P, admits P and the burst's refill rounded down, and
  // holds at the next wake min(cap, A), A what is left of the refill since
  // the burst's wake. The burst consumed `over` more (less, if negative), so
  // its bucket holds min(cap, A - over) there: the idle spell repaid
  // min(cap, A) - min(cap, A - over) of it, and forgave (or lost) the rest.
  // Rounded down apart, as before, a room of 1.99 left and an idle refill
  // of 8.99 into a cap of 10 lost nothing, where one bucket lost 0.98, and
  // a debt of 1 whose bucket came back to 8.98 was carried, though the
  // refill repaid it (`coldkeys` at 5 nodes, GCRA, 60 s: -0.60% against the
  // ideal, 0.8% lost at the cap, every loss below a unit; docs/cluster.md,
  // "A burst's carry, in fractions"). A window's shortfall is the same in
  // whole windows; its debt is its count beyond the limit, which its next
  // window repays and an idle window forgives whole (above: the steps it
  // waited for), so nothing of it counts as repaid.
  const i128 cap = units(in.capacity);
  const i128 held = refilled_units(in, burst_woke_us_, woke_us_) - units(burst_refill);
  const i128 repaid = in.refill_step_us > 0 && over > 0
                          ? 0
                          : std::min(cap, held) - std::min(cap, held - units(over));
  const i128 carry = units(over) - repaid;
  // A fraction as a whole unit with its size as the probability, as a
  // share's (start_epoch): the carries sum to what the idle spells forgave.
  const i128 drawn = spread_drawn(view, in, Draw::kCarry, woke_us_);
  const i128 magnitude = carry < 0 ? -carry : carry;
  const i128 whole = (magnitude >> kFractionBits) + (drawn < (magnitude & (units(1) - 1)) ? 1 : 0);
  const i128 debt = carry < 0 ? -whole : whole;
  if (debt < 0) {
    // A lost shortfall: the burst left room while this node's share
    // refused a request in it (else demand, not the share, left it), and
    // the idle spell's refill took the bucket past its cap, so that room
    // is lost as far as it went beyond: one bucket, spent to zero by the
    // same demand, would have admitted it. Credited to the next burst, as
    // a debt is carried (`periodic` at 200 nodes, 123 s, the token bucket:
    // -1.12..+0.03% over seeds 1-4 without, each job's shortfall lost
    // while its overshoot was repaid).
    if (!burst_refused_) return 0;
    // In 64 bits; the caller holds it at its bound and counts that.
    return static_cast<std::int64_t>(
        std::max<i128>(debt, std::numeric_limits<std::int64_t>::min() + 1));
  }
  // Never more than the balance there is.
  return static_cast<std::int64_t>(
      std::clamp<i128>(debt, 0, std::max<std::int64_t>(0, in.headroom)));
}

__int128 FairShare::accrued(TimeUs now) const {
  const TimeUs left_us = epoch_end_us_ - now;
  if (accruing_ == 0 || left_us <= 0) return accruing_;
  if (left_us >= epoch_us_) return 0;
  const TimeUs elapsed_us = epoch_us_ - left_us;  // below 2^25
  // In 64 bits where the product fits (a refill below 2^22 units an epoch,
  // every limit below millions a second): on the request path, where the
  // credit is short (BM_FairShareAskAtTheMargin).
  constexpr i128 kFitsIn64 = i128{1} << 38;
  if (accruing_ < kFitsIn64) {
    return static_cast<std::int64_t>(accruing_) * elapsed_us / static_cast<std::int64_t>(epoch_us_);
  }
  return accruing_ * elapsed_us / epoch_us_;
}

FairShare::Answer FairShare::ask(std::int64_t cost, TimeUs now) const {
  if (unlimited_ || credit_ >= units(cost) || credit_ + accrued(now) >= units(cost)) {
    return Answer::kCredit;
  }
  // Sparse demand (Poisson arrivals, a request per node now and then) does
  // not spend many nodes' shares at once: what the share adds there is
  // lost statistical multiplexing (a refusal here while another node's
  // share goes unused). Such a node keeps one request per epoch; a node
  // that saw dense demand on the key, or whose epoch is strict (a probe of a
  // rule whose demand is not sparse, a key first met here among many new at
  // once, or a crowd's first request a draw did not keep), does not. Two
  // where the key's last kDisprovingBurstRun bursts each spent at most a
  // quarter of the pool (small_bursts_): users asking now and then, whose
  // second request within an epoch was refused with the bucket near its
  // cap (`hotkeys` at 50 nodes, seeds 1 / 2: -0.78 / -0.81% -> -0.69 /
  // -0.72%; docs/cluster.md, "Two passes where bursts are small"). A
  // crowd arriving on such a key passes two a node in its first burst,
  // which then breaks the run.
  const bool passes = asked_ == 0 || (asked_ == 1 && small_burst_run());
  if (passes && ((!dense(now) && !strict_) || crowd_pass_)) return Answer::kSparse;
  return Answer::kRefused;
}

std::uint32_t freed_fraction(std::int64_t wait_us, std::int64_t limit, std::int64_t period_us) {
  if (wait_us <= 0 || limit <= 0 || period_us <= 0) return 0;
  // In a unit's time times the limit: the period.
  const i128 wait_x_limit = i128{wait_us} * limit;
  if (wait_x_limit >= period_us) return 0;
  return static_cast<std::uint32_t>(((period_us - wait_x_limit) << FairShare::kFractionBits) /
                                    period_us);
}

}  // namespace rlimit::core
