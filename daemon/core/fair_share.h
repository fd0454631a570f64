// Fair shares (docs/cluster.md, "Fair shares"): when demand on one key
// arrives at many nodes at once, each would spend its whole balance before it
// hears of the others, and the cluster would admit N times the balance. So a
// node that has reason to believe others spend on a key spends, per epoch of
// one news horizon (the time a change takes to reach every node), only its
// share of the balance plus what refills in the epoch; by the next epoch the
// others' spending has arrived and lowered the balance it shares out.
//
// The share, fixed at each epoch's start, from the key's ledger entries:
// - no other origin consumed from the key: the whole balance, if this node
//   consumed from it before (a key one node uses keeps its burst) or probed
//   it before; otherwise (a key new here) a probe of one epoch that shares
//   it as many ways as nodes are likely to spend on it (ShareInputs::
//   spenders) and unlocks if no news of another node comes;
// - others did: 7/8 of this node's part of the key's recent consumption
//   (demand proportional, as DRL) plus 1/8 of an equal share among the
//   origins seen, so no origin starves and one view's weights sum to one;
//   or among as many ways as this node's probe shared the key, if more: a
//   key met by many nodes at once leaves many of them without an entry
//   after its probe (their draw admitted nothing), spending still, and an
//   equal part each of the origins seen would sum above one
//   (docs/cluster.md, "Fair shares": "Nodes whose probe admitted
//   nothing"); while the key is young here (news of its spenders may still
//   be arriving), scaled to every live node.
// A burst's late starters: a key *wakes* when it changes after a quiet spell
// of at least a news horizon (the ledger tells the share: note_wake), when
// news of all it consumed before has reached every node. For a horizon after
// that, a node's share is its weight of the pool as it stood at the wake
// (what is left plus what every node spent since, plus what the algorithm
// frees by the horizon's end), less what this node spent since, and its
// epoch ends with that horizon; not its weight of what the nodes that
// started first have left, which a bucket's cap or a window's passing would
// lose for good (docs/cluster.md, "Fair shares": "A burst's pool"). The
// Limiter asks for it (ShareInputs::from_wake) where the algorithm repays
// an overspend (over kFixedWindowWakeHorizons for a fixed window where this
// node's demand on the key is dense: its pool stands until its window
// ends); and for a sliding log, which repays nothing, over two
// horizons (kLogWakeHorizons) where this node's demand on the key is dense
// or it is one of a crowd of single requests (single_in_crowd):
// every node's part of the burst's room in one epoch, and no second epoch
// in the burst to share again what the first ones spent unheard
// (docs/cluster.md, "Fair shares": "A log's burst in one epoch").
// A log's burst error is carried (ShareInputs::carry_burst_error): what the
// cluster consumed between two wakes beyond the pool this node shared at the
// first of them is taken from the next burst's pool (less what the log
// itself holds back of it: ShareInputs::algorithm_held), and a shortfall
// added to it where this node's share refused a request in that burst (room
// the cluster left unspent while demand asked for it). Every node sees the same
// consumption once the quiet spell's news has arrived, so a burst's rounding
// no longer adds up over a run (docs/cluster.md, "A log's burst error,
// carried").
// A crowded burst: where each node asks only a few requests of a burst, its
// demand looks sparse (below), and each keeps its first request beyond its
// share; 200 nodes doing so at once admitted over four times a burst's
// pool (bursts every 300 ms). So at a key's wake, a burst before it that
// consumed kCrowdedPools times the pool at its own wake (and kDenseRequests
// beyond) makes this node's demand on the key dense, as its own dense
// demand would (docs/cluster.md, "Fair shares": "Crowded bursts"); and so,
// before any burst overshoots, does an epoch that sees at least as many
// origins spending on the key at about the same time (kCrowdedWithinUs) as
// its pool holds requests (kCrowdedOrigins). And a burst that spent at most
// an eighth of its pool disproves a crowd: the key's crowd marks go
// (kDisprovedCrowdPools; docs/cluster.md, "A crowd disproved"); so do four
// bursts in a row that each spent at most a quarter of the pool this node
// last saw (kDisprovingBurstRun, for nodes that noted no pool at the wakes:
// "A crowd disproved, by a run"), and such a key keeps two sparse requests
// an epoch beyond the share, not one (ask).
// A forgiven debt, carried: an algorithm that repays an overspend as a debt
// (the bucket-like ones) repays it only while demand lasts; a burst that
// ends in debt leaves it to the idle spell, whose refill fills the bucket to
// its cap all the same, and one bucket would have admitted that much less.
// So at the next wake, what the burst consumed beyond what one bucket would
// have admitted (the balance at its wake and its refill, in whole requests,
// until its end: the last request this node was asked in it, or the newest
// news of it less a horizon, if later; the newest news itself where news
// carries its age, ShareInputs::repays_overshoot) is carried: this node shares out its
// balance less that debt until the next wake (ShareInputs::carries_debt;
// docs/cluster.md, "Fair shares": "A forgiven debt, carried"). A key new to
// the cluster carries its first burst's alike. The mirror, a lost shortfall:
// a burst that left room while this node's share refused a request in it,
// room the idle refill then lost at the cap, is credited to the next burst
// (shared out on top of the balance), since one bucket would have admitted
// it ("A lost shortfall, credited"). Where the refill is continuous, either
// counts the refills' fractions and is what the idle spell did not repay
// (a fraction carried as a whole unit with its size as the chance: "A
// burst's carry, in fractions"). Either is at most a quarter of the
// capacity. The windows carry theirs alike, their refill counted in
// windows (ShareInputs::refill_step_us: a fixed window's whole at each
// start, a sliding window's at its rate after the window its burst woke
// in): a fixed window's overspend an idle window forgives, a sliding
// window's in a burst into an emptied window nothing repays (docs/
// cluster.md, "A fixed window's debt", "A sliding window's debt", "A
// sliding window's burst across a window's start"); a fixed window's
// credit is held through the burst's windows, which carry what it admits
// beyond their limit ("A credit through a burst's windows"), and a sliding
// window's debt a window on, whose estimate would give it back ("A sliding
// window's debt, held a window on").
// Every share gets a random fraction of a request added (from a hash of the
// key, the node and the time: deterministic), so a share below one request
// admits one with that probability and many nodes with tiny shares admit
// about their sum, not all or none.
//
// Pure and deterministic; the Limiter calls it on the request path only when
// the algorithm admits (a compare and a subtract); epochs start at most once
// per horizon per key. Not thread-safe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "core/time.h"

