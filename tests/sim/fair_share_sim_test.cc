// Fair shares (docs/cluster.md, "Fair shares"; docs/accuracy.md, guarantee
// 3): demand on one key that arrives at every node at once. The bounds of
// issue 14, on the shipped scenarios, over several seeds and sizes and every
// replicated algorithm. With fair_share = false the same runs admit 1.7x to
// 11x the limit and then nothing for seconds (docs/accuracy.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "sim_support.h"

namespace rlimit::sim {
namespace {

// The bounds: the windows' (expect_windows) and the run within run_bound
// of the ideal.
void expect_fair(const Results& r, const std::string& what, double burst, double run_bound = 0.01) {
  expect_windows(r, what, burst);
  EXPECT_LE(std::abs(r.error_ratio()), run_bound) << what;
  EXPECT_GT(r.core.share_refused, 0u) << what;  // the shares did something
}

// Every replicated algorithm and the overrides it runs with: smooth bursty
// with no delay, a replicated meter (docs/algorithms.md).
struct ReplicatedCase {
  std::string algorithm;
  std::vector<std::string> options;
};
const std::vector<ReplicatedCase>& every_replicated_algorithm() {
  static const std::vector<ReplicatedCase> cases = {
      {"token_bucket", {}}, {"leaky_bucket", {}}, {"fixed_window", {}},
      {"sliding_log", {}},  {"gcra", {}},         {"smooth_bursty", {"rule.0.max_delay=\"0s\""}},
      {"sliding_window", {}},
  };
  return cases;
}

// 37 s of traffic: a run that ends just after a burst that overshot has not
// repaid it yet (20 nodes, seed 1: +21 tokens at 19.1 s, +1.2% of 17 s of
// traffic, +0.03% once the run goes on), and "within 1%" is about the long run.
TEST(FairShareSimTest, AlignedBurstsAtEveryNodeSpendAFairShare) {
  for (const int nodes : {5, 20, 50}) {
    for (const std::uint64_t seed : {1, 2, 3}) {
      const Results r = run(shipped("aligned", {"cluster.nodes=" + std::to_string(nodes),
                                                "duration=\"40s\""}),
                            seed);
      expect_fair(r, std::to_string(nodes) + " nodes, seed " + std::to_string(seed), 100);
    }
  }
}

// A sliding log frees a slot a period after it was taken, so a peer's slot
// logged when its news arrived frees after the next burst has ended: with
// the news' age on the wire (docs/cluster.md, "The age of news") the log
// holds at 50 and 200 nodes too (was -4.5% and -7..-15% under the ideal,
// fewest windows 0.25 x). At 200 nodes, over 60 s: each origin's entry
// carries its own age; with one age per key (the newest's) an older
// consumption relayed beside newer news was logged late, and the cluster's
// admissions drifted to the bursts' end (seeds 1-4 -1.74..+0.02%, fewest
// 0.60 x; then -0.65..+0.75%, 0.88 x). Over 20 s a log at 200 nodes then
// ended +1.0..+5.0% (seeds 1-8): its first bursts admitted more than their
// room, because nodes whose probe admitted nothing (no entry in any view)
// each took 1/(8 x the origins seen) on top of the spenders' eighths, and a
// log repays nothing. Now they share the eighth as many ways as their probe
// did (fair_share.h): over 20 s seeds 1-8 -1.35..+1.47% (seed 3 +3.18% ->
// -0.18%), over 60 s -1.63..-0.12% (seeds 1-4), a loss of about a token a
// burst that the early excess had offset: late starters shared what the
// first had left (-1.27% from the 10th second on, seeds 1-8). Now a log's
// burst is one epoch from the key's wake, over two horizons, where demand is
// dense (docs/cluster.md, "A log's burst in one epoch"), and the error of
// each burst (the rounding of 200 shares of about half a request) is carried
// into the next burst's pool ("A log's burst error, carried"): 50 nodes over
// 20 s +0.00%; 200 nodes over 60 s seeds 1-8 +0.04..+0.74%, mean +0.33%
// (was -2.40..-0.12%, mean -0.99%; with the burst in one epoch but no carry
// -0.65..+1.74%, this seed +1.74%, seed 3 over 20 s +1.59%).
TEST(FairShareSimTest, AlignedBurstsOnASlidingLogAt50And200Nodes) {
  const Results fifty =
      run(shipped("aligned", {"cluster.nodes=50", "rule.0.algorithm=\"sliding_log\""}), 1);
  expect_fair(fifty, "sliding_log, 50 nodes", 100);
  const Results r = run(shipped("aligned", {"cluster.nodes=200", "duration=\"60s\"",
                                            "rule.0.algorithm=\"sliding_log\""}),
                        1);
  expect_fair(r, "sliding_log, 200 nodes, 60 s", 100);
  EXPECT_GT(r.core.share_wake_epochs, 0u);  // the bursts' epochs from the wake
  const Results early =
      run(shipped("aligned", {"cluster.nodes=200", "rule.0.algorithm=\"sliding_log\""}), 3);
  expect_fair(early, "sliding_log, 200 nodes, 20 s", 100);
}

// Aligned bursts every 300 ms (100 ms on, 200 off) on a sliding log at 50
// nodes: each burst's room frees as the entries of the burst a second
// before leave, often late in the epoch, and a share of that room,
// spendable at once, let every node whose view held some room spend its
// part before it freed: +6.13% over the ideal, later windows 1.80 x the
// limit and silent ones (0.00 x). An epoch now ends where the log starts
// freeing (FairShare::kLogEpochCutFrom; docs/cluster.md, "A log's epoch
// ends where its room frees"): +1.52%, 1.09 x, 0.68 of the ideal's rate at
// the fewest. (The run stays above the ideal: one perfect log admits 100
// every 1.2 s on this demand, its bursts in step with its window, and a
// cluster whose admissions spread over the bursts may take up to 100 a
// second within the limit.)
TEST(FairShareSimTest, BurstsEvery300MsOnASlidingLogSpendRoomOnlyOnceItFrees) {
  const Results r =
      run(shipped("aligned", {"cluster.nodes=50", "duration=\"40s\"",
                              "traffic.0.burst_off=\"200ms\"", "rule.0.algorithm=\"sliding_log\""}),
          1);
  const double limit = r.limit_per_window();
  EXPECT_LE(static_cast<double>(r.first_window_admitted), 2 * 100.0);
  EXPECT_LE(static_cast<double>(r.worst_window_admitted), 1.5 * limit);
  EXPECT_GE(r.least_window_vs_ideal_rate(), 0.5);
  EXPECT_LE(std::abs(r.error_ratio()), 0.03);
  EXPECT_GT(r.core.share_log_epochs_cut, 0u);  // 3,735 at this seed
}

// Many keys new at once on a sliding log at 200 nodes, each node asking a
// key about once a burst: a crowd of single requests, whose nodes share the
// wake's pool and carry the burst's error as where demand is dense
// (FairShare::single_in_crowd), and whose crowd is the nodes that ask
// (ShareInputs::crowd_of_askers). 15 s, seed 1: -4.73% before either (10-15
// s -10.06%), -2.00% with the first (10-15 s -5.52%), -0.16% with both
// (10-15 s -2.70%); over 60 s -7.29% -> -3.08% -> +0.67%.
TEST(FairShareSimTest, ManyKeysOnASlidingLogAt200NodesSpendTheirRoom) {
  const Results r = run(shipped("coldkeys", {"cluster.nodes=200", "duration=\"15s\"",
                                             "rule.0.algorithm=\"sliding_log\""}),
                        1);
  EXPECT_LE(std::abs(r.error_ratio()), 0.01);
  EXPECT_LE(static_cast<double>(r.first_window_admitted), 2 * r.limit_per_window());
  EXPECT_GT(r.core.share_single_crowd_epochs, 0u);  // the crowd of single requests' path
}

// A sliding window at 200 nodes, over 40 s: within 1% of the ideal since it
// is credited the room its shares refused (sliding_window.h, "Credit";
// -1.17% before, seed 1; seeds 1-8 -0.82..-0.36% on 106de3e, docs/
// cluster.md). Its fewest later window, 0.34-0.46 x over seeds 1-8 (0.46
// for this seed), is
// below the 0.5 (docs/cluster.md, "Where the rest goes"), as one
// perfect sliding window's own is: bounded here below the seeds' range.
TEST(FairShareSimTest, AlignedBurstsOnASlidingWindowAt200Nodes) {
  const Results r = run(shipped("aligned", {"cluster.nodes=200", "duration=\"40s\"",
                                            "rule.0.algorithm=\"sliding_window\""}),
                        1);
  expect_windows(r, "sliding window, 200 nodes", 100, 1.5, 0.3);
  EXPECT_LE(std::abs(r.error_ratio()), 0.01);
  EXPECT_GT(r.core.share_refused, 0u);
  // One perfect sliding window itself admits less than half the limit in
  // some windows of full demand (its estimate weighs the previous window's
  // burst as if spread over it): the "at least half" is not this
  // algorithm's to give in limits. Against its ideal it is (0.73 of the
  // ideal's at least over seeds 1-8, 60 s; the next test).
  EXPECT_LT(static_cast<double>(r.ideal_least_window), 0.5 * r.limit_per_window());
  EXPECT_GE(r.least_window_vs_ideal(), 0.5);
  // The lower of the ideal's window and its rate around it is at most its
  // window, over fewer windows: never a lower fewest.
  EXPECT_GE(r.least_window_vs_ideal_rate(), r.least_window_vs_ideal());
}

// No silence, for a sliding window: one perfect sliding window under these
// bursts settles at about half the limit a second (its estimate weighs the
// previous window's burst as if spread over it: 100, 9, 91, 18, 83, 25 ... a
// burst, 51 and 54 by turns from the 30th second; seed 1, 20 nodes), so the
// issue's "at least half the limit" is its own level and the cluster, within
// a few tokens of it a window, dips below (0.37-0.42 x over seeds 1-8 at 5
// to 200 nodes). What "no silence" asks of it is half of what the
// algorithm itself admits: in every later window of full demand in which
// the ideal admitted half the limit, the cluster admits at least half the
// ideal's (seeds 1-8, 60 s: at least 0.78, 0.80 and 0.80 of it at 5, 20 and
// 50 nodes; docs/accuracy.md, guarantee 3). 40 s here, seeds 1-4; without
// fair shares 0.00 (20 nodes, seed 1: nothing where the ideal admitted 91).
TEST(FairShareSimTest, AlignedBurstsOnASlidingWindowAdmitHalfWhatItsIdealDoes) {
  for (const int nodes : {5, 20, 50}) {
    for (const std::uint64_t seed : {1, 2, 3, 4}) {
      const Results r =
          run(shipped("aligned", {"cluster.nodes=" + std::to_string(nodes), "duration=\"40s\"",
                                  "rule.0.algorithm=\"sliding_window\""}),
              seed);
      const std::string what = std::to_string(nodes) + " nodes, seed " + std::to_string(seed);
      EXPECT_GE(r.least_window_vs_ideal(), 0.5) << what;
      EXPECT_LT(static_cast<double>(r.ideal_least_window), 0.5 * r.limit_per_window()) << what;
      EXPECT_LE(std::abs(r.error_ratio()), 0.01) << what;
    }
  }
}

// Bursts three times as long (300 ms every second) on a sliding window at
// 200 nodes, over 40 s: a request the window refuses counts as demand
// (docs/cluster.md, "Fair shares": "Demand is what is asked"). Before, the
// nodes whose view was full looked sparse and kept a first request beyond
// their share in every epoch: +48.8% (seeds 1-4), this seed +0.23%. That
// +0.23% was a cold start's overshoot (+81 tokens in the first second, 1.96
// x the limit) over bursts that ran -2.28% from the fifth second on; since
// a sliding window's crowd is thinned in a burst into an emptied window
// (the cold start too: docs/cluster.md, "A window's crowd after a quiet
// spell"), the first window admits 1.02 x and the run is -1.42% (-1.99%
// from the fifth second): bounded at 1.5%, the first window at 1.2 x
// (1.96 x without the thinning).
TEST(FairShareSimTest, LongerAlignedBurstsOnASlidingWindowAt200Nodes) {
  const Results r =
      run(shipped("aligned",
                  {"cluster.nodes=200", "duration=\"40s\"", "rule.0.algorithm=\"sliding_window\"",
                   "traffic.0.burst_on=\"300ms\"", "traffic.0.burst_off=\"700ms\""}),
          1);
  EXPECT_LE(std::abs(r.error_ratio()), 0.015);
  EXPECT_LE(static_cast<double>(r.first_window_admitted), 1.2 * r.limit_per_window());
  EXPECT_LE(static_cast<double>(r.worst_window_admitted), 1.5 * r.limit_per_window());
  EXPECT_GT(r.core.share_refused, 0u);
}

// Bursts every 300 ms (100 ms on, 200 ms off) on a token bucket at 200
// nodes, 20 s: each node asks about 3 requests a burst, so its demand looks
// sparse, and until a crowded burst made it dense every node kept its first
// request beyond its share: up to 131 a burst against a pool of 30 (seed 1,
// 17.7-20.1 s), then nothing for bursts (this seed +2.07%, later windows up
// to 2.16 x, fewest 0.00 x; then -0.39%, 1.35 x, 0.53 x; docs/cluster.md,
// "Fair shares": "Crowded bursts"). The second burst still passed the first
// requests (the first window 2.63 x the limit; the crowding was seen at the
// third) until an epoch that sees many origins against its pool made
// demand dense ("Crowded origins"): -0.50%, first window 1.98 x, later
// 1.30 x and 0.80 x; with as many origins as the pool (not three times as
// many) -0.56%, 1.96 x, 1.29 x and 0.79 x.
// Bursts `burst_on` long every `burst_on` + `burst_off` on a token bucket
// at 200 nodes, 20 s, seed 2 (about 3 requests a node a burst): within 1% of
// the ideal, the first window within 2 x the burst, later windows within
// 1.5 x the limit and at least `least_limits` of it, crowding counted.
Results expect_crowded_bursts_bounded(const char* burst_on, const char* burst_off,
                                      double least_limits) {
  const Results r =
      run(shipped("aligned", {"cluster.nodes=200", "duration=\"20s\"",
                              std::string("traffic.0.burst_on=\"") + burst_on + "\"",
                              std::string("traffic.0.burst_off=\"") + burst_off + "\""}),
          2);
  EXPECT_LE(std::abs(r.error_ratio()), 0.01);
  expect_windows(r, std::string("bursts of ") + burst_on, 100, 1.5, least_limits);
  EXPECT_GT(r.core.share_crowded_epochs, 0u);  // crowded by its origins, counted
  return r;
}

TEST(FairShareSimTest, BurstsEvery300MsOnATokenBucketAt200Nodes) {
  const Results r = expect_crowded_bursts_bounded("100ms", "200ms", 0.5);
  EXPECT_EQ(r.core.share_crowded_bursts, 0u);  // no burst overshoots 3 pools since
}

// Bursts of 300 ms every second on a token bucket at 200 nodes, 20 s: each
// node asks about 3 requests a burst, so every node's demand looked sparse,
// and the bursts after the cold start overshot by the nodes' first requests
// and then repaid it in silence (seeds 1-4: first window 1.88-2.05 x, later
// 1.17-1.71 x and 0.01-0.08 x; this seed 1.88, 1.29 and 0.01 x). An epoch
// that sees many origins against its pool makes demand dense
// (docs/cluster.md, "Fair shares": "Crowded origins"): seeds 1-4 1.32-1.44,
// 1.15-1.26 and 0.39-0.82 x, this seed the worst (its second burst
// overshot, 126 against the ideal's 80, and the third repaid it: 0.39 x)
// while the check asked for three times as many origins as the pool holds;
// with as many (kCrowdedOriginsPerPool) the second burst is held back too:
// this seed 1.29, 1.18 and 0.75 x (40 s, seeds 1-4: fewest 0.39 -> 0.75 x).
TEST(FairShareSimTest, LongerBurstsOnATokenBucketAt200NodesAreNotSilent) {
  expect_crowded_bursts_bounded("300ms", "700ms", 0.5);
}

// A fixed window at 200 nodes, over 40 s: within 1% of the ideal since the
// room its shares refused is given back in the next window
// (fixed_window.h, "Credit"; seed 2: -1.05% before, +0.00% after; seeds 1-4
// -0.11..+0.22%, were -1.05..-0.41%).
TEST(FairShareSimTest, AlignedBurstsOnAFixedWindowAt200Nodes) {
  const Results r = run(shipped("aligned", {"cluster.nodes=200", "duration=\"40s\"",
                                            "rule.0.algorithm=\"fixed_window\""}),
                        2);
  expect_fair(r, "fixed_window, 200 nodes", 100);
  // One perfect fixed window admits the limit in every window of full demand,
  // so against the ideal the fewest is the fewest in limits.
  EXPECT_EQ(r.ideal_least_window, 100);
  EXPECT_DOUBLE_EQ(r.least_window_vs_ideal(), static_cast<double>(r.least_window_admitted) / 100);
}

// 200 nodes: the probe of the new key shares 1 in 2 requests among them.
TEST(FairShareSimTest, AlignedBurstsAt200Nodes) {
  const Results r = run(shipped("aligned", {"cluster.nodes=200", "duration=\"12s\""}), 1);
  expect_fair(r, "200 nodes", 100, 0.02);
}

// Every replicated algorithm, 20 nodes. The sliding window's ideal has
// windows far below the limit (its estimate weighs the previous window);
// "fewest" counts only windows where the ideal admitted half the limit. Its
// run stays within 2% of the ideal because fair shares' weights sum to one
// and it carries the overshoot late news reveals (sliding_window.h; +8.3%
// and +11.4% for seeds 1 and 2 before either).
// Warming up starts cold in the ideal too (it admits a fifth of the limit),
// so only its overshoot is bounded.
TEST(FairShareSimTest, AlignedBurstsHoldForEveryReplicatedAlgorithm) {
  for (const ReplicatedCase& c : every_replicated_algorithm()) {
    for (const std::uint64_t seed : {1, 2}) {
      std::vector<std::string> overrides = c.options;
      overrides.push_back("rule.0.algorithm=\"" + c.algorithm + "\"");
      const Results r = run(shipped("aligned", overrides), seed);
      const std::string what = c.algorithm + " seed " + std::to_string(seed);
      expect_windows(r, what, 100);
      EXPECT_LE(std::abs(r.error_ratio()), 0.02) << what;
    }
  }
  for (const std::string shaped : {"smooth_warming_up", "leaky_shaper"}) {
    std::vector<std::string> overrides;
    if (shaped == "leaky_shaper") {
      overrides = {"rule.0.algorithm=\"leaky_bucket\"", "rule.0.shaper=true",
                   "rule.0.max_delay=\"300ms\""};
    } else {
      overrides = {"rule.0.algorithm=\"" + shaped + "\""};
      if (shaped == "smooth_warming_up") {
        overrides.push_back("rule.0.max_delay=\"0s\"");
        overrides.push_back("rule.0.warmup=\"2s\"");
      }
    }
    const Results r = run(shipped("aligned", overrides), 1);
    EXPECT_LE(static_cast<double>(r.first_window_admitted), 2 * 100.0) << shaped;
    EXPECT_LE(static_cast<double>(r.worst_window_admitted), 1.5 * r.limit_per_window()) << shaped;
  }
}

// A key one node alone uses: after the probe of its first news horizon, its
// whole burst at once, every burst as the perfect limiter admits it.
TEST(FairShareSimTest, AKeyOneNodeUsesKeepsItsBurst) {
  std::string weights = "traffic.0.node_weights=[1";
  for (int i = 1; i < 20; ++i) weights += ",0";
  weights += "]";
  const Results r = run(shipped("aligned", {weights}), 1);
  EXPECT_GE(static_cast<double>(r.first_window_admitted), 0.95 * 100);
  EXPECT_EQ(r.worst_window_admitted, 100);
  EXPECT_EQ(r.least_window_admitted, 100);
  EXPECT_LE(std::abs(r.error_ratio()), 0.01);
}

// Cold starts of 100 per-user keys at every node at once, and a periodic
// job on every node every 5 s. A per-user rule whose demand has not yet
// shown dense lets each node's first request of a new key through (sparse
// users must not lose theirs: scale1000), so this cold start admits up to
// 20 nodes x 1 = twice each burst of 10, and the next second repays it
// (docs/cluster.md, "Fair shares": not bounded below there). Over the run
// it holds the ideal within 1% (seeds 1, 2: -0.78%, -0.81%) since a node
// whose first request of a burst comes late shares the pool as it stood at
// the key's wake ("A burst's pool"); sharing what the first nodes had left,
// it lost about 5% of each later second (-1.97%, -2.19%). Since crowded
// bursts make demand dense ("Crowded bursts": after the cold start's debt,
// 20 nodes' first requests against a pool of 1 or 2) the nodes keep no
// first request beyond their share, and more is left unspent (not traced):
// -0.30% and -0.35% before (1.11 / 1.29 x the limit at most later; now
// 1.01 / 1.20 x). Since a token bucket's share holds the fraction of a
// token its epoch refills ("A refill's fraction"; rounded down, a burst of
// 100 ms on a limit of 10/s lost its refill) the run is +0.81% / +0.89%,
// and the first window of seed 2 2.01 x the limit (20 first requests a key
// pass, and the second's share is no longer rounded down), and then, repaying
// it, 0.29 x. Since a node that meets many of a rule's keys new at once
// probes them strictly ("Keys new at once"): 1.52-1.55 x in the first
// window, at least 0.62 x later: the bounds (2 x the burst, at least
// half the limit), which 2.01 x and 0.29 x missed. The periodic job's run
// was +3.92% / +2.80% until the bucket-like algorithms' refill accrued over
// an epoch ("A refill accrues": each job's last epoch spent its refill up to
// the epoch's end at once, and the idle bucket forgave the debt at its cap);
// +1.40% / +1.40% since, and at 5 nodes within the 1% (+2.38% /
// +3.36% -> +0.70% / +0.56%). A job's overshoot was still forgiven by the
// idle refill until the next job carried it as a debt ("A forgiven debt,
// carried"): 20 nodes +1.40% / +1.40% -> +0.98% / +0.70%, 50 nodes +2.24% /
// +2.80% -> -0.42% / +0.56%, 5 nodes +0.42% / +0.14%. Since that debt is
// exact (its refills rounded down, the burst's end counting the requests
// the algorithm refused, a debt beyond the balance taken from the refill,
// the cold start's burst carried too) 20 nodes +0.42% / +0.14%, 50 nodes
// +0.42% / +0.42%, 5 nodes +0.14% / +0.14%, and every bucket-like
// algorithm within 1% (below).
TEST(FairShareSimTest, ManyKeysStartingAtOnceAndAPeriodicSchedule) {
  for (const std::uint64_t seed : {1, 2}) {
    const Results keys = run(shipped("coldkeys"), seed);
    const std::string what = "coldkeys seed " + std::to_string(seed);
    expect_fair(keys, what, 100 * 10.0);
    EXPECT_GT(keys.core.share_wake_epochs, 0u) << what;
    EXPECT_GT(keys.core.share_crowded_starts, 0u) << what;
    // 20 origins: below kCrowdedOrigins; its crowded bursts are counted.
    EXPECT_EQ(keys.core.share_crowded_epochs, 0u) << what;
    EXPECT_GT(keys.core.share_crowded_bursts, 0u) << what;
    const Results periodic = run(shipped("periodic"), seed);
    expect_fair(periodic, "periodic seed " + std::to_string(seed), 100);
    EXPECT_GT(periodic.core.share_debts_carried, 0u) << "periodic seed " << seed;
    EXPECT_EQ(periodic.core.share_debts_capped, 0u) << "periodic seed " << seed;
    const Results periodic5 = run(shipped("periodic", {"cluster.nodes=5"}), seed);
    expect_fair(periodic5, "periodic, 5 nodes, seed " + std::to_string(seed), 100);
    const Results periodic50 = run(shipped("periodic", {"cluster.nodes=50"}), seed);
    expect_fair(periodic50, "periodic, 50 nodes, seed " + std::to_string(seed), 100);
  }
}

// 50 nodes on `coldkeys` (4 requests a node a key a burst): after the cold
// start's debt each burst's shares spent about a token less than the pool,
// the refill of the burst's 100 ms that a token bucket's share rounded down
// to none (a full bucket then lost it at its cap): -3.32% over the run, later
// windows about 0.95 x the limit. Holding the fraction: -0.36%. The cold
// start then still admitted 4.4 x the limit in the first second (every
// node's first request of every key passed) and nothing for two seconds
// after; with keys new at once probed strictly, 1.24 x and at least 0.85 x.
TEST(FairShareSimTest, ManyKeysOn50NodesShareTheirBurstsRefill) {
  const Results r = run(shipped("coldkeys", {"cluster.nodes=50"}), 1);
  expect_fair(r, "coldkeys, 50 nodes", 100 * 10.0);
}

// The same on GCRA and the leaky bucket, whose shares took their refill in
// whole units: -0.94% and -1.22% (seed 2: -0.94% and -1.53%) until it kept
// its fraction as a token bucket's does (freed_fraction(); docs/cluster.md,
// "A refill's fraction"): -0.59% and -0.66% (seed 2: -0.41%, -0.68%).
TEST(FairShareSimTest, ManyKeysOn50NodesShareGcrasAndTheLeakyBucketsRefill) {
  for (const std::string algorithm : {"gcra", "leaky_bucket"}) {
    const Results r =
        run(shipped("coldkeys", {"cluster.nodes=50", "rule.0.algorithm=\"" + algorithm + "\""}), 1);
    expect_fair(r, "coldkeys, 50 nodes, " + algorithm, 100 * 10.0);
  }
}

// Smooth bursty admits one request beyond its stored permits (its
// reservation), and its shares left that request out of the balance: each
// burst summed a request short, and the cap lost it. `coldkeys` at 20 nodes
// over 60 s (seed 1): -1.04% against the ideal, -0.07% with the request in
// its balance and cap (Limiter::share_admits).
TEST(FairShareSimTest, ManyKeysOn20NodesSpendSmoothBurstysRequestAhead) {
  const Results r =
      run(shipped("coldkeys", {"cluster.nodes=20", "duration=\"60s\"",
                               "rule.0.algorithm=\"smooth_bursty\"", "rule.0.max_delay=\"0s\""}),
          1);
  expect_fair(r, "coldkeys, 20 nodes, smooth bursty", 100 * 10.0, 0.005);
}

// A sliding window owes a burst's overshoot as of its last refusal, not as
// far as the window would have room at its end (sliding_window.h,
// "Overshoot"): `coldkeys`' bursts fill the window's first tenth, where the
// previous window still weighs, and end with the count below the limit, so
// the bound left most of each overshoot unrepaid. 20 nodes over 60 s, seed
// 1: +1.34% against the ideal with it, +0.62% without. One perfect sliding
// window per key admits all of a key's limit in every other window, all keys
// in step (the ideal's fewest window: nothing); the cluster's keys fall out
// of step, each pair of windows summing to the ideal's, so where the ideal
// admits the whole limit the cluster admits about half (0.48 x here, seeds
// 1-4 at 5 / 20 / 50 nodes at least 0.48 x; docs/accuracy.md): about the
// ideal's own rate, which is half the limit. Against the lower of the
// ideal's window and its rate around it the cluster's fewest is 0.97 here
// (without fair shares 0.00: nothing in the window after the cold start).
TEST(FairShareSimTest, ManyKeysOn20NodesRepayASlidingWindowsOvershoot) {
  const Results r = run(shipped("coldkeys", {"cluster.nodes=20", "duration=\"60s\"",
                                             "rule.0.algorithm=\"sliding_window\""}),
                        1);
  expect_windows(r, "coldkeys, 20 nodes, sliding window", 100 * 10.0, 1.5, 0.45);
  EXPECT_EQ(r.ideal_least_window, 0);
  EXPECT_GE(r.least_window_vs_ideal_rate(), 0.5);
  EXPECT_LE(std::abs(r.error_ratio()), 0.01);
  EXPECT_GT(r.core.share_refused, 0u);
}

// A sliding window's crowd is thinned in every burst, as every other
// algorithm's (docs/cluster.md, "A window's crowd, thinned in every
// burst"): `coldkeys` at 200 nodes is a run of bursts on many keys, where
// every node kept its first request of each key beyond its share: the
// second burst admitted 2.34 x the limit (seed 1), 1.09 x at most since.
// Over 10 s the run still holds the cold start's overshoot (+13.6%; over
// 60 s -1.83%, with 0.32 x at least in the 5th second: not bounded here).
TEST(FairShareSimTest, ManyKeysOn200NodesThinASlidingWindowsCrowd) {
  const Results r = run(shipped("coldkeys", {"cluster.nodes=200", "duration=\"10s\"",
                                             "rule.0.algorithm=\"sliding_window\""}),
                        1);
  EXPECT_LE(static_cast<double>(r.first_window_admitted), 2 * 100 * 10.0);
  EXPECT_LE(static_cast<double>(r.worst_window_admitted), 1.2 * r.limit_per_window());
  EXPECT_GT(r.core.share_passes_thinned, 0u);
}

// 200 nodes on `coldkeys` (a node asks a key about once a burst): the
// first requests the nodes keep beyond their thin shares are most of what
// is admitted. Every node that asked kept one, and the second burst admitted
// 2.44 x the limit, then 0.29 x while the debt was repaid. With a crowd's
// first requests thinned (kept by a draw, the pool over the spenders), seed
// 1 over 8 s: 1.66 x at most, 0.51 x at least; with the nodes meeting a key
// at a new burst counting every live node in the crowd, and a key thinned
// before thinned at each new burst, 1.36 x and 0.72 x (docs/cluster.md, "A
// crowd's first requests, thinned" and "A new burst's crowd").
TEST(FairShareSimTest, ManyKeysOn200NodesThinTheirFirstRequests) {
  const Results r = run(shipped("coldkeys", {"cluster.nodes=200", "duration=\"8s\""}), 1);
  expect_windows(r, "coldkeys, 200 nodes", 100 * 10.0);
  EXPECT_GT(r.core.share_passes_thinned, 0u);
}

// The same on the leaky bucket, seed 2: about 11 nodes a key ask it in its
// second burst without having asked it in the first (traced). They
// meet it there with news of the first burst's crowd (16 or so origins, its
// balance all but spent) and little yet of the second's, and each passed
// its first request: 896 of the 1,552 that burst admitted, 1.55 x the
// limit. Such a newcomer counts the last burst's crowd as a node that noted
// the wake does (docs/cluster.md, "A newcomer counts the last burst"):
// 1.26 x.
TEST(FairShareSimTest, ManyKeysOn200NodesNewcomersCountTheLastBurst) {
  const Results r = run(shipped("coldkeys", {"cluster.nodes=200", "duration=\"6s\"",
                                             "rule.0.algorithm=\"leaky_bucket\""}),
                        2);
  expect_windows(r, "coldkeys, 200 nodes, leaky bucket, seed 2", 100 * 10.0);
  EXPECT_GT(r.core.share_passes_thinned, 0u);
}

// The same on a sliding log, which repays no burst's overshoot. With the
// crowd as the origins show (10-25 against about 200 nodes asking), each
// burst after the first admitted 1.2-2.5 x the limit (seed 1, 9 s: the
// second 2.51 x) and the run +49% over 20 s; with every node counting every
// live node at a new burst, as its entries tell one (ShareInputs::
// new_burst), 1.29 x at most and +3.7%, most of it the cold start's
// (docs/cluster.md, "A log's crowd at each new burst"); since the log
// carries its cold start's overshoot, 1.07 x and +0.9% ("A log's
// overshoot, carried").
TEST(FairShareSimTest, ManyKeysOn200NodesThinTheirFirstRequestsOnASlidingLog) {
  const Results r = run(shipped("coldkeys", {"cluster.nodes=200", "duration=\"6s\"",
                                             "rule.0.algorithm=\"sliding_log\""}),
                        1);
  expect_windows(r, "coldkeys, 200 nodes, sliding log", 100 * 10.0);
  EXPECT_GT(r.core.share_passes_thinned, 0u);
}

// Many users' keys new at once where keys are routed (owners1000 scaled to
// 150 nodes, 20,000 users, 20,000 requests/s, traffic from 10 s): every node
// meets its users' keys at the same moment, a crowded start, but each key is
// one user's on 4 nodes. The keys stay routed (asks bring a refused node the
// news; a crowd would be told by the owners: docs/cluster.md, "Asks",
// "Crowd hints"), and no key takes more than its ceiling in its first
// window. Before asks the users' keys were made crowded and gossiped: at
// seeds 1 and 2 one key took 1.73 x its ceiling in its first window, and
// 311,388 entries were gossiped against 81,310 routed to owners (seed 2);
// since, 1.03 / 1.07 x and 2,481 against 105,042. The crowded start's strict
// probes end once the rule's spread is learned, which where keys are
// routed is at a key's first epoch's end (Limiter::share_admits): learned
// a horizon later, they refused 4.2% / 4.6% of what the ideal admitted
// (seeds 1 / 2; 2.5% / 2.7% since), most of it requests of users below
// their limit.
TEST(FairShareSimTest, ManyUsersKeysNewAtOnceStayRoutedWithinTheirCeiling) {
  for (std::uint64_t seed : {1, 2}) {
    const Results r = run(shipped("owners1000", {"cluster.nodes=150", "traffic.0.keys=20000",
                                                 "traffic.0.rate=20000", "duration=\"14s\""}),
                          seed);
    EXPECT_LE(r.key_window_cold.value, 1.25) << seed << " " << r.key_window_cold.key;
    EXPECT_LE(r.key_window_later.value, 1.25) << seed << " " << r.key_window_later.key;
    EXPECT_LE(static_cast<double>(r.over_run), 0.002 * static_cast<double>(r.ideal)) << seed;
    EXPECT_LE(static_cast<double>(r.under_run), 0.035 * static_cast<double>(r.ideal)) << seed;
    EXPECT_LE(r.core.entries_gossiped, r.core.routed_entries_to_owners / 20) << seed;
    EXPECT_GT(r.core.share_asks, 0u) << seed;
  }
}

// The periodic job at 20 nodes, every algorithm that carries a forgiven
// debt (the bucket-like ones): within 1% of the ideal (seeds 1, 2: GCRA
// +0.14% / -0.28%, the leaky bucket +0.00% / -0.28%, smooth bursty -0.14%
// / +0.28%; GCRA +0.56% / +0.14% and the leaky bucket +0.14% / +0.28%
// before their refill kept its fraction). Before that debt was exact:
// +1.40% / +0.56%, +1.26% / +0.56% and +0.56% / +0.69%; smooth bursty,
// which admits a request ahead of its refill (in its balance and cap now),
// went to -0.83% / -0.69% at 5 nodes with the refills rounded down until it
// owed that request none.
TEST(FairShareSimTest, APeriodicJobHoldsTheIdealForEveryBucketLikeAlgorithm) {
  for (const char* algorithm : {"gcra", "leaky_bucket", "smooth_bursty"}) {
    for (const std::uint64_t seed : {1, 2}) {
      std::vector<std::string> sets = {std::string("rule.0.algorithm=\"") + algorithm + "\""};
      if (std::string(algorithm) == "smooth_bursty") sets.emplace_back("rule.0.max_delay=\"0s\"");
      const Results r = run(shipped("periodic", sets), seed);
      expect_fair(r, std::string(algorithm) + ", seed " + std::to_string(seed), 100);
      EXPECT_GT(r.core.share_debts_carried, 0u) << algorithm << ", seed " << seed;
      // A job every 5 s leaves the windows around a job's without demand:
      // the ideal's rate around it says nothing of the algorithm there, and
      // "no silence" reads the job's window against the ideal's own (a rate
      // over the idle neighbours halved the ideal: 1.39-1.48 at 200 nodes).
      EXPECT_DOUBLE_EQ(r.least_window_vs_ideal_rate(), r.least_window_vs_ideal())
          << algorithm << ", seed " << seed;
    }
  }
}

// The shipped `periodic` job on `nodes` nodes (seed 1), on `algorithm`
// (empty: the scenario's own, a token bucket), its windows checked at the
// issue's bounds (expect_windows).
Results periodic_with_windows_checked(int nodes, const std::string& algorithm = "") {
  std::vector<std::string> sets{"cluster.nodes=" + std::to_string(nodes)};
  if (!algorithm.empty()) sets.push_back("rule.0.algorithm=\"" + algorithm + "\"");
  const Results r = run(shipped("periodic", sets), 1);
  expect_windows(
      r,
      "periodic, " + (algorithm.empty() ? "" : algorithm + ", ") + std::to_string(nodes) + " nodes",
      100);
  return r;
}

// The periodic job on 200 nodes: each node asks about 5 requests a job
// (sparse), against a pool of about 120, so each kept its first request of
// each epoch beyond its share until an epoch that sees as many origins as
// the pool holds made demand dense (FairShare::kCrowdedOriginsPerPool; it
// asked for three times as many before): seeds 1-4 +22..+32% over the
// ideal, later windows up to 1.79 x the limit -> +8.8..+11.2%, 1.40 x;
// +4.20..+6.44%, 1.35 x since the bucket-like algorithms' refill accrues
// over an epoch (seed 1 +4.48%; docs/cluster.md, "A refill accrues");
// -0.42..+2.94% (seed 1 +2.94%) since each job's overshoot, which the
// idle refill forgave, is carried into the next as a debt ("A forgiven
// debt, carried"); -1.26..+1.12% (seed 1 +1.12%) since that debt is
// exact; -0.70% (seeds 1-4 -1.82..-0.70%) before a crowd's chance was
// counted once, +2.38% (seeds 1-4 -0.56..+2.38%, mean size 1.19% ->
// 0.98%) since (docs/cluster.md, "A crowd's chance, counted once"), a
// crowd's pass kept at each epoch's first request at a dense node; +0.42%
// (seeds 1-4 -1.54..+0.42%, mean size 0.84%) since that pass holds at a
// node's first request of a burst only ("A crowd's pass, once a burst"),
// and -1.26..+0.42% (mean size 0.49%) since a straggler's wake keeps every
// algorithm's debt ("A straggler's wake, for every algorithm").
// The run is still beyond the 1% at some seeds (docs/accuracy.md,
// guarantee 3), so it is bounded here at what it does, the windows at the
// issue's bounds.
TEST(FairShareSimTest, APeriodicJobOn200NodesHoldsTheWindows) {
  const Results r = periodic_with_windows_checked(200);
  EXPECT_LE(std::abs(r.error_ratio()), 0.015);
  EXPECT_GT(r.core.share_crowded_epochs, 0u);
  EXPECT_GT(r.core.share_debts_carried, 0u);
  EXPECT_GT(r.core.share_credits_carried, 0u);  // a lost shortfall, credited
}

// The same job on GCRA: its first job, a cold start at every node, fell
// short of the ideal's 119 by 13-20 (seeds 1-4), a credit each node that
// refused in it carries into the next job; but at most nodes a straggler's
// news woke the key again before an epoch there carried it, and the next
// wake dropped it: this seed -1.12% (seeds 1-4 -1.40..-0.70%). Kept through
// a straggler's wake since (docs/cluster.md, "A straggler's wake, for every
// algorithm"): +0.14% (seeds 1-4 -0.70..+0.98%).
TEST(FairShareSimTest, APeriodicJobOn200NodesOnGcraCarriesItsColdStartsShortfall) {
  const Results r = periodic_with_windows_checked(200, "gcra");
  EXPECT_LE(std::abs(r.error_ratio()), 0.01);
  EXPECT_GT(r.core.share_straggler_wakes, 0u);
  EXPECT_GT(r.core.share_credits_carried, 0u);
}

// The same job on a sliding log at 200 nodes over 120 s: each job's
// overshoot was repaid twice, by the log's own carry (held in the next
// run's window) and by the fair share's burst error taken from the next
// job's pool, and a shortfall credited once: this seed -2.46% (seeds 1-4
// -3.25..-1.67%), each overshoot followed by a shortfall about twice its
// size. The burst error now leaves out what the log holds back of it
// (docs/cluster.md, "A log's overshoot, repaid once"): -0.04% (seeds 1-8
// -0.92..-0.04%). Over 60 s the noise of twelve jobs (each +-20%) still
// takes some seeds beyond 1% (seed 2 -1.83%).
TEST(FairShareSimTest, APeriodicJobOn200NodesOnASlidingLogRepaysItsOvershootOnce) {
  const Results r =
      run(shipped("periodic",
                  {"cluster.nodes=200", "rule.0.algorithm=\"sliding_log\"", "duration=\"120s\""}),
          1);
  expect_windows(r, "periodic, sliding_log, 200 nodes, 120 s", 100);
  EXPECT_LE(std::abs(r.error_ratio()), 0.01);
}

// A job on every node every 5 s (`periodic`) on a sliding window at 200
// nodes: each job is a burst into an emptied window, whose overshoot the
// window never repays. Its crowd's first requests are thinned there as on
// the other algorithms (docs/cluster.md, "A window's crowd after a quiet
// spell"); before, every node kept its first request beyond its share:
// +48..+55% over the ideal (seeds 1-4), the first window 1.89 x and later
// ones 1.73 x. Then this seed's run was +1.50%, later windows 1.04 x (seeds
// 1-4 +0.17..+4.83%, mean +2.50%); since a sliding window carries a burst's
// debt into the next (docs/cluster.md, "A sliding window's debt") +1.33%
// (seeds 1-4 +0.17..+1.33%, mean +1.00%, later windows at most 1.11 x):
// bounded at the windows and 3%.
TEST(FairShareSimTest, APeriodicJobOn200NodesOnASlidingWindowThinsItsCrowd) {
  const Results r = periodic_with_windows_checked(200, "sliding_window");
  EXPECT_LE(std::abs(r.error_ratio()), 0.03);
  EXPECT_GT(r.core.share_passes_thinned, 0u);
}

// The same job on a sliding window at 50 nodes: each job is a burst into an
// emptied window whose overshoot nothing repays (seeds 1-4 +2.50..+5.33%,
// this seed +2.67%). The window carries it into the next job as a debt,
// once its previous window no longer holds the job (docs/cluster.md, "A
// sliding window's debt"): this seed +0.50% (seeds 1-4 +0.50..+1.00%).
TEST(FairShareSimTest, APeriodicJobOn50NodesOnASlidingWindowCarriesItsDebt) {
  const Results r = periodic_with_windows_checked(50, "sliding_window");
  EXPECT_LE(std::abs(r.error_ratio()), 0.015);
  EXPECT_GT(r.core.share_debts_carried, 0u);
}

// The same job on a fixed window at 200 nodes: each job overshot its 100
// by 5-25 (share credits from views that still showed room after the
// wake's horizon), and an idle window forgave it: seeds 1-4 +8.33..+12.33%
// over the ideal, this seed +12.33%, later windows 1.19 x. The fixed window
// carries that debt into the next job now, counted in whole windows
// (docs/cluster.md, "A fixed window's debt"): this seed +3.33%, later
// windows 1.10 x (seeds 1-4 +0.83..+3.33%); what is left of 30 s is mostly
// the first jobs' overshoot. Bounded at the windows and 5%.
TEST(FairShareSimTest, APeriodicJobOn200NodesOnAFixedWindowCarriesItsDebt) {
  const Results r = periodic_with_windows_checked(200, "fixed_window");
  EXPECT_LE(std::abs(r.error_ratio()), 0.05);
  EXPECT_GT(r.core.share_debts_carried, 0u);
  // Debts kept through a straggler's wake (FairShare::kMostStragglerUnits):
  // 189 at this seed.
  EXPECT_GT(r.core.share_straggler_wakes, 0u);
}

// The same job on 20 nodes, each asking about 50 requests of it (dense):
// with one horizon from the wake, the job's later epochs re-shared the
// window's balance from views that had not heard of the first ones'
// spending, and the debt repaid that only a job late: about a token a job
// over, seeds 1-4 +0.83..+1.50% over 30 s (+1.00% at seed 1). A fixed
// window's pool stands until its window ends, so a dense node's epoch from
// the wake shares it over FairShare::kFixedWindowWakeHorizons, the job in
// one epoch (docs/cluster.md, "A fixed window's burst in one epoch"):
// -0.33..+0.33%. Bounded at the windows and 0.5%, seeds 1-4.
TEST(FairShareSimTest, APeriodicJobOn20NodesOnAFixedWindowIsSharedInOneEpoch) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    const Results r =
        run(shipped("periodic", {"cluster.nodes=20", "rule.0.algorithm=\"fixed_window\""}), seed);
    expect_windows(r, "periodic, fixed_window, 20 nodes, seed " + std::to_string(seed), 100);
    EXPECT_LE(std::abs(r.error_ratio()), 0.005) << "seed " << seed;
  }
}

