// rlimit-sim: runs a chaos scenario of a whole rlimit cluster on virtual time
// and reports how its admissions compare with a perfect limiter's. See
// docs/accuracy.md.
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <sstream>

#include "report.h"
#include "scenario.h"
#include "seeds.h"
#include "sim.h"
#include "svg.h"
#include "swarm.h"

namespace {

bool write_file(const std::string& path, const std::string& what,
                const std::function<void(std::ostream&)>& write) {
  std::ofstream out(path, std::ios::binary);
  if (out) write(out);
  if (!out) {
    std::cerr << "rlimit-sim: cannot write the " << what << " to " << path << "\n";
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace rlimit::sim;
  CLI::App app{
      "rlimit-sim: a deterministic chaos simulation of an rlimit cluster (the real core, "
      "on virtual time, over a simulated network)"};
  std::string scenario_path;
  std::uint64_t seed = 1;
  std::string json_path, csv_path, svg_path, requests_path;
  std::uint32_t swarm = 0;
  std::uint32_t seeds = 0;
  std::uint32_t jobs = 1;
  std::vector<std::string> overrides;
  app.add_option("--scenario", scenario_path, "Scenario file (TOML; see simulations/scenarios/)")
      ->required();
  app.add_option("--seed", seed, "Seed: one seed gives one run, bit for bit");
  app.add_option("--json", json_path, "Write the figures as JSON to this file");
  app.add_option("--csv", csv_path, "Write the time series (per sample) as CSV to this file");
  app.add_option("--svg", svg_path, "Write the plot of admitted rate against the limit (SVG)");
  CLI::Option* requests_option =
      app.add_option("--requests", requests_path,
                     std::string("Write every request's decision as CSV to this file (") +
                         kRequestsHeader + "; simulations/lost_at_cap.py reads it)");
  app.add_option("--swarm", swarm,
                 "Run K seeds from --seed with fault parameters drawn at random; report the worst")
      ->excludes(requests_option);
  CLI::Option* seeds_option =
      app.add_option("--seeds", seeds,
                     "Run the scenario as it is with K seeds from --seed; report each run and "
                     "their mean and extremes")
          ->check(CLI::Range(1u, kMaxSeedRuns))
          ->excludes("--swarm")
          ->excludes("--csv")
          ->excludes("--svg")
          ->excludes("--requests");
  app.add_option("--jobs", jobs, "With --seeds: how many runs at once (threads)")
      ->check(CLI::Range(1u, kMaxSeedJobs))
      ->needs(seeds_option);
  app.add_option("--set", overrides, "Override a scenario field: key.path=value (TOML value)")
      ->take_all();
  app.set_version_flag("--version", std::string("rlimit-sim ") + RLIMIT_VERSION);
  CLI11_PARSE(app, argc, argv);

  std::ifstream in(scenario_path, std::ios::binary);
  if (!in) {
    std::cerr << "rlimit-sim: cannot read " << scenario_path << "\n";
    return 2;
  }
  std::ostringstream text;
  text << in.rdbuf();

  if (swarm > 0) {
    SwarmReport report;
    std::string error;
    std::cout << "rlimit-sim: swarm of " << swarm << " runs of " << scenario_path << " from seed "
              << seed << "\n";
    if (!run_swarm(text.str(), scenario_path, overrides, seed, swarm, report, error, &std::cout)) {
      std::cerr << "rlimit-sim: " << error << "\n";
      return 2;
    }
    const SwarmRun& worst = report.runs[report.worst];
    std::cout << "\nWorst case (largest excess over the ideal, in a window or cumulated): seed "
              << worst.seed << "\n";
    std::cout << "  reproduce: " << reproduce_command(scenario_path, overrides, worst) << "\n\n";
    print_table(worst.results, std::cout);
    if (!json_path.empty() &&
        !write_file(json_path, "JSON", [&](std::ostream& o) { write_json(worst.results, o); })) {
      return 1;
    }
    return 0;
  }

  const ScenarioLoad load = load_scenario(text.str(), scenario_path, overrides);
  if (!load.scenario) {
    for (const std::string& e : load.errors) std::cerr << e << "\n";
    return 2;
  }
  if (seeds > 0) {
    SeedsReport report;
    std::string error;
    std::cerr << "rlimit-sim: " << seeds << " runs of " << scenario_path << " from seed " << seed
              << ", " << jobs << " at a time\n";
    if (!run_seeds(*load.scenario, seed, seeds, jobs, report, error, &std::cerr)) {
      std::cerr << "rlimit-sim: " << error << "\n";
      return 2;
    }
    print_seeds(report, std::cout);
    if (!json_path.empty() &&
        !write_file(json_path, "JSON", [&](std::ostream& o) { write_seeds_json(report, o); })) {
      return 1;
    }
    return 0;
  }
  Results results;
  std::string error;
  RunOptions options;
  std::ofstream requests;
  if (!requests_path.empty()) {
    requests.open(requests_path, std::ios::binary);
    if (!requests) {
      std::cerr << "rlimit-sim: cannot write the requests CSV to " << requests_path << "\n";
      return 2;
    }
    options.requests = &requests;
  }
  if (!run_simulation(*load.scenario, seed, options, results, error)) {
    std::cerr << "rlimit-sim: " << error << "\n";
    return 2;
  }
  if (requests.is_open()) {
    requests.close();
    if (!requests) {
      std::cerr << "rlimit-sim: writing the requests CSV to " << requests_path << " failed\n";
      return 1;
    }
  }
  print_table(results, std::cout);
  bool ok = true;
  if (!json_path.empty()) {
    ok &= write_file(json_path, "JSON", [&](std::ostream& o) { write_json(results, o); });
  }
  if (!csv_path.empty()) {
    ok &= write_file(csv_path, "CSV", [&](std::ostream& o) { write_csv(results, o); });
  }
  if (!svg_path.empty()) {
    const PlotOptions plot{load.scenario->report.plot_smooth_us, load.scenario->report.plot_nodes};
    ok &= write_file(svg_path, "SVG", [&](std::ostream& o) { write_svg(results, plot, o); });
  }
  return ok ? 0 : 1;
}