namespace rlimit::core {

// What the cluster tells the Limiter each gossip round.
struct ShareView {
  std::uint32_t live_nodes = 1;  // this node and its live peers; 1: no gate
  TimeUs horizon_us = 0;         // an epoch (a probe too): gossip interval x (rounds + 1)
  // Keys with few origins are routed to their owners (docs/cluster.md,
  // "Owner routing"): news of a key reaches only the nodes that spent on it,
  // so a probe that admitted nothing proves nothing by hearing nothing.
  bool routed = false;
  // Draws spread over the nodes (docs/cluster.md, "Fair shares": "Draws
  // spread over the nodes"): this node's place among the live nodes by id
  // (0 to live_nodes - 1), and a seed every node of the cluster shares.
  std::uint32_t rank = 0;
  std::uint64_t draw_seed = 0;
};

// What the Limiter knows of a key when an epoch starts.
struct ShareInputs {
  std::int64_t headroom = 0;  // units the algorithm would admit now (its balance)
  std::int64_t refill = 0;    // units it regains by the epoch's end (rounded down)
  // And the fraction of a unit beyond `refill`, in 2^-kFractionBits: a token
  // bucket's (it keeps fractions of a token), GCRA's and the leaky
  // bucket's (freed_fraction(): the part of their next unit's time gone).
  std::uint32_t refill_fraction = 0;
  // The refill becomes spendable as the epoch goes by (in proportion to the
  // time elapsed), not all at its start: for an algorithm that frees room
  // continuously and does not repay an early spend (the sliding window: room
  // that frees at the epoch's end, spent at its start by a burst that stops
  // in between, is an excess one limiter would not have admitted, and no
  // debt repays it). A token bucket's refill is spendable at once: what it
  // spends early is a debt it repays.
  bool refill_accrues = false;
  // How many nodes are likely to spend on a key new here (the rule's keys
  // are usually spent on by that many; all live nodes while unknown), whose
  // probe shares its balance that many ways; 0: none is probed (each of the
  // rule's keys is spent on by one node: nothing says others spend on a new
  // one, as with sticky users).
  std::uint32_t spenders = 0;
  // The rule's keys see sparse demand (no node asked for one of them many
  // times in an epoch lately, and this node did not meet many of them new
  // at once): a probe keeps the first request of an epoch.
  bool sparse_rule = false;
  std::uint32_t others = 0;        // other origins with an entry (not this node's incarnations)
  // Of them, those spending at about the same time, for the crowded-origins
  // check: their newest consumption within kCrowdedWithinUs of the key's
  // newest, or, within a horizon of a wake, of the last burst's newest
  // (Ledger::recent_others).
  std::uint32_t recent_others = 0;
  // Of them, those spending in one burst, for the thinning of a crowd's
  // first requests: the same within kBurstHorizons news horizons.
  std::uint32_t burst_others = 0;
  bool has_own = false;            // this node consumed from the key (within retention)
  // This epoch starts a new burst on the key (a crowd's first requests,
  // thinned): its entries have not grown for a news horizon (Ledger::quiet:
  // its next growth is a wake), and news of the last burst has reached every
  // node; or, where the algorithm repays no overshoot (below), the newest
  // burst its entries show began within a horizon (Ledger::burst_woke_us):
  // news of the burst's first spenders came before this node's first
  // request in it.
  bool new_burst = false;
  // The algorithm repays what it admits beyond its pool as a debt (the
  // buckets, GCRA, the fixed window); a sliding log or window frees what it
  // admitted a period later whatever the cluster admitted meanwhile: a
  // burst's overshoot stays one (the Limiter's remembers_when; a log
  // carries only its runs' first periods', SlidingLog). Such an
  // algorithm's news carries when its consumption happened (its age:
  // Limiter::key_news, for the same remembers_when), so the ledger's newest
  // consumption is when it happened, not when it was heard of: a burst's
  // end is that newest consumption (note_wake), not a horizon before it
  // (docs/cluster.md, "A burst's end, where news carries its age").
  bool repays_overshoot = true;
  // A crowd's chance counts the nodes that ask (the Limiter's choice: a
  // sliding log's single askers, a sliding window's every asker): where it
  // does, the crowd a node's first request is thinned by is the live nodes
  // times the part of the key's bursts it asked in (or the recent origins,
  // if more), not every live node at a new burst nor every origin ever seen
  // (start_epoch; docs/cluster.md, "A crowd of single requests, as many as
  // ask"). kSingleAskers: only where this node asked at most
  // kSingleInCrowdMostAsked requests of the last burst it asked in.
  enum class CrowdOfAskers : std::uint8_t { kNone, kSingleAskers, kEveryAsker };
  CrowdOfAskers crowd_of_askers = CrowdOfAskers::kNone;
  std::uint64_t own_consumed = 0;  // this node's entries (every incarnation)
  std::uint64_t all_consumed = 0;  // every entry's sum
  std::uint64_t key_seed = 0;      // a hash of the key, the same at every node (its draws)
  // The nodes' draws are spread over them (docs/cluster.md, "Draws spread
  // over the nodes"), or drawn from `dither_seed`, a hash of the key and
  // the node, independently: the sliding log's, kept as they were (bursts
  // every 300 ms at 50 nodes, seeds 1-6: its fewest later window below half
  // the ideal's rate in 3 runs spread, 0.07 at seed 1, and in 1 as before;
  // independent draws from another hash, seeds 1-8: in 4, 0.09 at seed 1;
  // a noisy figure either way, not traced further).
  bool spread_draws = true;
  std::uint64_t dither_seed = 0;
  // Share the pool as it stood when the key woke (wake_end_us() > now), and
  // end the epoch at `epoch_end_us`, the wake's horizon's end; `refill` is
  // then what the algorithm frees by that end. Without from_wake the epoch
  // ends at `epoch_end_us` too where it is set (> now: a horizon on, or
  // sooner where a log starts freeing, kLogEpochCutFrom), else a horizon on.
  bool from_wake = false;
  TimeUs epoch_end_us = 0;
  // Without from_wake: share the pool as it stood at the start of the
  // current step (whole_steps: a fixed window's limit, less the debt) where
  // this epoch is this node's first in a step the key's burst went on
  // into (FairShare::first_in_new_step; the Limiter's choice, where demand
  // here is dense): news of what others spent in it since comes late, and
  // all shared one pool.
  bool from_step = false;
  // With from_wake: take the last burst's error from the pool (above), and
  // note the pool shared, for the next wake.
  bool carry_burst_error = false;
  // With carry_burst_error: what the algorithm itself holds back now, in the
  // headroom, to repay an overshoot it carried (a sliding log's run's first
  // period: SlidingLog::held_units). The part of the last burst's excess
  // that it repays already; the burst error takes only the rest (the two
  // together repaid a job's excess twice: docs/cluster.md, "A log's
  // overshoot, repaid once").
  std::int64_t algorithm_held = 0;
  // This node met many of the rule's keys new at once while it knew nothing
  // of how many nodes spend on them (the Limiter's RuleShares::
  // crowded_start): with at least kCrowdedNodes live nodes and a pool of
  // fewer requests than live nodes, a key first met here that others
  // already spend on keeps no first request beyond the share either, and
  // that key, or a strict probe's, is made crowded (make_crowded): most
  // likely this node is one of many meeting it at once (docs/cluster.md,
  // "Keys new at once").
  bool crowded_start = false;
  // The algorithm repays an overspend as a debt and refills continuously up
  // to a cap (the bucket-like ones): carry the debt an idle spell forgave
  // (FairShare, "A forgiven debt"). Its nominal refill, `rate_limit` per
  // `rate_period_us` (> 0), up to `capacity`.
  bool carries_debt = false;
  std::int64_t rate_limit = 0;
  std::int64_t rate_period_us = 1;
  std::int64_t capacity = 0;
  // Or it refills in steps: `rate_limit` whole at the start of each step of
  // this length (steps at its multiples: a fixed window's windows, whose
  // count beyond the limit an idle window forgives as a cap does); 0:
  // continuously. A sliding window's steps (forget_steps 2) are its
  // windows too, but it frees at the rate from the end of the window a
  // burst woke in, as that window's weight falls: a burst that crosses a
  // window's start gets only that much back, not a whole window.
  TimeUs refill_step_us = 0;
  // With steps: how many steps must start after a burst's end before the
  // algorithm holds nothing of it (a fixed window 1; a sliding window 2,
  // its previous window still weighs), so that an overspend is forgiven.
  int forget_steps = 1;

