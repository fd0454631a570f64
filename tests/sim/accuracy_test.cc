// The accuracy bounds of docs/accuracy.md, on short seeded runs. A change to
// the core that makes the cluster less accurate fails here.
#include <gtest/gtest.h>

#include <cmath>

#include "sim_support.h"

namespace rlimit::sim {
namespace {

// 5 nodes, 5% loss, Poisson demand at twice the limit: over the run the
// cluster admits what one perfect limiter admits, within 2%.
TEST(AccuracyTest, SteadyDemandAtTwiceTheLimitWithLossAdmitsTheIdealWithin2Percent) {
  for (const char* name : {"steady", "loss1", "loss10"}) {
    for (std::uint64_t seed : {1, 2, 3}) {
      const Results r = run(shipped(name), seed);
      EXPECT_LE(std::abs(r.error_ratio()), 0.02) << name << " seed " << seed;
      // Staleness bound: (N - 1) x L x d is a few tokens; a window may be off
      // by a fraction of one limit, never more.
      EXPECT_LT(r.worst_over_window, 0.25 * r.limit_per_window()) << name << " seed " << seed;
      EXPECT_GT(r.ideal, 0u);
    }
  }
}

// A 2|3 partition of 10 s admits up to (P - 1) x L x 10 s more than the
// ideal, then every node pays the debt back.
TEST(AccuracyTest, PartitionExcessIsBoundedThenRepaid) {
  for (std::uint64_t seed : {1, 2}) {
    const Results r = run(shipped("partition"), seed);
    const double bound = (2 - 1) * 100.0 * 10;  // (P - 1) x L x duration
    EXPECT_LE(r.peak_excess, bound * 1.1) << seed;
    EXPECT_GE(r.peak_excess, bound * 0.5) << seed;  // the partition did take effect
    EXPECT_NEAR(r.peak_excess_at_us, 20'000'000, 500'000) << seed;
    EXPECT_LE(std::abs(r.final_excess), 0.01 * static_cast<double>(r.ideal)) << seed;
    ASSERT_EQ(r.convergence.size(), 1u);
    EXPECT_GE(r.convergence[0].counters_after_us, 0) << seed;
    EXPECT_LE(r.convergence[0].counters_after_us, 2'000'000) << seed;
  }
}

// Finding 4 of docs/accuracy.md: under 10% loss (seed 6) and 29% loss (the
// swarm's worst run before the fix), membership stayed split after the heal
// and the cluster over-admitted without bound (+62%, +61%). Now every node
// sees all 4 peers at the end, the excess stays within the partition bound
// (P - 1) x L x 10 s, and it is repaid.
TEST(AccuracyTest, PartitionUnderLossHealsAndIsRepaid) {
  const std::vector<std::vector<std::string>> cases = {
      {"network.loss=0.1"},
      {"network.loss=0.2947", "network.delay=\"10886us\"", "network.jitter=\"626us\"",
       "network.duplicate=0.0571", "network.reorder=0.1384"},
  };
  const std::vector<std::uint64_t> seeds = {6, 3};
  for (std::size_t c = 0; c < cases.size(); ++c) {
    const Results r = run(shipped("partition", cases[c]), seeds[c]);
    for (std::size_t i = 0; i < r.per_node.size(); ++i) {
      EXPECT_EQ(r.per_node[i].live_peers_end, 4) << "case " << c << " node " << i;
    }
    const double bound = (2 - 1) * 100.0 * 10;  // (P - 1) x L x duration
    EXPECT_LE(r.peak_excess, bound * 1.1) << "case " << c;
    EXPECT_LE(std::abs(r.final_excess), 0.01 * static_cast<double>(r.ideal)) << "case " << c;
    ASSERT_EQ(r.convergence.size(), 1u);
    EXPECT_GE(r.convergence[0].counters_after_us, 0) << "case " << c;
    EXPECT_LE(r.convergence[0].counters_after_us, 2'000'000) << "case " << c;
  }
}

// A partition of 80 s, longer than dead_retention (60 s): each side forgets
// the other, and only the seed rejoin (every rejoin_interval, 10 s) brings
// them back. The excess is the partition's, (P - 1) x L x 80 s, not more.
TEST(AccuracyTest, PartitionLongerThanDeadRetentionHealsThroughTheSeeds) {
  const Results r = run(
      shipped("partition", {"network.loss=0.1", "duration=\"150s\"", "partition.0.end=\"90s\""}),
      6);
  for (std::size_t i = 0; i < r.per_node.size(); ++i) {
    EXPECT_EQ(r.per_node[i].live_peers_end, 4) << "node " << i;
  }
  const double bound = (2 - 1) * 100.0 * 80;
  EXPECT_LE(r.peak_excess, bound * 1.1);
  EXPECT_LE(r.final_excess, 0.1 * bound);
  ASSERT_EQ(r.convergence.size(), 1u);
  EXPECT_GE(r.convergence[0].counters_after_us, 0);
  EXPECT_LE(r.convergence[0].counters_after_us, 12'000'000);
}

// With both sides over the limit, the debts are equal and the nodes' views
// of the balance agree again once the counters have spread.
TEST(AccuracyTest, PartitionWithBothSidesSaturatedConverges) {
  const Results r = run(shipped("partition", {"traffic.0.demand=3"}), 1);
  ASSERT_EQ(r.convergence.size(), 1u);
  EXPECT_GE(r.convergence[0].balances_after_us, 0);
  EXPECT_LE(r.convergence[0].balances_after_us, 2'000'000);
}

// Finding 2 of docs/accuracy.md: after the 2|3 partition the 2-node side
// (which sat at the cap) owed about 120 tokens more than the 3-node side,
// the balances never agreed again, and nodes 0 and 1 admitted nothing from
// 28 s to the end. Now peers' balances under the same counters raise theirs
// (docs/cluster.md, "Balances after a partition"): the balances agree within
// 1 token 7.9 s after the heal (the cluster is repaying its debt until about
// 28 s), nodes 0 and 1 admit again, and the cluster still admits the ideal.
TEST(AccuracyTest, BalancesAgreeAfterAPartitionAndTheSideThatSatAtTheCapAdmits) {
  const Results r = run(shipped("partition"), 1);
  ASSERT_EQ(r.convergence.size(), 1u);
  EXPECT_GE(r.convergence[0].balances_after_us, 0);  // before: never (spread 123 at the end)
  EXPECT_LE(r.convergence[0].balances_after_us, 10'000'000);
  EXPECT_LE(r.convergence[0].spread_last, 1.0);
  const std::size_t samples = r.series.samples();
  const auto sample_of = [&](TimeUs t) { return static_cast<std::size_t>(t / r.series.sample_us); };
  for (std::size_t node : {0, 1}) {
    std::uint64_t after = 0;  // tokens admitted from 28 s to the end
    for (std::size_t s = sample_of(28'000'000); s < samples; ++s) {
      after += r.series.per_node[node * samples + s];
    }
    EXPECT_GE(after, 150u) << "node " << node;  // before: 0; now 247 and 239
  }
  // Still within the partition bound, and repaid.
  EXPECT_LE(r.peak_excess, (2 - 1) * 100.0 * 10 * 1.1);
  EXPECT_LE(std::abs(r.final_excess), 0.01 * static_cast<double>(r.ideal));
  EXPECT_LE(std::abs(r.error_ratio()), 0.01);
}

// A one-way partition: the side that can still hear the other is charged;
// the excess stays below the symmetric case.
TEST(AccuracyTest, AsymmetricPartitionIsRepaid) {
  const Results r = run(shipped("asymmetric"), 1);
  EXPECT_LE(r.peak_excess, 1100);
  EXPECT_LE(std::abs(r.final_excess), 0.01 * static_cast<double>(r.ideal));
  EXPECT_GT(r.network.partitioned, 0u);
}

// Requests that fail open while a node is down are real excess the cluster
// never hears of; everything else is still the ideal.
TEST(AccuracyTest, CrashExcessIsWhatFailedOpen) {
  const Results r = run(shipped("crash"), 1);
  EXPECT_GT(r.fail_open, 0u);
  EXPECT_NEAR(static_cast<double>(r.final_excess), static_cast<double>(r.fail_open),
              0.02 * static_cast<double>(r.ideal));
  EXPECT_EQ(r.per_node[2].restarts, 1u);
  ASSERT_EQ(r.convergence.size(), 1u);
  EXPECT_GE(r.convergence[0].counters_after_us, 0);
  EXPECT_LE(r.convergence[0].counters_after_us, 2'000'000);
}

// Finding 3 of docs/accuracy.md: the restarted node was charged with the
// whole retained history (about 1,300 tokens) and admitted nothing for the
// rest of the run. Now history is charged up to one burst per key
// (docs/cluster.md, "Restarts and new nodes"): node 2 admits again within
// 1 s of its restart, keeps admitting, its balance agrees with the others'
// within 2 s, and the cluster's excess is still only what failed open.
TEST(AccuracyTest, RestartedNodeAdmitsAgainWithinOneSecond) {
  for (std::uint64_t seed : {1, 2, 3}) {
    const Results r = run(shipped("crash"), seed);
    const std::size_t samples = r.series.samples();
    const auto sample_of = [&](TimeUs t) {
      return static_cast<std::size_t>(t / r.series.sample_us);
    };
    const std::size_t restart = sample_of(15'000'000);
    std::size_t first = samples;
    std::uint64_t after = 0;
    for (std::size_t s = restart; s < samples; ++s) {
      const std::uint32_t admitted = r.series.per_node[2 * samples + s];
      if (admitted > 0 && first == samples) first = s;
      if (s >= sample_of(16'000'000)) after += admitted;
    }
    EXPECT_LE(first, sample_of(16'000'000)) << "seed " << seed;
    // And it keeps admitting (before: 0 from 15 s to the end). How much
    // depends on its tick phase, as every node's share does (58 to 201 tokens
    // of 14 s for these seeds; moving the restart by 3.7 ms gives 280).
    EXPECT_GE(after, 40u) << "seed " << seed;
    ASSERT_EQ(r.convergence.size(), 1u);
    EXPECT_GE(r.convergence[0].balances_after_us, 0) << "seed " << seed;
    EXPECT_LE(r.convergence[0].balances_after_us, 2'000'000) << "seed " << seed;
    EXPECT_NEAR(static_cast<double>(r.final_excess), static_cast<double>(r.fail_open),
                0.02 * static_cast<double>(r.ideal))
        << "seed " << seed;
  }
}

TEST(AccuracyTest, ClockDriftOfOnePercentStaysWithinTwoPercent) {
  const Results r = run(shipped("skew", {"duration=\"30s\""}), 1);
  EXPECT_LE(std::abs(r.error_ratio()), 0.02);
}

TEST(AccuracyTest, EveryRuleKindHoldsItsLimit) {
  for (const char* name : {"multirule", "inline", "bursts"}) {
    const Results r = run(shipped(name, {"duration=\"15s\""}), 1);
    EXPECT_LE(std::abs(r.error_ratio()), 0.02) << name;
    EXPECT_EQ(r.core.invalid_checks, 0u) << name;
  }
}

// Zipf-skewed demand over many per-user buckets. (With 1000 keys the gossip
// payloads fill up and accuracy drops to about 1%: docs/accuracy.md.)
TEST(AccuracyTest, HotKeysOverManyKeysStayWithinTwoPercent) {
  const Results r = run(shipped("hotkeys", {"duration=\"12s\"", "traffic.0.keys=200"}), 1);
  EXPECT_LE(std::abs(r.error_ratio()), 0.02);
  EXPECT_GT(r.over_run, 0u);  // cold start: each node's first burst per key
}

// A path MTU below the configured one drops full gossip datagrams: counted,
// and the cluster over-admits. The simulator must show it.
TEST(AccuracyTest, MtuBelowTheConfiguredOneIsCountedAndHurts) {
  const Results r = run(shipped("mtu", {"duration=\"8s\""}), 1);
  EXPECT_GT(r.network.mtu_dropped, 0u);
  EXPECT_GT(r.error_ratio(), 0.05);
}

// A reset on node 0, whose clients send nothing, while nodes 1-4 take the
// traffic (docs/cluster.md, "Reset"): the cluster admits each reset's burst
// as the ideal does, so the reset reached every node (a reset of node 0's
// state alone admitted 164 of the ideal's 461, -64%), and every node's
// balance agrees again shortly after each reset; also under 10% loss and
// with node 4 down over the second reset. Node 4 restarts (at 25 s) with its
// memory lost and a full bucket, and admits up to that burst before it hears
// of the cluster's consumption (docs/cluster.md, "Restarts and new nodes";
// the reset at 30 s forgives that debt with the rest): at most one burst over.
TEST(AccuracyTest, AResetReachesTheWholeClusterAsTheIdealSeesIt) {
  const std::vector<std::vector<std::string>> cases = {{}, {"network.loss=0.1"}, {}};
  for (std::size_t c = 0; c < cases.size(); ++c) {
    Scenario scenario = shipped("reset", cases[c]);
    if (c == 2)
      scenario.crashes.push_back({.node = 4, .at_us = 15'000'000, .restart_us = 25'000'000});
    for (std::uint64_t seed : {1, 2, 3}) {
      const Results r = run(scenario, seed);
      EXPECT_EQ(r.resets, 3u) << "case " << c << " seed " << seed;
      EXPECT_GE(r.error_ratio(), -0.05) << "case " << c << " seed " << seed;
      const double over = static_cast<double>(r.admitted) - static_cast<double>(r.ideal);
      EXPECT_LE(over, c == 2 ? 100 + 0.05 * static_cast<double>(r.ideal)
                             : 0.05 * static_cast<double>(r.ideal))
          << "case " << c << " seed " << seed;
      EXPECT_GT(r.ideal, 400u) << "case " << c << " seed " << seed;
    }
  }
}

// Owner routing under membership churn (issue 15): churn300 scaled to 40
// nodes, 4,000 users and 4,000 requests/s, with a node crashing every 2 s
// from 14 s and back 3 s later. Every per-user key is routed (nothing is
// gossiped), no round defers, and the consumption of the nodes that leave,
// and of the owners that change, is not lost: within 1% of the ideal, no
// key's later window above 1.5x its ceiling.
TEST(AccuracyTest, OwnerRoutingUnderChurnLosesNoConsumption) {
  std::string crashes = "crash=[";
  const int nodes[] = {3, 21, 1, 37, 10, 5, 29, 6};
  for (int i = 0; i < 8; ++i) {
    crashes += std::string(i ? ", " : "") + "{node = " + std::to_string(nodes[i]) + ", at = \"" +
               std::to_string(14 + 2 * i) + "s\", restart = \"" + std::to_string(17 + 2 * i) +
               "s\"}";
  }
  crashes += "]";
  for (std::uint64_t seed : {1, 2}) {
    const Results r = run(shipped("churn300", {"cluster.nodes=40", "cluster.routed_min_members=1",
                                               "traffic.0.keys=4000",
                                               "traffic.0.rate=4000", "duration=\"32s\"", crashes}),
                          seed);
    EXPECT_LE(std::abs(r.error_ratio()), 0.01) << seed;
    EXPECT_LE(static_cast<double>(r.over_run), 0.005 * static_cast<double>(r.ideal)) << seed;
    EXPECT_LE(r.key_window_later.value, 1.5) << seed << " " << r.key_window_later.key;
    EXPECT_EQ(r.core.gossip_backlog_deferred, 0u) << seed;
    EXPECT_EQ(r.core.entries_gossiped, 0u) << seed;
    EXPECT_GT(r.core.routed_entries_to_owners, 0u) << seed;
    EXPECT_GT(r.core.routed_newcomer_keys, 0u) << seed;  // owners sent whole keys to newcomers
    // The crashes happened and membership noticed. Whether a node is declared
    // dead before it is back 3 s later is a race (suspected after about 1 s,
    // dead 2 s later), so deaths are not counted on.
    std::uint32_t restarts = 0;
    for (const NodeResult& node : r.per_node) restarts += node.restarts;
    EXPECT_EQ(restarts, 8u) << seed;
    EXPECT_GT(r.core.suspicions, 0u) << seed;
  }
}

TEST(DeterminismTest, OneSeedGivesOneRun) {
  for (const char* name : {"steady", "partition", "bursts", "crash"}) {
    const Scenario s = shipped(name, {"duration=\"12s\""});
    const Results a = run(s, 7);
    const Results b = run(s, 7);
    EXPECT_EQ(a.digest, b.digest) << name;
    EXPECT_EQ(a.admitted, b.admitted) << name;
    EXPECT_EQ(a.network.delivered, b.network.delivered) << name;
    EXPECT_EQ(a.series.per_node, b.series.per_node) << name;
    const Results c = run(s, 8);
    EXPECT_NE(a.digest, c.digest) << name;
  }
}

TEST(DeterminismTest, SeriesAddUpToTheTotals) {
  const Results r = run(shipped("multirule", {"duration=\"10s\""}), 3);
  std::uint64_t admitted = 0, ideal = 0, per_node = 0;
  for (std::size_t b = 0; b < r.series.samples(); ++b) {
    admitted += r.series.admitted[b];
    ideal += r.series.ideal[b];
  }
  for (std::uint32_t v : r.series.per_node) per_node += v;
  EXPECT_EQ(admitted, r.admitted);
  EXPECT_EQ(ideal, r.ideal);
  EXPECT_EQ(per_node, r.admitted);
  EXPECT_EQ(r.over_run - r.under_run, r.admitted - r.ideal);
}

}  // namespace
}  // namespace rlimit::sim