// `periodic` with its jobs started 100 ms before a window's end (3.9 s):
// each 200 ms job spans two windows, 200 of room on a fixed window.
Scenario periodic_across_a_window_start(int nodes, const std::string& algorithm,
                                        const std::string& duration = "") {
  std::vector<std::string> sets{"cluster.nodes=" + std::to_string(nodes),
                                "rule.0.algorithm=\"" + algorithm + "\"",
                                "traffic.0.start=\"3900ms\""};
  if (!duration.empty()) sets.push_back("duration=\"" + duration + "\"");
  return shipped("periodic", sets);
}

// The same job started 100 ms before a window's end (3.9 s): its burst
// spans two windows, 200 of room. An epoch from the wake over three
// horizons would end in the next window, whose limit its refill (the
// headroom at its end less now) does not count: the first window's 100
// alone were shared: -32.75% over 30 s (-36% over 120 s) in 03999aa.
// Such an epoch keeps one horizon: +0.83%, as before it.
TEST(FairShareSimTest, APeriodicJobAcrossAFixedWindowsStartIsSharedBothWindows) {
  const Results r = run(periodic_across_a_window_start(20, "fixed_window"), 1);
  EXPECT_LE(std::abs(r.error_ratio()), 0.015);
}

// The same job across a window's start on 200 nodes, each asking about 5
// requests of it, over 60 s: -6.25% (seeds 1-4 over 120 s -7.65..-6.27%).
// A credit for a job's shortfall, shared out in its first window, was
// repaid in the second by the window's own debt, so each job found the
// same shortfall again (docs/cluster.md, "A credit through a burst's
// windows"); and at the key's first job the nodes, still young, shared the
// second window's fresh 100 at a third of their weights: 38 admitted ("A
// fresh window, shared as a probe"). With both: -2.42% (seeds 1-4 over
// 120 s -2.75..-1.85%): the epochs ran past the window's end, and the later
// starters in the second window shared what the first had left. An epoch
// ends with its window, and a dense node's first in the next shares that
// window's pool as it stood at its start ("A fixed window's epoch ends with
// its window"): -0.62% (seeds 1-4 over 120 s -0.77..-0.33%); -0.46% since
// its weights come from whole bursts (seeds 1-4 over 120 s -1.10..-0.71%:
// "A fixed window's weights, from whole bursts"); -0.17% since its credit
// is half a limit (seeds 1-4 over 120 s -0.96..-0.31%: "A fixed window's
// credit, half a limit"). Bounded at the issue's 1%.
TEST(FairShareSimTest, APeriodicJobAcrossAFixedWindowsStartOn200NodesKeepsBothWindows) {
  const Results r = run(periodic_across_a_window_start(200, "fixed_window", "60s"), 1);
  EXPECT_LE(std::abs(r.error_ratio()), 0.01);
  EXPECT_GT(r.core.share_credits_carried, 0u);
}

