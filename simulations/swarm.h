// --swarm K: K runs of one scenario, each with its own seed and with fault
// parameters drawn at random within ranges (the scenario's [swarm] table, or
// defaults), looking for the worst case. Each run is reproducible on its own
// with the seed and the --set overrides it reports.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "results.h"
#include "scenario.h"

namespace rlimit::sim {

struct SwarmRun {
  std::uint64_t seed = 0;
  std::vector<std::string> overrides;  // the drawn parameters, as --set arguments
  Results results;                     // without the time series
  double score = 0;  // max(worst window over, peak excess), in limits per window
};

struct SwarmReport {
  std::vector<SwarmRun> runs;
  std::size_t worst = 0;  // index into runs
};

// Used when the scenario has no [swarm] table.
std::vector<SwarmRange> default_swarm_ranges();

// Runs seeds base_seed .. base_seed + count - 1. `progress` (may be null)
// gets one line per run.
bool run_swarm(const std::string& text, const std::string& file,
               const std::vector<std::string>& overrides, std::uint64_t base_seed,
               std::uint32_t count, SwarmReport& report, std::string& error,
               std::ostream* progress);

// The shell command that reproduces one run.
std::string reproduce_command(const std::string& file,
                              const std::vector<std::string>& base_overrides, const SwarmRun& run);

}  // namespace rlimit::sim
