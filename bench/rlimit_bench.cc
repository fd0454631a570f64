// rlimit-bench: load through libclient against a running rlimitd, with the raw
// Unix-socket round trip measured in the same run as the floor.
//
//   rlimit-bench --socket PATH [--mode sync|pipelined] [--clients N]
//                [--depth D] [--keys K] [--seconds S] [--json]
//
// sync: each client thread sends one check and waits for the answer.
// pipelined: each client keeps D checks in flight (submit/receive).
// The floor: two processes ping-pong a message of a check's size over a Unix
// socketpair, one at a time, for the same duration.
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "rlimit/client.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Percentiles {
  double p50_us = 0, p99_us = 0, p999_us = 0;
};

Percentiles percentiles(std::vector<std::uint32_t>& samples_ns) {
  Percentiles p;
  if (samples_ns.empty()) return p;
  std::sort(samples_ns.begin(), samples_ns.end());
  auto at = [&](double q) {
    const auto i = static_cast<std::size_t>(q * static_cast<double>(samples_ns.size() - 1));
    return samples_ns[i] / 1000.0;
  };
  p.p50_us = at(0.50);
  p.p99_us = at(0.99);
  p.p999_us = at(0.999);
  return p;
}

struct Result {
  std::string name;
  std::uint64_t operations = 0;
  double seconds = 0;
  Percentiles latency;
  std::uint64_t allowed = 0;
  std::uint64_t unavailable = 0;
  double rate() const { return seconds > 0 ? static_cast<double>(operations) / seconds : 0; }
};