// The same job across a window's start at 20 nodes, window by window: each
// job's first window admitted about 160 and its second about 40 (seeds
// 1-4 over 30 s: 1 s windows 0.61-0.68 x the limit above the ideal's and
// 0.61-0.69 x below it; the fewest in a later window 0.31-0.39 x the
// limit), the run within 1% only as their sum. With each epoch ending with
// its window and the next window shared as it stood at its start (docs/
// cluster.md, "A fixed window's epoch ends with its window"): 0.02-0.07 x
// either way, the fewest 0.93-0.98 x. Bounded at 0.2 x the limit either
// way and the half of the limit.
TEST(FairShareSimTest, APeriodicJobAcrossAFixedWindowsStartKeepsEachWindowNearTheIdeal) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    const Results r = run(periodic_across_a_window_start(20, "fixed_window"), seed);
    const double limit = r.limit_per_window();
    EXPECT_LE(static_cast<double>(r.worst_over_window), 0.2 * limit) << "seed " << seed;
    EXPECT_LE(static_cast<double>(r.worst_under_window), 0.2 * limit) << "seed " << seed;
    EXPECT_GE(static_cast<double>(r.least_window_admitted), 0.5 * limit) << "seed " << seed;
    EXPECT_LE(std::abs(r.error_ratio()), 0.01) << "seed " << seed;
  }
}

