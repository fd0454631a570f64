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

}  // namespace rlimit::sim
