// Fair shares at 50 nodes in a short run: the paths that need a crowd
// (FairShare::kCrowdedNodes live nodes: a crowd's thinned first requests,
// keys new at once) driven by the simulator in sim_test, which
// scripts/sanitize.sh runs under ASan; the longer bounds are in
// fair_share_sim_test.cc (label long_sim, Release only).
#include <gtest/gtest.h>

#include "sim_support.h"

namespace rlimit::sim {
namespace {

// `coldkeys` at 50 nodes over its first 3 s of traffic (seed 1: first
// window 1.20 x, later ones 0.88-1.20 x the limit; 2,976 first requests
// thinned, 50 starts crowded by keys new at once).
TEST(FairShareShortSimTest, ManyKeysOn50NodesThinAndProbeWithinTheBounds) {
  const Results r = run(shipped("coldkeys", {"cluster.nodes=50", "duration=\"6s\""}), 1);
  expect_windows(r, "coldkeys, 50 nodes, 6 s", 100 * 10.0);
  EXPECT_GT(r.core.share_passes_thinned, 0u);
  EXPECT_GT(r.core.share_crowded_starts, 0u);
}

}  // namespace
}  // namespace rlimit::sim
