// rlimit-traffic-demo: drives a running rlimitd with a few realistic traffic
// streams at about three times what their rules allow, then prints, per rule
// and stream, how many checks it let through next to the most it should have.
//
// Each stream first sends a cost-0 check (charges nothing, reports the
// buckets) to learn which rules apply to it, then runs at 3x the capacity of
// its tightest rule over the run: capacity = burst + limit * seconds / period.
// Rules keyed by user or ip give each stream a bucket of its own, so "allowed"
// should never exceed "max" for a row.
//
// Usage: rlimit-traffic-demo [--socket PATH]... [--seconds 3] [--timeout-ms 100]
// With several --socket options (one per node of a cluster) the checks of
// every stream are spread round-robin over the nodes, and the table shows what
// the cluster as a whole allowed against one global limit.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <limits>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "rlimit/client.h"
#include "text_format.h"

namespace {

using Clock = std::chrono::steady_clock;
using rlimit::tools::format_rate;
using rlimit::tools::TextTable;

// Streams no rule limits still get traffic, at this rate.
constexpr double kUnlimitedRatePerSecond = 20;
// Keeps one stream from flooding the daemon when its rules are generous.
constexpr double kMaxRatePerSecond = 2000;
constexpr double kOverdrive = 3;

// Staleness a cluster is allowed in the OK column: news of other nodes'
// consumption arrives within a few gossip intervals on one machine.
constexpr double kStalenessAllowanceMs = 100;

struct Scenario {
  std::string name;
  std::vector<rlimit::Descriptor> descriptors;
  double rate_per_second = 0;
  // Tallies of the run.
  std::uint64_t checks = 0, allowed = 0, denied = 0, exempt = 0, unavailable = 0, other = 0;
};

struct RuleTally {
  std::uint64_t limit = 0, period_ms = 0, burst = 0;  // as the daemon applied them (overrides too)
  std::uint64_t matched = 0, allowed = 0, denied = 0, denied_here = 0;
};

std::vector<Scenario> make_scenarios() {
  return {
      {"alice GET /api/items", {{"user", "alice"}, {"method", "GET"}, {"path", "/api/items"}}},
      {"bob (premium) GET /api/items",
       {{"user", "bob"}, {"tier", "premium"}, {"method", "GET"}, {"path", "/api/items"}}},
      {"ip 10.0.0.7 POST login",
       {{"ip", "10.0.0.7"}, {"method", "POST"}, {"path", "/v1/accounts/login"}}},
      {"GET /api/search", {{"method", "GET"}, {"path", "/api/search"}}},
      {"crawler ip 203.0.113.9", {{"ip", "203.0.113.9"}, {"method", "GET"}, {"path", "/catalog"}}},
      {"healthcheck GET /healthz",
       {{"user", "healthcheck"}, {"method", "GET"}, {"path", "/healthz"}}},
  };
}

// Most a bucket can admit in `seconds`: full at the start, refilling at limit/period.
double capacity(std::uint64_t limit, std::uint64_t period_ms, std::uint64_t burst, double seconds) {
  const double refill = period_ms == 0 ? 0
                                       : static_cast<double>(limit) * seconds * 1000.0 /
                                             static_cast<double>(period_ms);
  return static_cast<double>(burst) + refill;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Drive rlimitd with traffic at about 3x its limits and report per rule.",
               "rlimit-traffic-demo"};
  std::vector<std::string> socket_paths;
  double seconds = 3;
  std::uint32_t timeout_ms = 100;
  app.add_option("--socket", socket_paths,
                 "rlimitd's Unix socket (default: the usual path); repeat for every node of a cluster");
  app.add_option("--seconds", seconds, "How long to drive traffic")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 600.0));
  app.add_option("--timeout-ms", timeout_ms, "Per-check timeout")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  if (socket_paths.empty()) socket_paths.emplace_back();  // the default path
  std::vector<rlimit::Client> clients;
  for (const std::string& path : socket_paths) {
    rlimit::ClientOptions options;
    options.socket_path = path;
    options.timeout_ms = timeout_ms;
    clients.emplace_back(options);
  }
  rlimit::Client& client = clients.front();

  std::string error;
  const auto status = client.status(&error);
  if (!status) {
    std::cerr << "rlimit-traffic-demo: cannot get the daemon's status: " << error << '\n';
    return 1;
  }
  std::cout << "rlimitd " << status->version << " on node " << status->node_id << ", config "
            << status->config_source << ", " << status->rules.size() << " rule(s)";
  if (clients.size() > 1) std::cout << "; checks spread over " << clients.size() << " nodes";
  std::cout << "\n\n";

  // Learn each stream's rules with a check that charges nothing.
  std::vector<Scenario> scenarios = make_scenarios();
  for (Scenario& s : scenarios) {
    const rlimit::Decision probe = client.check(s.descriptors, 0);
    if (probe.status == rlimit::DecisionStatus::kUnavailable) {
      std::cerr << "rlimit-traffic-demo: daemon unavailable: " << probe.error << '\n';
      return 1;
    }
    double tightest = std::numeric_limits<double>::infinity();
    for (const rlimit::RuleStatus& r : probe.rules) {
      tightest = std::min(tightest, capacity(r.limit, r.period_ms, r.burst, seconds));
    }
    s.rate_per_second = std::isinf(tightest) ? kUnlimitedRatePerSecond
                                             : kOverdrive * std::max(tightest, 1.0) / seconds;
    s.rate_per_second = std::clamp(s.rate_per_second, 1.0, kMaxRatePerSecond);
  }

  {
    TextTable plan({"STREAM", "RATE/S", "DESCRIPTORS"});
    plan.align_right(1);
    for (const Scenario& s : scenarios) {
      std::string descs;
      for (const auto& d : s.descriptors)
        descs += (descs.empty() ? "" : " ") + d.key + "=" + d.value;
      char rate[32];
      std::snprintf(rate, sizeof(rate), "%.1f", s.rate_per_second);
      plan.add_row({s.name, rate, descs});
    }
    std::cout << "driving for " << seconds << " s:\n" << plan.render() << '\n';
  }

  // Keyed by rule name, then stream index: one bucket per row for keyed rules.
  std::map<std::string, std::map<std::size_t, RuleTally>> tallies;
  const Clock::time_point start = Clock::now();
  const Clock::time_point end =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::vector<std::uint64_t> sent(scenarios.size(), 0);
  const auto due = [&](std::size_t i) {
    return start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                       static_cast<double>(sent[i]) / scenarios[i].rate_per_second));
  };
  for (;;) {
    std::size_t next = 0;
    for (std::size_t i = 1; i < scenarios.size(); ++i) {
      if (due(i) < due(next)) next = i;
    }
    const Clock::time_point when = due(next);
    if (when >= end) break;
    if (when > Clock::now()) std::this_thread::sleep_until(when);
    ++sent[next];

    Scenario& s = scenarios[next];
    const rlimit::Decision d = clients[s.checks % clients.size()].check(s.descriptors);
    ++s.checks;
    switch (d.status) {
      case rlimit::DecisionStatus::kOk:
        ++(d.allowed ? s.allowed : s.denied);
        break;
      case rlimit::DecisionStatus::kExempt:
        ++s.exempt;
        break;
      case rlimit::DecisionStatus::kUnavailable:
        ++s.unavailable;
        break;
      default:
        ++s.other;
        break;
    }
    for (const rlimit::RuleStatus& r : d.rules) {
      RuleTally& t = tallies[r.name][next];
      t.limit = r.limit;
      t.period_ms = r.period_ms;
      t.burst = r.burst;
      ++t.matched;
      ++(d.allowed ? t.allowed : t.denied);
      if (!r.allowed) ++t.denied_here;
    }
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();

  TextTable table(
      {"RULE", "STREAM", "LIMIT", "BURST", "MATCHED", "ALLOWED", "DENIED", "BY RULE", "MAX", "OK"});
  for (std::size_t c = 3; c <= 8; ++c) table.align_right(c);
  std::uint64_t over = 0;
  const auto add_rule_rows = [&](const std::string& name) {
    const auto it = tallies.find(name);
    if (it == tallies.end()) {
      table.add_row({name, "(no stream matched)"});
      return;
    }
    for (const auto& [index, t] : it->second) {
      const auto max_allowed =
          static_cast<std::uint64_t>(std::floor(capacity(t.limit, t.period_ms, t.burst, elapsed)));
      // A cluster may admit what other nodes admitted while their news was in
      // flight (docs/cluster.md): allow 100 ms of the limit per other node.
      const double in_flight =
          t.period_ms == 0 ? 0
                           : static_cast<double>(clients.size() - 1) * static_cast<double>(t.limit) *
                                 kStalenessAllowanceMs / static_cast<double>(t.period_ms);
      std::string verdict = "yes";
      if (t.allowed > max_allowed) {
        if (static_cast<double>(t.allowed - max_allowed) <= std::ceil(in_flight)) {
          verdict = "+" + std::to_string(t.allowed - max_allowed) + " in flight";
        } else {
          verdict = "OVER";
          ++over;
        }
      }
      table.add_row({name, scenarios[index].name, format_rate(t.limit, t.period_ms),
                     std::to_string(t.burst), std::to_string(t.matched), std::to_string(t.allowed),
                     std::to_string(t.denied), std::to_string(t.denied_here),
                     std::to_string(max_allowed), verdict});
    }
  };
  // Configured rules in the daemon's order, then any others seen (inline limits).
  for (const rlimit::RuleInfo& rule : status->rules) add_rule_rows(rule.name);
  for (const auto& [name, rows] : tallies) {
    const bool configured = std::any_of(status->rules.begin(), status->rules.end(),
                                        [&](const rlimit::RuleInfo& r) { return r.name == name; });
    if (!configured) add_rule_rows(name);
  }
  std::printf(
      "per rule, over %.2f s (DENIED: checks denied by any rule; BY RULE: by this one;\n"
      "MAX: burst + limit * elapsed / period; in a cluster, \"in flight\" is what other nodes\n"
      "admitted while their news travelled, within 100 ms of the limit per other node):\n",
      elapsed);
  std::cout << table.render() << '\n';

  TextTable totals({"STREAM", "CHECKS", "ALLOWED", "DENIED", "EXEMPT", "UNAVAILABLE", "OTHER"});
  for (std::size_t c = 1; c <= 6; ++c) totals.align_right(c);
  Scenario sum{"total", {}};
  for (const Scenario& s : scenarios) {
    totals.add_row({s.name, std::to_string(s.checks), std::to_string(s.allowed),
                    std::to_string(s.denied), std::to_string(s.exempt),
                    std::to_string(s.unavailable), std::to_string(s.other)});
    sum.checks += s.checks;
    sum.allowed += s.allowed;
    sum.denied += s.denied;
    sum.exempt += s.exempt;
    sum.unavailable += s.unavailable;
    sum.other += s.other;
  }
  totals.add_separator();
  totals.add_row({sum.name, std::to_string(sum.checks), std::to_string(sum.allowed),
                  std::to_string(sum.denied), std::to_string(sum.exempt),
                  std::to_string(sum.unavailable), std::to_string(sum.other)});
  std::cout << "totals:\n" << totals.render();
  if (over > 0) {
    std::cout << "\n"
              << over << " row(s) allowed more than their bucket could hold "
              << "(a bucket shared with other traffic?)\n";
  }
  return 0;
}