  // The algorithm's room comes back whole at each step's start (a fixed
  // window): a step's count beyond the limit is carried into the next as a
  // debt, and nothing of the last step weighs on the next one's pool.
  bool whole_steps() const { return refill_step_us > 0 && forget_steps == 1; }
};

class FairShare {
 public:
  // How long consumption is weighed for a share: the last one to two of these.
  static constexpr TimeUs kWeightWindowUs = 2'000'000;
  // Requests in one epoch that make a node's demand on the key dense, and
  // how long it then stays so.
  static constexpr std::uint32_t kDenseRequests = 6;
  // Where the count of an epoch's requests stops (it is read as 0 or as
  // at least kDenseRequests only).
  static constexpr std::uint32_t kMaxAsked = 7;
  static_assert(kDenseRequests <= kMaxAsked);
  // The most ways a probe is remembered to have shared a key: above the
  // largest [cluster] max_members (config.cc asserts it), so never reached.
  static constexpr std::uint32_t kMaxProbeWays = (1u << 17) - 1;
  // Spans of an epoch's length after its end that enter_span() tells apart;
  // later ones count as the last (a key refused that long is at its limit).
  static constexpr TimeUs kMaxPastSpan = 63;
  static constexpr TimeUs kDenseMemoryUs = 60'000'000;
  // A burst that consumed this many times the pool at its wake (and
  // kDenseRequests beyond it) was crowded: demand on the key is dense.
  static constexpr int kCrowdedPools = 3;
  // Crowded origins: an epoch that sees at least kCrowdedOriginsPerPool
  // times as many origins spending on the key as its pool holds requests,
  // and at least kCrowdedOrigins, makes demand on the key dense: their first
  // requests alone, each kept beyond a share as sparse demand's is, would
  // take the whole pool at once (200 nodes with 300 ms bursts of 3 requests
  // each: a later window 1.71 x the limit, then 0.01 x). The floor is set by
  // measurement: fewer origins are left to the crowded-burst check at the
  // next wake (without it, 20 nodes on `coldkeys`, whose pools hold 1 or 2
  // late in a burst, turned dense at once: -0.83% -> -1.13%). The factor was
  // kCrowdedPools (3) until a job on 200 nodes every 5 s (`periodic`, 5
  // requests a node a job against a pool of 120) admitted +30% over the
  // ideal, its 200 origins short of 3 pools (docs/cluster.md, "Crowded
  // origins").
  static constexpr std::uint32_t kCrowdedOrigins = 36;
  static constexpr std::uint32_t kCrowdedOriginsPerPool = 1;
  // The origins counted for that check are those whose newest consumption
  // lies within this of the key's newest: at about the same time, as a
  // burst's are. Every origin with an entry was counted before: 50 nodes
  // asked now and then by 1000 Zipf users (`hotkeys`) found most keys
  // crowded (50 origins against pools of 20), kept no first request beyond
  // their thin shares, and a bucket at its cap lost the refill the idle
  // shares left: -15.6% against the ideal; -1.24% with this (1 s and 2 s
  // measured alike; docs/cluster.md, "Crowded origins are recent ones").
  static constexpr TimeUs kCrowdedWithinUs = 1'000'000;
  // A crowd's first requests are thinned (start_epoch) where at least
  // kDenseRequests origins spent on the key within this many news horizons
  // of each other: in one burst. Users asking now and then at 50 nodes
  // (`hotkeys`), whose recent origins spread over a second, keep their
  // first requests: counting those within kCrowdedWithinUs, their hot users'
  // passes were thinned, their shares went unspent and the run lost 7.45%
  // of the ideal (-1.24% without the thinning); within 2 horizons, -1.61%;
  // within 1, -1.29%.
  static constexpr int kBurstHorizons = 1;
  // Keys new at once (ShareInputs::crowded_start): the fewest live nodes
  // taken for a crowd (docs/cluster.md, "Keys new at once"). Below, a busy
  // node meeting many users new at once is more likely than a crowd: 40
  // nodes, each user's requests on 4 of them (`AccuracyTest.
  // OwnerRoutingUnderChurnLosesNoConsumption`), with a floor of 20 made
  // those keys crowded, gossiped 249,156 entries (+18% packets; measured
  // while keys crowded by their bursts were gossiped too) and ended -0.74%
  // (-0.19% before; -0.49% with 50: the strict probes' part). At 50 nodes `coldkeys`'
  // first second admitted 4.4 x the limit without it, 1.24 x with it.
  static constexpr std::int64_t kCrowdedNodes = 50;
  // The most a node's share of a burst's pool is raised for the bursts in
  // which it asks nothing (its share goes unspent there): 1 / the share of
  // the key's wakes in which it asked, at most this (docs/cluster.md, "Idle
  // shares"). A burst that finds every node asking admits at most this
  // times its pool.
  static constexpr int kMaxIdleRaiseX4 = 6;  // 1.5
  // Raised only where this node asked in at most 3/4 of the wakes (x63):
  // a node asking in nearly every burst (20 nodes on `coldkeys`, 10
  // requests each) misses one now and then by chance, and a raise there
  // took the run from +0.89% to +1.00% (seed 2). Only requests the
  // algorithm admitted are counted (count()): a node whose view of the
  // balance refused a whole burst counts as not asking in it.
  static constexpr std::uint32_t kIdleRaiseBelowX63 = 47;
  // The most a sparse asker's share is raised (start_epoch: by the time
  // since its last epoch began, in news horizons): a node asking a request
  // a second at 200 nodes (horizons of 100 ms) takes about 11; the share
  // raised is at most one request whatever the bound. The bound holds the
  // chance of a node long idle on a busy key (whose turn's length says
  // little of what the others did meanwhile); 64 measured alike
  // (docs/cluster.md, "A sparse asker's turn covers its interval").
  static constexpr std::int64_t kMaxSparseRaise = 16;
  // A contended balance (start_epoch) is shared this many times over where
  // the algorithm's room frees as it is admitted (a sliding log or window):
  // what such a cluster leaves unspent it never gets back, so in steady
  // contention it settles where the balance its shares leave equals the
  // rate it loses, and counting that balance this many times settles it
  // about this much lower. At most this less one times the epoch's refill
  // beyond the pool an epoch spends, and only once a burst has gone on for
  // a period (docs/cluster.md, "A contended balance, shared over"; 2 and 8
  // measured too, before the period's wait).
  static constexpr std::int64_t kContendedBalanceX = 4;
  // And this many times where the refill accrues over the epoch (a sliding
  // window: ShareInputs::refill_accrues): a request early in an epoch finds
  // less of the share, and more of it is left unspent. 8 measured better
  // on the window at 5-100 nodes and in storms, the log worse (its refill
  // is spendable at once; docs/cluster.md, "A contended balance, counted
  // 8 times where the refill accrues"). There whether or not this node's
  // demand is dense.
  static constexpr std::int64_t kContendedAccruingBalanceX = 8;
  // And there the balance is taken for a contended one below this many
  // epochs' refills, not one: an accruing share left unspent at one epoch's
  // end is in the next one's balance on top of what the cluster's
  // leftovers hold, so a window spent about as it frees starts its epochs
  // on up to two refills (`steady` at 200 nodes, horizons of 10 requests,
  // seed 1: contended balances at 1,524 epochs below one refill, 2,592
  // below two, 2,595 below a hundred; seeds 1 / 2: -6.22 / -5.92% ->
  // -2.78 / -3.79% against the ideal; docs/cluster.md, "A contended
  // balance where the refill accrues: below two refills"). Not on a log,
  // whose refill is spendable at once (seed 1: 50 nodes -0.58 -> -1.15%,
  // 200 nodes -5.31 -> -12.78%).
  static constexpr std::int64_t kContendedAccruingRefills = 2;
  // A burst has gone on for a period here once this node started as many
  // epochs in it as a period holds horizons, or this many (6 bits; a period
  // of more horizons, a limit a minute: start_epoch).
  static constexpr std::uint32_t kMaxBurstEpochs = 63;
  // A crowd of single requests (single_in_crowd): this node asked at most
  // this many requests of the last burst it asked in. At 100 nodes on
  // `coldkeys`, each asking a key about twice a burst and sitting near the
  // ideal already, the wake's pool at every thinned node took the run from
  // +1.55% to +2.89% over 30 s (seed 1); at most one, +1.90%.
  static constexpr std::uint32_t kSingleInCrowdMostAsked = 1;
  // The quiet spell, in news horizons, that ends a burst for that count.
  static constexpr int kIdleSpellHorizons = 3;
  // The most debt carried (A forgiven debt), in eighths of the capacity: a
  // burst's overspend at every node at once is a few requests of a pool
  // (`periodic` at 200 nodes: up to 10 of the ideal's 119); a partition's, which an
  // idle spell after the heal forgives, may be many bursts, and carrying it
  // all would silence the key's next bursts.
  static constexpr int kMaxDebtX8 = 2;
  // A fixed window's credit (ShareInputs::whole_steps), in eighths of its
  // limit: what a credit adds is what a window admits beyond its limit, so
  // half a limit keeps a later window within 1.5 x. A quarter lost the
  // rest of a cold start's shortfall: a job across a window's start at 200
  // nodes (`periodic`, jobs from 3.9 s) admits 160-175 of 200 at the key's
  // first, and that run ended -0.86% under the ideal over 120 s, one run
  // of four beyond 1% (docs/cluster.md, "A fixed window's credit, half a
  // limit").
  static constexpr int kMaxStepCreditX8 = 4;
  // And at most this many units, whatever the capacity (debt() is 32 bits).
  static constexpr std::int64_t kMaxCarriedUnits = std::numeric_limits<std::int32_t>::max();
  // A wake whose news until the next wake held at most this many units was
  // a straggler's (a retransmission after a loss), not a burst: a debt
  // waiting for an epoch is kept through it (note_wake; counted:
  // Wake::straggler, the ledger's straggler_wakes). Those traced, on
  // `periodic` at 200 nodes, held 1 or 2.
  static constexpr std::uint64_t kMostStragglerUnits = 5;
  // A crowd disproved (note_wake; counted: Wake::crowd_disproved, the
  // ledger's crowds_disproved): a burst, all shared from its wake's pool,
  // that consumed at least a unit and at most 1/kDisprovedCrowdPools of
  // that pool was no crowd's, and the key's crowd marks go (its demand here
  // is sparse again until something sets them anew). Users asking now and
  // then at 50 nodes (`hotkeys`) kept a start's marks for a minute on keys
  // below their limit: the shares refused there while the bucket stood
  // near its cap, and what the refill brought was lost (-1.57% of the
  // ideal; -1.18% with this, -0.99% since a refused request's wake keeps
  // its pool for the judgement). A crowd's burst spends about its pool.
  static constexpr std::uint64_t kDisprovedCrowdPools = 8;
  // Where this node noted no pool at a burst's wake (it asked nothing within
  // a horizon of it: a user's requests now and then reach each of many
  // nodes seconds apart), this many bursts in a row, each spending at most
  // 1/kRunBurstPools of the pool this node's last epoch saw, disprove the
  // crowd alike. One is not enough there: a straggler's unit or two after a
  // job against a pool refilled since would drop a real crowd's marks
  // before each job. A quarter, not the single burst's eighth: users at
  // about their limit spend 2-3 requests of a pool of 12-16 a burst, and
  // a chance cluster of their origins set a crowd's thinning afresh that
  // only such a run drops (`hotkeys` at 50 nodes: -0.69% with an eighth,
  // -0.57% with a quarter; docs/cluster.md, "A crowd disproved, by a run").
  static constexpr std::uint32_t kDisprovingBurstRun = 4;
  static constexpr std::uint64_t kRunBurstPools = 4;
  // Where the count of such bursts stops (its 3 bits).
  static constexpr std::uint32_t kMaxBurstRun = 7;
  static_assert(kDisprovingBurstRun <= kMaxBurstRun);
  // The pool remembered for that saturates here (in units; a larger pool
  // is taken as this, which judges fewer bursts small).
  static constexpr std::uint32_t kMaxPoolSeen = (1u << 20) - 1;
  // A crowd told (Limiter::KeyNews::crowd): where keys are routed, a node
  // that knows at least this many origins of a key about as new as its
  // newest, asks included, tells it with the key's news: one more than the
  // most a routed key has (ClusterOptions::routed_max_origins). A node told
  // makes the key crowded for kToldCrowdUs, renewed while it is told:
  // long enough to reach a burst a second later. 60 s (kDenseMemoryUs)
  // held `coldkeys`' shares strict at nearly every node and ran it 5%
  // under; 3 s, 0.6-2.1% under at 200 nodes; 1.5 s, within 0.5% on the
  // buckets (docs/cluster.md, "Crowd hints").
  static constexpr std::uint32_t kToldCrowdOrigins = 17;
  static constexpr TimeUs kToldCrowdUs = 1'500'000;
  // How many news horizons after a key's wake a sliding log's epoch shares
  // the wake's pool (the Limiter's choice; the other algorithms: one, but
  // kFixedWindowWakeHorizons).
  static constexpr int kLogWakeHorizons = 2;
  // And a fixed window's, where this node's demand on the key is dense: its
  // window frees nothing until it ends, so the pool at the wake stands, and
  // a job of 200 ms (`periodic`) is shared in one epoch rather than
  // re-shared from views that have not heard of the first epoch's spending
  // (docs/cluster.md, "A fixed window's burst in one epoch"). Only where
  // they end within the wake's window (wake_end_in_step_us).
  static constexpr int kFixedWindowWakeHorizons = 3;
  // A sliding log's epoch, where this node's demand on the key is a
  // burst's (dense, or one of a crowd of single requests), ends where the
  // log frees its first unit beyond the headroom, if that is
  // 1/kLogEpochCutFrom of the epoch or more in, and shares only the room
  // there is (the Limiter's choice: a log frees
  // when its entries leave, and a share of what frees later, spent at
  // once, overshot; docs/cluster.md, "A log's epoch ends where its room
  // frees"). Not sooner: where entries leave all the time, every request
  // would start an epoch.
  static constexpr std::int64_t kLogEpochCutFrom = 4;

