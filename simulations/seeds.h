// --seeds K: one scenario run with K consecutive seeds, as it is (unlike
// --swarm, nothing is drawn), and what the runs say together. A cluster's
// accuracy under chaotic load (aligned bursts at 200 nodes, say) spreads a
// point or more between seeds, so a change is judged on the mean of many
// runs, not on one (docs/cluster.md, "Seeds"). Each run is reproducible on
// its own with its seed and the same --set overrides.
//
// run_seeds runs up to `jobs` simulations at once, on threads of its own;
// the runs share nothing but the (read-only) scenario, and the report is in
// seed order whatever the jobs, so it is the same bit for bit.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "results.h"
#include "scenario.h"

namespace rlimit::sim {

// The guarantee the summary counts runs against: a long run within 1% of the
// ideal (docs/accuracy.md, "What the cluster guarantees").
inline constexpr double kSeedsRunTolerance = 0.01;
// The most simulations run_seeds runs at once, and the most runs of one
// --seeds (each keeps its figures in memory until the report).
inline constexpr std::uint32_t kMaxSeedJobs = 64;
inline constexpr std::uint32_t kMaxSeedRuns = 1'000'000;

// Figures in limits per window; -1 where the run had no such window.
struct SeedRun {
  std::uint64_t seed = 0;
  std::uint64_t digest = 0;
  double vs_ideal = 0;           // admitted / ideal - 1
  double first_limits = 0;       // the most in a first window (cold start)
  double most_later_limits = 0;  // the most in a later window
  double fewest_later_limits = -1;
  double ideal_fewest_later_limits = -1;
  // The least share of the ideal's admissions in the same window (a ratio,
  // not limits; Results::least_window_vs_ideal()).
  double fewest_vs_ideal = -1;
  // The least share of the ideal's rate around the window
  // (Results::least_window_vs_ideal_rate).
  double fewest_vs_ideal_rate = -1;
};

struct SeedsSummary {
  std::size_t runs = 0;
  double mean_vs_ideal = 0;
  double mean_abs_vs_ideal = 0;  // the mean of |admitted / ideal - 1|
  // The runs' standard deviation (n - 1; 0 for one run) and the mean's
  // standard error (that over sqrt(runs)): two configurations' means that
  // differ by less than a few standard errors do not tell them apart.
  double sd_vs_ideal = 0;
  double mean_standard_error = 0;
  double min_vs_ideal = 0;
  double max_vs_ideal = 0;
  std::size_t beyond_tolerance = 0;  // runs with |vs ideal| > kSeedsRunTolerance
  // The extremes over the runs, and the seed that reached each.
  double most_first_limits = 0;
  std::uint64_t most_first_seed = 0;
  double most_later_limits = 0;
  std::uint64_t most_later_seed = 0;
  double fewest_later_limits = -1;  // -1: no run had such a window
  std::uint64_t fewest_later_seed = 0;
  double ideal_fewest_later_limits = -1;
  std::uint64_t ideal_fewest_later_seed = 0;
  double fewest_vs_ideal = -1;
  std::uint64_t fewest_vs_ideal_seed = 0;
  double fewest_vs_ideal_rate = -1;
  std::uint64_t fewest_vs_ideal_rate_seed = 0;
};

struct SeedsReport {
  std::string scenario;  // its name
  std::uint32_t nodes = 0;
  std::vector<SeedRun> runs;  // in seed order
  SeedsSummary summary;
};

// One run's figures.
SeedRun seed_run(const Results& results);
// What `runs` say together (runs may be empty: all zeros).
SeedsSummary summarize(const std::vector<SeedRun>& runs);

// Runs `scenario` with seeds base_seed .. base_seed + count - 1, `jobs` at a
// time (1..kMaxSeedJobs). On failure returns false and sets `error` (the
// lowest failing seed's). `progress` (may be null) gets a line as each run
// ends, in the order they end.
bool run_seeds(const Scenario& scenario, std::uint64_t base_seed, std::uint32_t count,
               std::uint32_t jobs, SeedsReport& report, std::string& error, std::ostream* progress);

// A table a person reads, and JSON for machines.
void print_seeds(const SeedsReport& report, std::ostream& out);
void write_seeds_json(const SeedsReport& report, std::ostream& out);

}  // namespace rlimit::sim