// The same job across a window's start on a sliding window at 20 nodes:
// the window's forgiven debt counted a whole window back at the start, as a
// fixed window's, where the sliding window frees only what its first
// window's falling weight frees (a tenth of it by the job's end), and each
// job was credited a shortfall of 90, capped at 25, that no window repays:
// +11.01% over 30 s (seeds 1-4 over 120 s +12.73..+12.84%). Counted at its
// rate from the first window's end (docs/cluster.md, "A sliding window's
// burst across a window's start"): +0.76%. Bounded at 1.5%.
TEST(FairShareSimTest, APeriodicJobAcrossASlidingWindowsStartIsNotCreditedAWholeWindow) {
  const Results r = run(periodic_across_a_window_start(20, "sliding_window"), 1);
  EXPECT_LE(std::abs(r.error_ratio()), 0.015);
  EXPECT_LT(r.core.share_debts_capped, 20u);  // 98 before
}

// The same over 120 s, seeds 1-4: each job still ran about 2 over its 109
// (+0.92..+1.64%), though a debt was carried into each: held back in the
// job's first window, it came back in its second, whose estimate weighs
// the first window's count less. The debt is held in the window after the
// wake's too (docs/cluster.md, "A sliding window's debt, held a window
// on"): -0.08..+0.27%; -0.11..+0.65% since a burst's end is its newest
// news where news carries its age (below). Bounded at the 1%,
// which three of the four seeds missed before the debt was held on.
TEST(FairShareSimTest, APeriodicJobAcrossASlidingWindowsStartRepaysItsDebtInBothWindows) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    const Results r = run(periodic_across_a_window_start(20, "sliding_window", "120s"), seed);
    EXPECT_LE(std::abs(r.error_ratio()), 0.01) << "seed " << seed;
  }
}

