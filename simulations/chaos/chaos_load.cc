// rlimit-chaos-load: drives real rlimitd nodes with checks of one shared
// key at a steady rate, spread round-robin over their sockets, and reports
// what the cluster admitted against what one perfect limiter (a
// core::TokenBucket on this process's clock, fed the same requests) would
// have admitted: the figures rlimit-sim reports, for simulations/chaos/run.sh.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "core/token_bucket.h"
#include "rlimit/client.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Second {
  std::uint64_t requested = 0, ideal = 0, admitted = 0, failed_open = 0;
  std::vector<std::uint64_t> per_node;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "rlimit-chaos-load: steady checks of one key over several rlimitd nodes, "
      "against a perfect limiter"};
  std::vector<std::string> sockets;
  double rate = 200, seconds = 30;
  std::int64_t limit = 100, burst = 0, period_ms = 1000;
  std::string key = "chaos", csv_path;
  std::uint32_t timeout_ms = 50;
  app.add_option("--socket", sockets, "rlimitd socket; repeat for every node")->required();
  app.add_option("--rate", rate, "checks per second, all nodes together")->capture_default_str();
  app.add_option("--seconds", seconds, "how long")->capture_default_str();
  app.add_option("--limit", limit, "the rule's limit per period (for the ideal)")
      ->capture_default_str();
  app.add_option("--burst", burst, "the rule's burst (0: the limit)");
  app.add_option("--period-ms", period_ms, "the rule's period")->capture_default_str();
  app.add_option("--key", key, "value of the descriptor api=... every check carries")
      ->capture_default_str();
  app.add_option("--timeout-ms", timeout_ms, "per check; a node that does not answer fails open")
      ->capture_default_str();
  app.add_option("--csv", csv_path,
                 "per-second series: t_s,requested,ideal,admitted,failed_open,n0..");
  CLI11_PARSE(app, argc, argv);
  if (burst <= 0) burst = limit;

  std::vector<rlimit::Client> clients;
  for (const std::string& path : sockets) {
    rlimit::ClientOptions options;
    options.socket_path = path;
    options.timeout_ms = timeout_ms;
    options.fail_mode = rlimit::FailMode::kOpen;
    clients.emplace_back(options);
  }
  const rlimit::core::BucketParams params{limit, period_ms * 1000, burst};
  const Clock::time_point start = Clock::now();
  auto now_us = [&] {
    return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
  };
  rlimit::core::TokenBucket ideal = rlimit::core::TokenBucket::full(params, 0);
  std::vector<Second> series(static_cast<std::size_t>(seconds) + 2);
  for (Second& s : series) s.per_node.assign(clients.size(), 0);

  const std::vector<rlimit::Descriptor> descriptors = {{"api", key}};
  const double gap_us = 1e6 / rate;
  const auto total = static_cast<std::uint64_t>(rate * seconds);
  for (std::uint64_t i = 0; i < total; ++i) {
    const auto due = static_cast<std::int64_t>(static_cast<double>(i) * gap_us);
    const std::int64_t wait = due - now_us();
    if (wait > 0) std::this_thread::sleep_for(std::chrono::microseconds(wait));
    const std::int64_t t = now_us();
    Second& s = series[std::min(series.size() - 1, static_cast<std::size_t>(t / 1'000'000))];
    ++s.requested;
    ideal.refill(params, t);
    if (ideal.allows(1)) {
      ideal.charge(1);
      ++s.ideal;
    }
    const std::size_t node = i % clients.size();
    const rlimit::Decision d = clients[node].check(descriptors);
    if (d.status == rlimit::DecisionStatus::kUnavailable) {
      ++s.failed_open;  // fail open: the client allows, the cluster never hears of it
      ++s.admitted;
    } else if (d.allowed) {
      ++s.admitted;
      ++s.per_node[node];
    }
  }

  Second sum;
  sum.per_node.assign(clients.size(), 0);
  std::int64_t worst = 0, cumulative = 0, peak = 0;
  std::size_t worst_at = 0;
  for (std::size_t i = 0; i < series.size(); ++i) {
    const Second& s = series[i];
    sum.requested += s.requested;
    sum.ideal += s.ideal;
    sum.admitted += s.admitted;
    sum.failed_open += s.failed_open;
    for (std::size_t n = 0; n < clients.size(); ++n) sum.per_node[n] += s.per_node[n];
    const std::int64_t d =
        static_cast<std::int64_t>(s.admitted) - static_cast<std::int64_t>(s.ideal);
    if (d > worst) {
      worst = d;
      worst_at = i;
    }
    cumulative += d;
    peak = std::max(peak, cumulative);
  }
  const double ratio =
      sum.ideal == 0 ? 0 : static_cast<double>(sum.admitted) / static_cast<double>(sum.ideal) - 1;
  std::printf(
      "chaos load: %zu nodes, %.0f checks/s for %.0f s, limit %lld per %lld ms (burst %lld)\n",
      clients.size(), rate, seconds, static_cast<long long>(limit),
      static_cast<long long>(period_ms), static_cast<long long>(burst));
  std::printf("  %-32s %10llu\n", "requested", static_cast<unsigned long long>(sum.requested));
  std::printf("  %-32s %10llu\n", "ideal (one perfect limiter)",
              static_cast<unsigned long long>(sum.ideal));
  std::printf("  %-32s %10llu  %+.2f%% vs ideal\n", "admitted by the cluster",
              static_cast<unsigned long long>(sum.admitted), 100 * ratio);
  std::printf("  %-32s %10llu  (node unreachable: the client failed open)\n",
              "  of which failed open", static_cast<unsigned long long>(sum.failed_open));
  std::printf("  %-32s %+10lld  in second %zu\n", "worst 1s window, over",
              static_cast<long long>(worst), worst_at);
  std::printf("  %-32s %10lld\n", "peak cumulative excess", static_cast<long long>(peak));
  std::printf("  %-32s %10lld\n", "excess at the end", static_cast<long long>(cumulative));
  for (std::size_t n = 0; n < clients.size(); ++n) {
    std::printf("  admitted at n%-19zu %10llu\n", n,
                static_cast<unsigned long long>(sum.per_node[n]));
  }
  if (!csv_path.empty()) {
    std::ofstream out(csv_path);
    out << "t_s,requested,ideal,admitted,failed_open";
    for (std::size_t n = 0; n < clients.size(); ++n) out << ",n" << n;
    out << "\n";
    for (std::size_t i = 0; i < series.size(); ++i) {
      const Second& s = series[i];
      out << i << "," << s.requested << "," << s.ideal << "," << s.admitted << "," << s.failed_open;
      for (std::uint64_t v : s.per_node) out << "," << v;
      out << "\n";
    }
  }
  return 0;
}
