#include "seeds.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <thread>

#include "report.h"
#include "sim.h"

namespace rlimit::sim {
namespace {

// In limits per window; "-" where the run had no such window.
std::string limits(double value) { return value < 0 ? "-" : fixed(value, 2); }

// A JSON number, or null for "no such window".
std::string json_limits(double value) { return value < 0 ? "null" : fixed(value, 2); }

}  // namespace

SeedRun seed_run(const Results& results) {
  const double per_window = std::max(1e-9, results.limit_per_window());
  const auto in_limits = [&](std::int64_t tokens) {
    return tokens < 0 ? -1.0 : static_cast<double>(tokens) / per_window;
  };
  return SeedRun{
      .seed = results.seed,
      .digest = results.digest,
      .vs_ideal = results.error_ratio(),
      .first_limits = in_limits(results.first_window_admitted),
      .most_later_limits = in_limits(results.worst_window_admitted),
      .fewest_later_limits = in_limits(results.least_window_admitted),
      .ideal_fewest_later_limits = in_limits(results.ideal_least_window),
      .fewest_vs_ideal = results.least_window_vs_ideal(),
      .fewest_vs_ideal_rate = results.least_window_vs_ideal_rate(),
  };
}

SeedsSummary summarize(const std::vector<SeedRun>& runs) {
  SeedsSummary s;
  s.runs = runs.size();
  if (runs.empty()) return s;
  s.min_vs_ideal = s.max_vs_ideal = runs.front().vs_ideal;
  s.most_first_limits = s.most_later_limits = -1;
  // The lowest of the figures a run has (-1: it has none).
  const auto lower = [](double value, std::uint64_t seed, double& least, std::uint64_t& at) {
    if (value >= 0 && (least < 0 || value < least)) {
      least = value;
      at = seed;
    }
  };
  for (const SeedRun& run : runs) {
    s.mean_vs_ideal += run.vs_ideal;
    s.mean_abs_vs_ideal += std::abs(run.vs_ideal);
    s.min_vs_ideal = std::min(s.min_vs_ideal, run.vs_ideal);
    s.max_vs_ideal = std::max(s.max_vs_ideal, run.vs_ideal);
    if (std::abs(run.vs_ideal) > kSeedsRunTolerance) ++s.beyond_tolerance;
    if (run.first_limits > s.most_first_limits) {
      s.most_first_limits = run.first_limits;
      s.most_first_seed = run.seed;
    }
    if (run.most_later_limits > s.most_later_limits) {
      s.most_later_limits = run.most_later_limits;
      s.most_later_seed = run.seed;
    }
    lower(run.fewest_later_limits, run.seed, s.fewest_later_limits, s.fewest_later_seed);
    lower(run.ideal_fewest_later_limits, run.seed, s.ideal_fewest_later_limits,
          s.ideal_fewest_later_seed);
    lower(run.fewest_vs_ideal, run.seed, s.fewest_vs_ideal, s.fewest_vs_ideal_seed);
    lower(run.fewest_vs_ideal_rate, run.seed, s.fewest_vs_ideal_rate, s.fewest_vs_ideal_rate_seed);
  }
  s.mean_vs_ideal /= static_cast<double>(runs.size());
  s.mean_abs_vs_ideal /= static_cast<double>(runs.size());
  if (runs.size() > 1) {
    double squares = 0;
    for (const SeedRun& run : runs)
      squares += (run.vs_ideal - s.mean_vs_ideal) * (run.vs_ideal - s.mean_vs_ideal);
    s.sd_vs_ideal = std::sqrt(squares / static_cast<double>(runs.size() - 1));
    s.mean_standard_error = s.sd_vs_ideal / std::sqrt(static_cast<double>(runs.size()));
  }
  return s;
}

bool run_seeds(const Scenario& scenario, std::uint64_t base_seed, std::uint32_t count,
               std::uint32_t jobs, SeedsReport& report, std::string& error,
               std::ostream* progress) {
  assert(jobs >= 1 && jobs <= kMaxSeedJobs && count <= kMaxSeedRuns);
  report = SeedsReport{};
  report.scenario = scenario.name;
  report.nodes = scenario.cluster.nodes;
  std::vector<SeedRun> runs(count);
  std::vector<std::string> errors(count);
  std::atomic<std::uint32_t> next{0};
  std::mutex progress_mutex;
  const auto work = [&] {
    for (std::uint32_t i = next++; i < count; i = next++) {
      const auto started = std::chrono::steady_clock::now();
      Results results;
      if (!run_simulation(scenario, base_seed + i, RunOptions{.keep_series = false}, results,
                          errors[i])) {
        if (errors[i].empty()) errors[i] = "the run failed";
        continue;
      }
      runs[i] = seed_run(results);
      if (progress != nullptr) {
        const double wall_s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        char buf[160];
        std::snprintf(buf, sizeof buf, "  seed %llu: %s vs ideal (%.1f s)\n",
                      static_cast<unsigned long long>(runs[i].seed),
                      percent(runs[i].vs_ideal).c_str(), wall_s);
        const std::lock_guard lock(progress_mutex);
        *progress << buf << std::flush;
      }
    }
  };
  std::vector<std::thread> threads;
  for (std::uint32_t t = 1; t < std::min(jobs, count); ++t) threads.emplace_back(work);
  work();
  for (std::thread& thread : threads) thread.join();
  for (std::uint32_t i = 0; i < count; ++i) {
    if (!errors[i].empty()) {
      error = "seed " + std::to_string(base_seed + i) + ": " + errors[i];
      return false;
    }
  }
  report.runs = std::move(runs);
  report.summary = summarize(report.runs);
  return true;
}

void print_seeds(const SeedsReport& report, std::ostream& out) {
  const SeedsSummary& s = report.summary;
  out << "Scenario " << report.scenario << ", " << report.nodes << " nodes: " << s.runs
      << (s.runs == 1 ? " run" : " runs") << " (windows in limits)\n";
  char buf[256];
  std::snprintf(buf, sizeof buf, "  %8s  %9s  %6s  %11s  %12s  %14s  %15s  %14s  %s\n", "seed",
                "vs ideal", "first", "most later", "fewest later", "ideal's fewest",
                "fewest vs ideal", "vs ideal's rate", "digest");
  out << buf;
  for (const SeedRun& run : report.runs) {
    std::snprintf(buf, sizeof buf, "  %8llu  %9s  %6s  %11s  %12s  %14s  %15s  %14s  %s\n",
                  static_cast<unsigned long long>(run.seed), percent(run.vs_ideal).c_str(),
                  limits(run.first_limits).c_str(), limits(run.most_later_limits).c_str(),
                  limits(run.fewest_later_limits).c_str(),
                  limits(run.ideal_fewest_later_limits).c_str(),
                  limits(run.fewest_vs_ideal).c_str(), limits(run.fewest_vs_ideal_rate).c_str(),
                  hex(run.digest).c_str());
    out << buf;
  }
  if (s.runs == 0) return;
  out << "\nTogether\n";
  std::snprintf(
      buf, sizeof buf,
      "  run vs ideal                mean %s, mean size %.2f%%, from %s to %s; %zu of %zu "
      "beyond %.0f%%\n",
      percent(s.mean_vs_ideal).c_str(), 100 * s.mean_abs_vs_ideal, percent(s.min_vs_ideal).c_str(),
      percent(s.max_vs_ideal).c_str(), s.beyond_tolerance, s.runs, 100 * kSeedsRunTolerance);
  out << buf;
  std::snprintf(buf, sizeof buf,
                "  spread                      standard deviation %.2f%%, so the mean +- %.2f%% "
                "(standard error)\n",
                100 * s.sd_vs_ideal, 100 * s.mean_standard_error);
  out << buf;
  const auto extreme = [&](const char* label, double value, std::uint64_t seed,
                           const char* unit = "the limit") {
    if (value < 0) {
      std::snprintf(buf, sizeof buf, "  %-26s  - (no run had such a window)\n", label);
    } else {
      std::snprintf(buf, sizeof buf, "  %-26s  %.2f x %s (seed %llu)\n", label, value, unit,
                    static_cast<unsigned long long>(seed));
    }
    out << buf;
  };
  extreme("most in a first window", s.most_first_limits, s.most_first_seed);
  extreme("most in a later window", s.most_later_limits, s.most_later_seed);
  extreme("fewest in a later window", s.fewest_later_limits, s.fewest_later_seed);
  extreme("the ideal's fewest later", s.ideal_fewest_later_limits, s.ideal_fewest_later_seed);
  extreme("fewest against the ideal", s.fewest_vs_ideal, s.fewest_vs_ideal_seed,
          "the ideal's in that window");
  extreme("fewest vs the ideal's rate", s.fewest_vs_ideal_rate, s.fewest_vs_ideal_rate_seed,
          "the ideal's window or rate, the lower");
}

void write_seeds_json(const SeedsReport& report, std::ostream& out) {
  const SeedsSummary& s = report.summary;
  out << "{\n  \"scenario\": " << quote(report.scenario) << ",\n  \"nodes\": " << report.nodes
      << ",\n  \"runs\": [";
  for (std::size_t i = 0; i < report.runs.size(); ++i) {
    const SeedRun& run = report.runs[i];
    out << (i == 0 ? "\n" : ",\n") << "    {\"seed\": " << run.seed << ", \"digest\": \""
        << hex(run.digest) << "\", \"admitted_vs_ideal\": " << fixed(run.vs_ideal, 6)
        << ", \"first_window_limits\": " << json_limits(run.first_limits)
        << ", \"most_later_window_limits\": " << json_limits(run.most_later_limits)
        << ", \"fewest_later_window_limits\": " << json_limits(run.fewest_later_limits)
        << ", \"ideal_fewest_later_window_limits\": " << json_limits(run.ideal_fewest_later_limits)
        << ", \"fewest_later_window_vs_ideal\": " << json_limits(run.fewest_vs_ideal)
        << ", \"fewest_later_window_vs_ideal_rate\": " << json_limits(run.fewest_vs_ideal_rate)
        << "}";
  }
  out << "\n  ],\n  \"summary\": {\"runs\": " << s.runs
      << ", \"mean_admitted_vs_ideal\": " << fixed(s.mean_vs_ideal, 6)
      << ", \"mean_abs_admitted_vs_ideal\": " << fixed(s.mean_abs_vs_ideal, 6)
      << ", \"sd_admitted_vs_ideal\": " << fixed(s.sd_vs_ideal, 6)
      << ", \"mean_standard_error\": " << fixed(s.mean_standard_error, 6)
      << ", \"min_admitted_vs_ideal\": " << fixed(s.min_vs_ideal, 6)
      << ", \"max_admitted_vs_ideal\": " << fixed(s.max_vs_ideal, 6)
      << ", \"beyond_tolerance\": " << s.beyond_tolerance
      << ", \"tolerance\": " << fixed(kSeedsRunTolerance, 6)
      << ", \"most_first_window_limits\": " << json_limits(s.most_first_limits)
      << ", \"most_later_window_limits\": " << json_limits(s.most_later_limits)
      << ", \"fewest_later_window_limits\": " << json_limits(s.fewest_later_limits)
      << ", \"ideal_fewest_later_window_limits\": " << json_limits(s.ideal_fewest_later_limits)
      << ", \"fewest_later_window_vs_ideal\": " << json_limits(s.fewest_vs_ideal)
      << ", \"fewest_later_window_vs_ideal_rate\": " << json_limits(s.fewest_vs_ideal_rate)
      << "}\n}\n";
}

}  // namespace rlimit::sim