  // True when the epoch ended: start_epoch before admits.
  bool due(TimeUs now) const { return now >= epoch_end_us_; }
  // What an epoch's start found, for the Limiter's counters.
  struct EpochStart {
    // Many origins spending at about the same time against the pool
    // (kCrowdedOrigins): demand on the key made dense.
    bool crowded_origins = false;
    // The key made crowded (make_crowded): one of a rule's keys new at once
    // among at least kCrowdedNodes live nodes; gossiped, not routed.
    bool made_crowded = false;
    // A draw did not keep this epoch's first request beyond the share (a
    // crowd's first requests, thinned: start_epoch); the epoch is strict.
    bool pass_thinned = false;
    // The raise of a node's share for the bursts it asks nothing in was
    // held at its bound (kMaxIdleRaiseX4).
    bool idle_raise_capped = false;
    // This node's share was raised for its sparse asking (its turn came
    // after a horizon or more without a request here while the key stayed
    // busy: start_epoch), and the raise held at its bound (kMaxSparseRaise).
    bool sparse_raised = false;
    bool sparse_raise_capped = false;
    // This node's share counted the balance kContendedBalanceX times, or
    // kContendedAccruingBalanceX (a contended balance, where room frees as
    // it is admitted: start_epoch).
    bool contended_balance = false;
    // A crowd's chance was counted from the askers' floor (the live nodes x
    // kLeastAskedWakesX63 / 63, above what the origins show): this node
    // asked in hardly any of the key's recent bursts.
    bool askers_floored = false;
    // A forgiven debt was carried into this epoch (debt() > 0), or a lost
    // shortfall credited (debt() < 0), and either held at its bound
    // (kMaxDebtX8, a fixed window's credit kMaxStepCreditX8;
    // kMaxCarriedUnits).
    bool debt_carried = false;
    bool credit_carried = false;
    bool debt_capped = false;
  };
  // Fixes this epoch's share. `now` >= the last epoch's end.
  EpochStart start_epoch(const ShareView& view, const ShareInputs& in, TimeUs now);
  enum class Answer {
    kCredit,   // within the share: spend() it when charged
    kSparse,   // beyond the share, but the first request of an epoch (or
               // the second, after a run of small bursts) at a node whose
               // demand on the key is sparse: admitted as before
    kRefused,  // beyond the share
  };
  // The key's entries grew at `now` after a quiet spell (a wake):
  // `all_before` and `own_before` are its entries' sum and this node's,
  // just before. Called by the ledger, on the request path and on merges.
  // `quiet_us` is the spell that made it a wake (one news horizon) and
  // `last_change_us` when the entries grew before it: the last burst's
  // error is carried, and a crowded burst seen, only if its consumption was
  // all shared from its wake's pool (it ended within kLogWakeHorizons, its
  // news a horizon later). `last_consumed_us` (0: unknown): when the
  // newest consumption before the wake happened as far as this node knows
  // (KeyState::consumed_at_us: a peer's news when it arrived, unless it
  // came with an age), for the end of the last burst (a forgiven debt).
  // What it found, for the ledger's counters.
  struct Wake {
    // That burst was crowded (kCrowdedPools): demand on the key made dense.
    bool crowded = false;
    // The news since the last wake held at most kMostStragglerUnits: that
    // wake was a straggler's, and a debt or credit waiting for an epoch
    // was kept through it.
    bool straggler = false;
    // That burst spent at most 1/kDisprovedCrowdPools of its pool, and the
    // key's crowd marks were dropped.
    bool crowd_disproved = false;
  };
  Wake note_wake(std::uint64_t all_before, std::uint64_t own_before, TimeUs now, TimeUs quiet_us,
                 TimeUs last_change_us, TimeUs last_consumed_us = 0);
  // A wake was noted at `now` (the epoch that decides a request noted it:
  // the request's charge need not again), or, where the algorithm refills
  // in steps (stepwise_), less than `spell_us` before it: if the share
  // refused that request, the entries did not grow, and the burst's first
  // news is no second wake, which would end a burst that had just begun
  // and the debt carried into it.
  bool woke_within(TimeUs now, TimeUs spell_us) const {
    if (woke_us_ == now) return true;
    return stepwise_ && woke_us_ > 0 && now > woke_us_ && now - woke_us_ < spell_us;
  }
  TimeUs woke_us() const { return woke_us_; }  // the last wake; 0: none
  // The end of the last wake's `horizons` horizons while `now` is before it
  // (an epoch then shares the pool at the wake and ends there); 0 otherwise.
  TimeUs wake_end_us(const ShareView& view, TimeUs now, int horizons = 1) const {
    const TimeUs end = woke_us_ + horizons * view.horizon_us;
    return woke_us_ > 0 && now < end ? end : 0;
  }
  // The same over `horizons`, but 0 once `now` is past the step of
  // `step_us` the wake lies in (a fixed window's window): the next step's
  // room comes back whole, its own pool, not the wake's. (The Limiter ends
  // every fixed window's epoch with its window: docs/cluster.md, "A fixed
  // window's epoch ends with its window".)
  TimeUs wake_end_in_step_us(const ShareView& view, TimeUs now, int horizons, TimeUs step_us) const;
  // The end of the step of `step_us` that `t` lies in (steps at its
  // multiples).
  static TimeUs step_end_us(TimeUs t, TimeUs step_us);
  // Whether a request of `cost` may pass. Changes nothing: a check may be
  // decided twice; count() it once.
  Answer ask(std::int64_t cost, TimeUs now) const;
  // A request the algorithm refused at `now`, to be count()ed: after the
  // epoch's end (no admission started a new one) it counts in its own span
  // of an epoch's length after that end, so that a request now and then
  // over a long refusal does not add up to dense demand. Only the refusal
  // path calls it: an admission has just started an epoch if one was due.
  void enter_span(TimeUs now) {
    if (!due(now)) return;
    const TimeUs span = (now - epoch_end_us_) / std::max<TimeUs>(1, epoch_us_) + 1;
    const auto past = static_cast<std::uint32_t>(std::min<TimeUs>(span, kMaxPastSpan));
    if (past != past_span_) {
      past_span_ = past;
      asked_ = 0;
    }
  }
  // A request on the key at `now`, admitted or refused by the share or the
  // algorithm: the burst's end, as far as this node saw it, for a forgiven
  // debt (not while one waits: last_asked_us_ below).
  void note_asked(TimeUs now) {
    if (burst_woke_us_ == 0) last_asked_us_ = now;
  }
  // Counts one request (admitted or not) towards this node's demand
  // density on the key; true while that demand is dense.
  bool count(TimeUs now) {
    note_asked(now);
    if (asked_in_burst_ < kMaxAsked) ++asked_in_burst_;
    if (asked_ < kMaxAsked) ++asked_;
    if (asked_ >= kDenseRequests) dense_until_us_ = now + kDenseMemoryUs;
    return dense(now);
  }
  // The key crowded, and its demand dense, for `span_us` from `now` at
  // least: a peer told of a crowd on it (Limiter::note_crowd,
  // kToldCrowdUs).
  void make_crowded_for(TimeUs now, TimeUs span_us) {
    dense_until_us_ = std::max(dense_until_us_, now + span_us);
    crowded_ = true;
  }
  // Many nodes meet the key at once, as far as this node can tell (one of
  // many keys new at once: ShareInputs::crowded_start), most of them with a
  // strict share: crowded, and its demand dense, for kDenseMemoryUs.
  void make_crowded(TimeUs now) { make_crowded_for(now, kDenseMemoryUs); }
  // make_crowded() within kDenseMemoryUs. Such a key is gossiped, not routed
  // to owners (ClusterNode::routed): its news must reach the nodes whose
  // strict shares refused everything too, which routing would not tell (a
  // crowded burst or epoch, kCrowdedPools or kCrowdedOrigins, is seen from
  // nodes that spent: routing tells them, and such keys stay routed).
  bool crowded(TimeUs now) const { return crowded_ && dense(now); }
  // One of a crowd of single requests: a crowd's first requests are
  // thinned on the key here (crowd_thinned_, start_epoch) and this node
  // asked at most kSingleInCrowdMostAsked of the last burst it asked in.
  // Its demand is a part of a burst, though too thin at one node to look
  // dense (Limiter::share_admits: a sliding log shares the wake's pool
  // there and carries the burst's error, as where demand is dense).
  bool single_in_crowd() const {
    return crowd_thinned_ && asked_last_burst_ <= kSingleInCrowdMostAsked;
  }
  // This epoch keeps no first request beyond the share (strict_ below).
  bool strict() const { return strict_; }
  // This node's share refused a request (its demand asked for more than
  // its share): a shortfall of the burst may be carried (above).
  void note_refused() { refused_since_wake_ = true; }
  // Spends `cost` of the share, which ask() found it holds.
  void spend(std::int64_t cost) {
    if (!unlimited_) credit_ -= units(cost);
  }
  TimeUs epoch_end_us() const { return epoch_end_us_; }
  bool unlimited() const { return unlimited_; }
  // The debt carried from the last burst (carries_debt), in units of the
  // algorithm: what this epoch's balance was shared out less; negative: a
  // lost shortfall, credited, what it was shared out more.
  std::int64_t debt() const { return debt_; }
  bool probing() const { return probing_; }
  // Met too recently for news of every other spender to have arrived (a
  // share never started is young too).
  bool young(TimeUs now) const { return epoch_us_ == 0 || now < young_until_us_; }
  // An epoch started here before: the first (a probe, or the whole balance)
  // is over once the next starts.
  bool met_before() const { return epoch_us_ != 0; }
  // The epoch starting now is this node's first in the step of `step_us`
  // (steps at its multiples) `now` lies in, which began after its last
  // epoch's start and after the key's last wake: the burst went on into
  // it. False where no epoch started here yet.
  bool first_in_new_step(TimeUs now, TimeUs step_us) const;
  bool dense(TimeUs now) const { return dense_until_us_ >= 0 && now < dense_until_us_; }