// The same on 200 nodes over 60 s: -2.37% (seeds 1-4 over 120 s
// -3.40..-2.64%), 1,043 debts carried, though the run was under the
// ideal. A node's burst ended at its own last request or the newest
// consumption it heard of less a horizon, as news without its age would
// say; a sliding window's news carries its age, and many nodes' requests
// stopped before the job's end, so they counted less of the window's
// refill over the burst than it freed. The newest consumption is the
// burst's end there (docs/cluster.md, "A burst's end, where news carries
// its age"): -0.99%, 193 debts (seeds 1-4 over 120 s -0.96..-0.38%).
// Bounded at 1.5% and 500 debts.
TEST(FairShareSimTest, APeriodicJobAcrossASlidingWindowsStartOn200NodesEndsWithItsNewestNews) {
  const Results r = run(periodic_across_a_window_start(200, "sliding_window", "60s"), 1);
  EXPECT_LE(std::abs(r.error_ratio()), 0.015);
  EXPECT_LT(r.core.share_debts_carried, 500u);
}

// Users asking now and then at 50 nodes (`hotkeys`' Zipf users, 300 of
// them, 12 s): a user over its limit has about 50 origins, each asking it
// every few seconds, against a pool of 20 at most. Counting every origin
// with an entry found those keys crowded (9,954 epochs), so no node kept a
// first request beyond its fiftieth of the pool, and what the idle shares
// left was lost at the bucket's cap: -6.42% (the full scenario at 50 nodes:
// -15.62%). Only origins spending at about the same time count now
// (FairShare::kCrowdedWithinUs; docs/cluster.md, "Crowded origins are
// recent ones"): -1.45% (-1.24%), 64 crowded epochs. Most of what was
// left sat on users at or below their limit, held strict by the marks of
// the cold start's crowded keys while their buckets stood near the cap; a
// burst that spent at most an eighth of its pool now drops them
// (FairShare::kDisprovedCrowdPools; docs/cluster.md, "A crowd
// disproved"): -1.63% -> -1.42% here, 129 drops (-1.57% -> -1.18%);
// -1.31%, 184 drops, since a refused request's wake keeps its pool for
// that judgement (-0.99%); -1.08%, 300 drops, since a run of small bursts
// drops them where no pool was noted at the wakes
// (FairShare::kDisprovingBurstRun; -0.78%), -1.02% since such a key keeps
// two sparse requests an epoch (-0.69%), and -0.93%, 479 drops, since a
// run's bursts are small at a quarter of the pool (FairShare::
// kRunBurstPools; -0.57%).
TEST(FairShareSimTest, UsersAskingNowAndThenAt50NodesAreNotCrowded) {
  const Results r =
      run(shipped("hotkeys", {"cluster.nodes=50", "duration=\"12s\"", "traffic.0.keys=300"}), 1);
  EXPECT_LE(std::abs(r.error_ratio()), 0.0125);
  EXPECT_LT(r.core.share_crowded_epochs, 1000u);
  EXPECT_GT(r.core.share_crowds_disproved, 0u);
}

