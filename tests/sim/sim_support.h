// Runs a shipped scenario (simulations/scenarios/NAME.toml) with overrides.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "results.h"
#include "scenario.h"
#include "sim.h"

namespace rlimit::sim {

inline Scenario shipped(const std::string& name, const std::vector<std::string>& overrides = {}) {
  const ScenarioLoad load =
      load_scenario_file(std::string(RLIMIT_SCENARIO_DIR) + "/" + name + ".toml", overrides);
  for (const std::string& e : load.errors) ADD_FAILURE() << e;
  return load.scenario.value_or(Scenario{});
}

inline Results run(const Scenario& scenario, std::uint64_t seed) {
  Results results;
  std::string error;
  EXPECT_TRUE(run_simulation(scenario, seed, RunOptions{}, results, error)) << error;
  return results;
}

// Issue 14's window bounds (docs/accuracy.md, guarantee 3): at most twice
// the burst in the first 1 s window (cold start), at most most_later_x the
// limit in any later one (the 1.5), at least least_x of the limit
// (the half) in every later window in which demand reached the
// limit (and the perfect limiter admitted half of it: not a window that
// catches only a burst's tail).
inline void expect_windows(const Results& r, const std::string& what, double burst,
                           double most_later_x = 1.5, double least_x = 0.5) {
  const double limit = r.limit_per_window();
  EXPECT_LE(static_cast<double>(r.first_window_admitted), 2 * burst) << what;
  EXPECT_LE(static_cast<double>(r.worst_window_admitted), most_later_x * limit) << what;
  EXPECT_GE(static_cast<double>(r.least_window_admitted), least_x * limit) << what;
}

}  // namespace rlimit::sim