  // A share's credit counts in 2^-kFractionBits of a unit.
  static constexpr int kFractionBits = 16;

 private:
  // `cost` in the credit's units (costs up to 2^50: 128 bits).
  static __int128 units(std::int64_t cost) { return static_cast<__int128>(cost) << kFractionBits; }

  // A forgiven debt, at an epoch's start: the first epoch after a wake
  // carries the last burst's (debt_, noted in `found`) and notes the
  // balance this burst is shared from, less that debt. Every later epoch
  // until the next wake shares its balance less the debt too, so that this
  // burst ends that much above zero (the idle spell's refill fills that
  // part in vain: the debt is repaid).
  void carry_forgiven_debt(const ShareView& view, const ShareInputs& in, TimeUs now,
                           EpochStart& found);
  // The debt the last burst ran up and its idle spell forgave (A forgiven
  // debt), or, negative, the room it left while refusing here that the idle
  // spell lost at the cap (a lost shortfall), at the first epoch after the
  // wake, with the burst's end noted;
  // `spent_since_wake`: what every node consumed since the wake.
  std::int64_t forgiven_debt(const ShareView& view, const ShareInputs& in,
                             __int128 spent_since_wake) const;

  // Drops the key's crowd marks (a crowd disproved: note_wake); true if it
  // had any.
  bool drop_crowd_marks(TimeUs now);
  // The key's last kDisprovingBurstRun bursts were small (small_bursts_):
  // no crowd spends on it.
  bool small_burst_run() const { return small_bursts_ >= kDisprovingBurstRun; }