// Sparse per-user demand (scale1000's workload on 200 nodes: 10,000 users,
// each on 5 nodes, a request now and then) loses nothing to the shares: a
// probe keeps the first request of an epoch where the rule's demand is
// sparse (strict probes admitted 53% less here).
TEST(FairShareSimTest, SparsePerUserDemandLosesNothing) {
  const Results r = run(shipped("scale1000", {"cluster.nodes=200", "duration=\"20s\""}), 1);
  EXPECT_LE(std::abs(r.error_ratio()), 0.01);
  EXPECT_GT(r.core.share_probes, 0u);
}

// `nodes100` (100 nodes, 20 requests a node a second at twice a limit of
// 1000/s) on the sliding window and log: a crowd at nearly every epoch
// (16,298 of 16,314 on the window, seed 1, traced), whose leftover shares
// stand as a balance that a window or a log never gets back. Its epochs
// share a contended balance over as a dense node's do (docs/cluster.md, "A
// contended balance in a crowd"): seed 1, the window -5.27% -> -2.12%
// (-1.54% since it counts the balance 8 times, its refill accruing), the
// log -1.28% -> -0.04% (with fair shares off -0.47% and +4.59%).
TEST(FairShareSimTest, A100NodeCrowdOnASlidingWindowOrLogSharesItsContendedBalanceOver) {
  for (const auto& [algorithm, bound] :
       {std::pair{"sliding_window", 0.02}, std::pair{"sliding_log", 0.01}}) {
    const Results r =
        run(shipped("nodes100", {std::string("rule.0.algorithm=\"") + algorithm + "\""}), 1);
    EXPECT_LE(std::abs(r.error_ratio()), bound) << algorithm;
    EXPECT_GT(r.core.share_contended_balance, 1000u) << algorithm;
  }
}

