// Every algorithm a rule can select, shared by a simulated cluster
// (simulations/scenarios/algo_*.toml): the bounds docs/algorithms.md states
// for each, on short seeded runs. The ideal is one Limiter running the same
// rule on every request, so "within x% of ideal" compares like with like.
#include <gtest/gtest.h>

#include <cmath>

#include "sim_support.h"

namespace rlimit::sim {
namespace {

// Replicated algorithms (exact and approximate): five nodes at 1% loss, 50
// users each at twice their limit, admit what one limiter would within 2%,
// and no 1 s window exceeds the ideal by a quarter of the limit.
TEST(AlgorithmsSimTest, ReplicatedAlgorithmsHoldTheirLimitAcrossTheCluster) {
  for (const char* name :
       {"algo_leaky_meter", "algo_leaky_shaper", "algo_fixed_window", "algo_sliding_window",
        "algo_sliding_log", "algo_gcra", "algo_smooth_bursty", "algo_smooth_warming_up"}) {
    for (std::uint64_t seed : {1, 2}) {
      const Results r = run(shipped(name, {"duration=\"10s\""}), seed);
      EXPECT_GT(r.ideal, 0u) << name;
      EXPECT_LE(std::abs(r.error_ratio()), 0.02) << name << " seed " << seed;
      EXPECT_LT(r.worst_over_window, 0.25 * r.limit_per_window()) << name << " seed " << seed;
    }
  }
}

// Concurrency is local to each node (local = true): each of the 5 nodes
// holds up to its own 10 slots, so the cluster admits up to 5 times what one
// limiter would, and at least what one limiter would.
TEST(AlgorithmsSimTest, LocalConcurrencyIsEnforcedPerNode) {
  const Results r = run(shipped("algo_concurrency", {"duration=\"10s\""}), 1);
  const auto ideal = static_cast<double>(r.ideal);
  ASSERT_GT(ideal, 0);
  EXPECT_LE(static_cast<double>(r.admitted), 5 * ideal * 1.05);
  EXPECT_GE(static_cast<double>(r.admitted), 2 * ideal);  // demand is 3x one limit
  // With demand below 5 nodes' capacity, nothing local refuses much: what
  // each node admits is its demand up to 10 in flight.
  for (const auto& node : r.per_node) EXPECT_GT(node.admitted, 0u);
}

// Holding leases: one node, a request every 10 ms each holding 50 ms (5 in
// flight of 10 slots): the releases keep the rule admitting everything.
TEST(AlgorithmsSimTest, ReleasedLeasesFreeTheirSlots) {
  const Results r = run(shipped("algo_concurrency", {"duration=\"5s\"", "cluster.nodes=1",
                                                      "traffic.0.rate=100",
                                                      "traffic.0.arrival=\"constant\""}),
                        1);
  EXPECT_EQ(r.admitted, r.arrivals);
  EXPECT_EQ(r.ideal, r.arrivals);
  // Without releases (hold 0: leases only expire, after 10 s), the 10 slots
  // run out at once.
  const Results held = run(shipped("algo_concurrency", {"duration=\"5s\"", "cluster.nodes=1",
                                                         "traffic.0.rate=100",
                                                         "traffic.0.arrival=\"constant\"",
                                                         "traffic.0.hold=\"0s\""}),
                           1);
  EXPECT_EQ(held.admitted, 10u);
}

}  // namespace
}  // namespace rlimit::sim