  // What has accrued of the epoch's refill by `now` (refill_accrues).
  __int128 accrued(TimeUs now) const;

  // What is left this epoch, in units() (16 bits of fraction), not counting
  // the refill still accruing (below): negative when the spending ran ahead
  // of its start.
  __int128 credit_ = 0;
  __int128 accruing_ = 0;       // this node's part of the refill, accruing over the epoch
  TimeUs epoch_end_us_ = 0;
  TimeUs dense_until_us_ = -1;  // demand dense until then (-1: never was)
  TimeUs young_until_us_ = 0;   // a probe's news may still be arriving: share n ways
  // Consumption marks, every kWeightWindowUs: the weights cover the time
  // since the previous mark (one to two windows). Where the room comes
  // back in whole steps (a fixed window), at a wake instead, to the sums
  // just before it, and a wake's epoch weighs the bursts between the two
  // marks (start_epoch).
  TimeUs mark_us_ = 0;
  std::uint64_t mark_own_ = 0;
  std::uint64_t mark_all_ = 0;
  std::uint64_t prev_own_ = 0;
  std::uint64_t prev_all_ = 0;
  // The last wake (note_wake): when, and the entries' sums just before it.
  TimeUs woke_us_ = 0;
  std::uint64_t all_at_wake_ = 0;
  std::uint64_t own_at_wake_ = 0;
  // The pool this node's epoch from the last wake shared (after the carry),
  // or, where no epoch carries, the pool as it stood at the wake (for the
  // crowding check); -1 if none was noted. And the last burst's error,
  // taken from the next pool.
  std::int64_t burst_pool_ = -1;
  // (32 bits, at most kMaxCarriedUnits either way, beside the count below.)
  std::int32_t burst_carry_ = 0;
  // Epochs started here since the key's burst began (the wake after an
  // idle spell, note_wake); saturates at kMaxBurstEpochs.
  std::uint32_t burst_epochs_ : 6 = 0;
  // The quiet spell the last wake ended (its entries standing still before
  // it), in microseconds, at most kMaxQuietUs: no node spent on the key
  // there (a log's wake turn's raise leaves it out). The bound is the
  // field's width, 67 s: a spell that long is an idle spell, and no log's
  // turn, unless a horizon exceeds 22 s (gossip intervals of seconds, a
  // Redis sync's); a spell held there is taken as the whole time since
  // this node's last epoch began (start_epoch: no turn).
  static constexpr TimeUs kMaxQuietUs = (TimeUs{1} << 26) - 1;
  std::uint32_t quiet_us_ : 26 = 0;
  // A forgiven debt (carries_debt). While a burst lasts: burst_balance_ is
  // the balance this node shared out at its wake (less the debt carried
  // into it), -1 if none was noted, and last_asked_us_ this node's last
  // request. After the next wake, until the epoch that carries the debt:
  // burst_balance_ is what the burst consumed beyond that balance,
  // burst_woke_us_ (> 0) the burst's wake and last_asked_us_ its end.
  // Negative: a lost shortfall, credited. At most kMaxCarriedUnits either
  // way (32 bits, beside the flag below).
  std::int32_t debt_ = 0;
  // The burst a debt or a credit waits for (burst_woke_us_ > 0) refused a
  // request here (refused_since_wake_ at the wake that ended it).
  std::uint32_t burst_refused_ : 1 = 0;
  // The algorithm carries a debt and refills in steps (ShareInputs::
  // refill_step_us, as of the last epoch): a fixed or a sliding window.
  // Its debt is counted in whole windows, not from the burst's end, which
  // a node can only guess, and it is carried by the first epoch after the
  // wake however late, and kept through a wake that only a refused request
  // made (woke_within). The bucket-like algorithms' debt does take the
  // burst's end (the newest news less a horizon: about 150 ms of a 200 ms
  // job, median over 200 nodes), so it runs high, and carried so at more
  // nodes it took `periodic` at 200 nodes from +0.18% to -1.12% (docs/
  // cluster.md, "A fixed window's debt"). Through a straggler's wake
  // (note_wake) every algorithm's is kept: "A straggler's wake, for every
  // algorithm".
  std::uint32_t stepwise_ : 1 = 0;
  // This epoch's first request beyond the share is kept, though demand here
  // was dense lately: a crowd's pass a draw kept, where the algorithm repays
  // an overshoot, this node asked nothing yet in this burst and at most one
  // request in the last burst it asked in (start_epoch).
  std::uint32_t crowd_pass_ : 1 = 0;
  // Requests this node asked (count()) since the key's burst began (the
  // wake after an idle spell, note_wake), and in the last burst it asked
  // in; both saturate at kMaxAsked.
  std::uint32_t asked_in_burst_ : 3 = 0;
  std::uint32_t asked_last_burst_ : 3 = 0;
  // Bursts in a row that spent at most 1/kRunBurstPools of pool_seen_
  // (kDisprovingBurstRun; saturates at kMaxBurstRun), and the pool this
  // node's last epoch saw (its balance and refill, in units, at most
  // kMaxPoolSeen).
  std::uint32_t small_bursts_ : 3 = 0;
  std::uint32_t pool_seen_ : 20 = 0;
  std::int64_t burst_balance_ = -1;
  TimeUs burst_woke_us_ = 0;
  TimeUs last_asked_us_ = 0;
  // The epoch's length, over which accruing_ accrues and by which
  // enter_span() counts (one above kMaxEpochUs, 16.7 s, a gossip interval of
  // seconds, accrues and counts over 16.7 s); 0 until the first epoch (so a
  // share never started is young). Packed with the counts and flags below:
  // the share is 176 bytes, one per key this node checks.
  static constexpr TimeUs kMaxEpochUs = (TimeUs{1} << 24) - 1;
  std::uint32_t epoch_us_ : 24 = 0;
  // A crowd's first requests were thinned here (start_epoch's gate held),
  // and since then at least kDenseRequests origins have had an entry: they
  // still are at a new burst (ShareInputs::new_burst), however few spent in the
  // last one.
  std::uint32_t crowd_thinned_ : 1 = 0;
  std::uint32_t crowded_ : 1 = 0;  // crowded(): while dense
  // Of the key's wakes, the share in which this node asked (count()), in
  // 1/63: a running average over about 8 wakes, never below
  // kLeastAskedWakesX63 (its rounding holds it there: note_wake), so a
  // crowd of askers (start_epoch) is at least the live nodes x 4/63, 12 of
  // 200, however long this node did not ask.
  static constexpr std::uint32_t kLeastAskedWakesX63 = 4;
  std::uint32_t asked_wakes_x63_ : 6 = 63;
  // How many ways this node's probe shared the key's balance; 1 where no
  // probe was needed; 0: none was considered yet (a probe runs once). The
  // equal eighth is shared at least as many ways after.
  std::uint32_t probe_ways_ : 17 = 0;
  std::uint32_t asked_ : 3 = 0;  // requests this epoch, or span after it (saturates at kMaxAsked)
  // 0 within the epoch; k: asked_ counts the k-th span after its end.
  std::uint32_t past_span_ : 6 = 0;
  bool unlimited_ : 1 = false;   // no share: the whole balance
  bool probing_ : 1 = false;
  // This epoch keeps no first request beyond the share: a probe of a rule
  // whose demand is not sparse (ShareInputs::sparse_rule), a key's first
  // epoch here among many new at once (ShareInputs::crowded_start), or a
  // crowd's first request a draw did not keep (kBurstHorizons).
  bool strict_ : 1 = false;
  bool refused_since_wake_ : 1 = false;  // note_refused since the last wake
  bool pool_carries_ : 1 = false;        // burst_pool_ is the carry's, not the crowding check's
  bool news_aged_ : 1 = false;           // !ShareInputs::repays_overshoot, as of the last epoch
};

// For ShareInputs::refill_fraction: the fraction of its next unit that an
// algorithm freeing one unit every period_us / limit has freed, in
// 2^-FairShare::kFractionBits, from its wait for that unit (1 - the wait /
// a unit's time). 0 for no wait, or one of a whole unit or more.
std::uint32_t freed_fraction(std::int64_t wait_us, std::int64_t limit, std::int64_t period_us);

}  // namespace rlimit::core