// A retry storm (`storm`: Poisson demand at twice a limit of 100/s spread
// over every node, then every node at 20 x for 2 s from 15 s), every
// replicated algorithm at 5, 20 and 50 nodes, seeds 1-2: the storm's
// seconds stay within the windows' bounds. A fixed window's own ideal
// admits two limits in a window across its start (the storm begins at
// one: 1.78-1.94 x measured) and as little as 0.14 x after it, so it is
// held against the ideal instead: at most half a limit above it in any
// window, and at least half what the ideal admits. The run's own error is
// the steady part's (docs/accuracy.md, `steady`): within 1% but for the
// sliding log and window, whose spread demand runs up to 2.7% under the
// ideal at 20-50 nodes.
void expect_storm_held_by(int nodes, const std::string& algorithm,
                          const std::vector<std::string>& options) {
  for (const std::uint64_t seed : {1, 2}) {
    std::vector<std::string> overrides = options;
    overrides.push_back("cluster.nodes=" + std::to_string(nodes));
    overrides.push_back("rule.0.algorithm=\"" + algorithm + "\"");
    const Results r = run(shipped("storm", overrides), seed);
    const std::string what =
        algorithm + ", " + std::to_string(nodes) + " nodes, seed " + std::to_string(seed);
    const double limit = r.limit_per_window();
    if (algorithm == "fixed_window") {
      EXPECT_LE(static_cast<double>(r.first_window_admitted), 2 * 100.0) << what;
      EXPECT_LE(static_cast<double>(r.worst_over_window), 0.5 * limit) << what;
      EXPECT_GE(r.least_window_vs_ideal(), 0.5) << what;
    } else {
      expect_windows(r, what, 100);
    }
    const bool spread_runs_under = algorithm == "sliding_log" || algorithm == "sliding_window";
    EXPECT_LE(std::abs(r.error_ratio()), spread_runs_under ? 0.035 : 0.01) << what;
  }
}