// Ping-pong `message_bytes` over a socketpair between this process and a
// child for `seconds`: the floor any Unix-socket request/response pays.
Result measure_floor(double seconds, std::size_t message_bytes) {
  Result r;
  r.name = "raw unix socket round trip";
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return r;
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    std::vector<char> buf(message_bytes);
    for (;;) {
      std::size_t got = 0;
      while (got < message_bytes) {
        const ssize_t n = ::read(fds[1], buf.data() + got, message_bytes - got);
        if (n <= 0) ::_exit(0);
        got += static_cast<std::size_t>(n);
      }
      if (::write(fds[1], buf.data(), message_bytes) != static_cast<ssize_t>(message_bytes)) ::_exit(0);
    }
  }
  ::close(fds[1]);
  std::vector<char> buf(message_bytes, 'x');
  std::vector<std::uint32_t> samples;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  const auto start = Clock::now();
  while (Clock::now() < end) {
    const auto t0 = Clock::now();
    if (::write(fds[0], buf.data(), message_bytes) != static_cast<ssize_t>(message_bytes)) break;
    std::size_t got = 0;
    while (got < message_bytes) {
      const ssize_t n = ::read(fds[0], buf.data() + got, message_bytes - got);
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    samples.push_back(static_cast<std::uint32_t>((Clock::now() - t0).count()));
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.operations = samples.size();
  r.latency = percentiles(samples);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  return r;
}

Result measure_daemon(const std::string& socket, const std::string& mode, int clients, int depth,
                      std::size_t keys, double seconds) {
  Result r;
  r.name = mode == "sync" ? "rlimitd check, synchronous" : "rlimitd check, pipelined";
  std::vector<std::vector<std::uint32_t>> samples(static_cast<std::size_t>(clients));
  std::atomic<std::uint64_t> allowed{0}, unavailable{0}, operations{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  Clock::time_point end;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      rlimit::ClientOptions options;
      options.socket_path = socket;
      options.timeout_ms = 1000;
      rlimit::Client client(options);
      std::vector<rlimit::CheckRequest> requests(std::min<std::size_t>(keys, 4096));
      for (std::size_t i = 0; i < requests.size(); ++i) {
        requests[i].descriptors = {{"user", "bench-" + std::to_string((i * 7919 + c) % keys)}};
      }
      client.check(requests[0]);  // connect before the clock starts
      while (!go.load()) std::this_thread::yield();
      auto& mine = samples[static_cast<std::size_t>(c)];
      std::uint64_t ok = 0, down = 0, ops = 0;
      std::size_t next = 0;
      if (mode == "sync") {
        while (Clock::now() < end) {
          const auto t0 = Clock::now();
          const rlimit::Decision d = client.check(requests[next++ % requests.size()]);
          mine.push_back(static_cast<std::uint32_t>((Clock::now() - t0).count()));
          ok += d.allowed;
          down += d.status == rlimit::DecisionStatus::kUnavailable;
          ++ops;
        }
      } else {
        std::vector<Clock::time_point> sent;
        std::size_t head = 0;
        while (Clock::now() < end) {
          while (client.pending() < static_cast<std::size_t>(depth)) {
            client.submit(requests[next++ % requests.size()]);
            sent.push_back(Clock::now());
          }
          const auto [ticket, d] = client.receive();
          mine.push_back(static_cast<std::uint32_t>((Clock::now() - sent[head++]).count()));
          ok += d.allowed;
          down += d.status == rlimit::DecisionStatus::kUnavailable;
          ++ops;
        }
        while (client.pending() > 0) client.receive();
      }
      allowed += ok;
      unavailable += down;
      operations += ops;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto start = Clock::now();
  end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  go.store(true);
  for (auto& t : threads) t.join();
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<std::uint32_t> all;
  for (auto& s : samples) all.insert(all.end(), s.begin(), s.end());
  r.latency = percentiles(all);
  r.operations = operations.load();
  r.allowed = allowed.load();
  r.unavailable = unavailable.load();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rlimit-bench: rlimitd throughput and latency through libclient"};
  std::string socket;
  std::string mode = "sync";
  int clients = 1;
  int depth = 32;
  std::size_t keys = 1000;
  double seconds = 3;
  bool json = false;
  app.add_option("--socket", socket, "rlimitd socket path")->required();
  app.add_option("--mode", mode, "sync or pipelined")->check(CLI::IsMember({"sync", "pipelined"}));
  app.add_option("--clients", clients, "client threads")->check(CLI::Range(1, 256));
  app.add_option("--depth", depth, "checks in flight per client (pipelined)")->check(CLI::Range(1, 4096));
  app.add_option("--keys", keys, "distinct user keys")->check(CLI::Range(1, 100'000'000));
  app.add_option("--seconds", seconds, "duration of each measurement")->check(CLI::Range(0.1, 600.0));
  app.add_flag("--json", json, "print JSON instead of a table");
  CLI11_PARSE(app, argc, argv);

  // A check for user=bench-N is about 30 bytes framed; the reply about 40.
  std::fprintf(stderr, "measuring the raw socket floor for %.1f s...\n", seconds);
  const Result floor = measure_floor(seconds, 36);
  std::fprintf(stderr, "measuring rlimitd (%s, %d clients) for %.1f s...\n", mode.c_str(), clients, seconds);
  const Result daemon = measure_daemon(socket, mode, clients, depth, keys, seconds);

  if (json) {
    auto row = [](const Result& r) {
      std::printf("{\"name\": \"%s\", \"operations\": %llu, \"seconds\": %.3f, \"per_second\": %.0f, "
                  "\"p50_us\": %.2f, \"p99_us\": %.2f, \"p999_us\": %.2f}",
                  r.name.c_str(), static_cast<unsigned long long>(r.operations), r.seconds, r.rate(),
                  r.latency.p50_us, r.latency.p99_us, r.latency.p999_us);
    };
    std::printf("{\"mode\": \"%s\", \"clients\": %d, \"depth\": %d, \"keys\": %zu, \"floor\": ", mode.c_str(),
                clients, mode == "sync" ? 1 : depth, keys);
    row(floor);
    std::printf(", \"daemon\": ");
    row(daemon);
    std::printf(", \"unavailable\": %llu, \"p50_ratio\": %.2f, \"p99_ratio\": %.2f}\n",
                static_cast<unsigned long long>(daemon.unavailable),
                daemon.latency.p50_us / std::max(floor.latency.p50_us, 1e-9),
                daemon.latency.p99_us / std::max(floor.latency.p99_us, 1e-9));
    return 0;
  }
  std::printf("%-34s %12s %10s %10s %10s\n", "measurement", "ops/s", "p50 us", "p99 us", "p99.9 us");
  for (const Result* r : {&floor, &daemon}) {
    std::printf("%-34s %12.0f %10.2f %10.2f %10.2f\n", r->name.c_str(), r->rate(), r->latency.p50_us,
                r->latency.p99_us, r->latency.p999_us);
  }
  std::printf("ratio daemon/floor: p50 %.2fx, p99 %.2fx   (unavailable answers: %llu)\n",
              daemon.latency.p50_us / std::max(floor.latency.p50_us, 1e-9),
              daemon.latency.p99_us / std::max(floor.latency.p99_us, 1e-9),
              static_cast<unsigned long long>(daemon.unavailable));
  return 0;
}
