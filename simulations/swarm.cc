#include "swarm.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "report.h"
#include "rng.h"
#include "sim.h"

namespace rlimit::sim {
namespace {

std::string draw(const SwarmRange& range, Rng& rng) {
  const double u = rng.uniform();
  char buf[64];
  switch (range.kind) {
    case SwarmKind::kInteger: {
      const auto lo = static_cast<long long>(range.low);
      const auto hi = static_cast<long long>(range.high);
      std::snprintf(buf, sizeof buf, "%lld",
                    lo + static_cast<long long>(rng() % static_cast<std::uint64_t>(hi - lo + 1)));
      break;
    }
    case SwarmKind::kFloat:
      std::snprintf(buf, sizeof buf, "%.4f", range.low + u * (range.high - range.low));
      break;
    case SwarmKind::kDuration:
      std::snprintf(buf, sizeof buf, "\"%lldus\"",
                    static_cast<long long>(std::llround(range.low + u * (range.high - range.low))));
      break;
  }
  return range.path + "=" + buf;
}

// A shell word: single-quoted when it holds anything special.
std::string shell_word(const std::string& word) {
  if (word.find_first_of(" \"'$\\*?[]{}()<>|;&`") == std::string::npos) return word;
  std::string out = "'";
  for (const char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::vector<SwarmRange> default_swarm_ranges() {
  return {
      {"network.loss", SwarmKind::kFloat, 0.0, 0.3},
      {"network.delay", SwarmKind::kDuration, 100, 20'000},
      {"network.jitter", SwarmKind::kDuration, 0, 10'000},
      {"network.duplicate", SwarmKind::kFloat, 0.0, 0.1},
      {"network.reorder", SwarmKind::kFloat, 0.0, 0.2},
  };
}

bool run_swarm(const std::string& text, const std::string& file,
               const std::vector<std::string>& overrides, std::uint64_t base_seed,
               std::uint32_t count, SwarmReport& report, std::string& error,
               std::ostream* progress) {
  const ScenarioLoad base = load_scenario(text, file, overrides);
  if (!base.scenario) {
    error = base.errors.empty() ? "invalid scenario" : base.errors.front();
    return false;
  }
  const std::vector<SwarmRange> ranges =
      base.scenario->swarm.empty() ? default_swarm_ranges() : base.scenario->swarm;
  for (std::uint32_t i = 0; i < count; ++i) {
    SwarmRun run;
    run.seed = base_seed + i;
    Rng rng(derive_seed(run.seed, 77));
    for (const SwarmRange& range : ranges) run.overrides.push_back(draw(range, rng));
    std::vector<std::string> all = overrides;
    all.insert(all.end(), run.overrides.begin(), run.overrides.end());
    const ScenarioLoad load = load_scenario(text, file, all);
    if (!load.scenario) {
      error = "swarm run " + std::to_string(run.seed) + ": " + load.errors.front();
      return false;
    }
    if (!run_simulation(*load.scenario, run.seed, RunOptions{.keep_series = false}, run.results,
                        error)) {
      return false;
    }
    run.results.series = Series{};
    const double per_window = std::max(1e-9, run.results.limit_per_window());
    // The worst window catches short spikes; the peak cumulative excess
    // catches a cluster that never recovers (it grows without bound).
    run.score = static_cast<double>(std::max(run.results.worst_over_window, run.results.peak_excess)) /
                per_window;
    if (progress != nullptr) {
      char buf[160];
      std::snprintf(
          buf, sizeof buf,
          "  seed %-8llu admitted %+7.2f%%  score %7.2f limits  peak excess %7lld  ",
          static_cast<unsigned long long>(run.seed), 100 * run.results.error_ratio(), run.score,
          static_cast<long long>(run.results.peak_excess));
      *progress << buf;
      for (const std::string& o : run.overrides) *progress << " " << o;
      *progress << "\n";
    }
    report.runs.push_back(std::move(run));
    const SwarmRun& last = report.runs.back();
    const SwarmRun& worst = report.runs[report.worst];
    if (last.score > worst.score ||
        (last.score == worst.score && last.results.peak_excess > worst.results.peak_excess)) {
      report.worst = report.runs.size() - 1;
    }
  }
  return true;
}

std::string reproduce_command(const std::string& file,
                              const std::vector<std::string>& base_overrides, const SwarmRun& run) {
  std::string command =
      "build/bin/rlimit-sim --scenario " + shell_word(file) + " --seed " + std::to_string(run.seed);
  for (const std::string& o : base_overrides) command += " --set " + shell_word(o);
  for (const std::string& o : run.overrides) command += " --set " + shell_word(o);
  return command;
}

}  // namespace rlimit::sim