void expect_storm_held(int nodes) {
  for (const auto& [algorithm, options] : every_replicated_algorithm()) {
    expect_storm_held_by(nodes, algorithm, options);
  }
}

TEST(FairShareSimTest, ARetryStormOn5And20NodesHoldsTheWindows) {
  expect_storm_held(5);
  expect_storm_held(20);
}

TEST(FairShareSimTest, ARetryStormOn50NodesHoldsTheWindows) { expect_storm_held(50); }

// At 200 nodes the sliding window alone (the others: docs/accuracy.md,
// the `storm` row). Each node asks about a request a second, a sparse turn
// each: its weight at least an equal part, its balance contended below two
// refills and its turn going on through a pause, the run -0.40 / -1.08%
// against the ideal and the fewest later window 0.66 / 0.73 x the limit
// (seeds 1 / 2); -8.17 / -6.58% and 0.24 / 0.36 x before (docs/cluster.md,
// "Spread demand at 200 nodes: three fixes"). The sliding log there is
// not held at every seed: seed 2 -3.93%, its fewest later window 0.50 x
// (docs/cluster.md, "A log's wake is a turn too").
TEST(FairShareSimTest, ARetryStormOn200NodesHoldsTheSlidingWindow) {
  expect_storm_held_by(200, "sliding_window", {});
}

// At 200 nodes the bucket family, since a sparse turn goes on through a
// pause: the runs within 1% of the ideal and the windows' bounds at seeds
// 1-3 (most later window 1.37-1.49 x, fewest 0.58-0.76 x, runs -0.97 ..
// -0.52%). Smooth bursty's fewest was 0.37 x at seed 1 before that rule,
// in the second after the storm (docs/cluster.md, "Spread demand at 200
// nodes: three fixes"); the others held then too. Two tests, so that
// ctest -j2 runs them side by side (137-155 s each there, measured).
void expect_storm_held_on_200_nodes(const std::vector<std::string>& algorithms) {
  for (const auto& [algorithm, options] : every_replicated_algorithm()) {
    if (std::find(algorithms.begin(), algorithms.end(), algorithm) == algorithms.end()) continue;
    expect_storm_held_by(200, algorithm, options);
  }
}

TEST(FairShareSimTest, ARetryStormOn200NodesHoldsTheTokenBucketAndSmoothBursty) {
  expect_storm_held_on_200_nodes({"token_bucket", "smooth_bursty"});
}

TEST(FairShareSimTest, ARetryStormOn200NodesHoldsGcraAndTheLeakyBucket) {
  expect_storm_held_on_200_nodes({"gcra", "leaky_bucket"});
}

// `steady` on `algorithm` at `nodes`, seeds 1-2: the windows' bounds and
// the run within `bound` of the ideal.
void expect_spread_demand_held(int nodes, const std::string& algorithm, double bound) {
  for (const std::uint64_t seed : {1, 2}) {
    const Results r = run(shipped("steady", {"cluster.nodes=" + std::to_string(nodes),
                                             "rule.0.algorithm=\"" + algorithm + "\""}),
                          seed);
    const std::string what =
        algorithm + ", " + std::to_string(nodes) + " nodes, seed " + std::to_string(seed);
    expect_windows(r, what, 100);
    EXPECT_LE(std::abs(r.error_ratio()), bound) << what;
  }
}

// Spread demand on a sliding log (`steady` at 50 nodes: Poisson demand at
// twice a limit of 100/s, four requests a node a second), seeds 1-2: the
// run within 1% of the ideal (-0.58 / -0.25%) since a wake's epoch is a
// sparse turn too; -1.83 / -1.58% before (docs/cluster.md, "A log's wake
// is a turn too").
TEST(FairShareSimTest, SpreadDemandOn50NodesHoldsTheSlidingLog) {
  expect_spread_demand_held(50, "sliding_log", 0.01);
}

// Spread demand on a fixed window at 200 nodes (`steady`: a request a node
// a second at twice a limit of 100/s), seeds 1-2: the windows' bounds and
// the run within 1.5% of the ideal (-1.21 / -1.07%) since a node's first
// epoch after a wake is a turn covering the time since it; -1.64 / -1.54%
// before (docs/cluster.md, "A fixed window's turn after a wake"). Not
// within 1% at every seed yet.
TEST(FairShareSimTest, SpreadDemandOn200NodesKeepsAFixedWindowWithinOneAndAHalfPercent) {
  expect_spread_demand_held(200, "fixed_window", 0.015);
}

}  // namespace
}  // namespace rlimit::sim
