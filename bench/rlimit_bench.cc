// rlimit-bench: load through libclient against a running rlimitd, side by side
// with the raw Unix-socket round trip (the floor) and, with --redis, with
// Redis doing the same checks, all in one run.
//
//   rlimit-bench --socket PATH [--mode sync|pipelined] [--clients N] [--depth D]
//                [--batch B] [--keys K] [--skew uniform|zipf|sequential]
//                [--zipf-s S] [--seconds S] [--rate R] [--redis HOST:PORT]
//                [--rounds N] [--fill] [--daemon-pid PID] [--json]
//                [--grpc HOST:PORT [--grpc-domain D]] [--http HOST:PORT]
//
// sync: each client thread sends a request and waits for its answer (closed
// loop); pipelined: each keeps D requests in flight. Each system is measured
// in --rounds interleaved slices (3 by default), so drift in the machine
// falls on all of them alike. A request carries B
// checks (one frame; with Redis, B pipelined commands). Latency is per
// request, from send to answer, in a log-linear histogram (0.8 % buckets).
// Sync runs also measure the floor: a forked child answering a
// check-sized message over a socketpair, one round trip at a time.
// --fill first drives every key once (batches of 1000) and, with
// --daemon-pid, reports the daemon's VmRSS growth per key.
// --grpc and --http add rlimitd's other faces with the same workload:
// Envoy's ShouldRateLimit over gRPC (a request is one RateLimitRequest of
// domain D, one descriptor per check; load/grpc_target.h) and the HTTP check
// (GET /v1/check?user=..., keep-alive; load/http_target.h). Their rule must
// match what the socket's does: the gRPC face adds ("domain", D) first.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "load/driver.h"
#include "load/floor_target.h"
#include "load/http_target.h"
#include "load/report.h"
#include "load/rlimit_target.h"
#include "rlimit/client.h"
#ifdef RLIMIT_BENCH_HAVE_HIREDIS
#include "load/redis_target.h"
#endif
#ifdef RLIMIT_BENCH_HAVE_GRPC
#include "load/grpc_target.h"
#endif

namespace {

using namespace rlimit::bench;

// Adds one slice of a measurement to the whole.
void add(Result& total, const Result& slice) {
  if (total.name.empty()) total.name = slice.name;
  if (!slice.error.empty()) total.error = slice.error;
  total.seconds += slice.seconds;
  total.requests += slice.requests;
  total.decisions += slice.decisions;
  total.tally += slice.tally;
  total.latency.merge(slice.latency);
}

// "host:port" -> host, port ("127.0.0.1" without a host); false if bad.
bool split_host_port(const std::string& text, std::string& host, int& port) {
  const auto colon = text.rfind(':');
  host = colon == std::string::npos || colon == 0 ? "127.0.0.1" : text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  try {
    port = std::stoi(colon == std::string::npos ? text : text.substr(colon + 1));
  } catch (const std::exception&) {
    return false;
  }
  return port > 0 && port < 65536;
}

// The faces against the socket protocol and Redis + Lua, measured in the
// same run (the table's own ratios are the socket protocol's).
void print_face_ratios(const std::vector<std::pair<std::string, const Result*>>& faces,
                       const Rows& rows) {
  const auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  for (const auto& [name, r] : faces) {
    if (r == nullptr || r->decisions == 0) continue;
    if (rows.rlimitd != nullptr && rows.rlimitd->decisions > 0) {
      std::printf("%-10s p50 %.2fx, p99 %.2fx, decisions/s %.2fx the socket protocol's\n",
                  name.c_str(),
                  ratio(r->latency.quantile_us(0.5), rows.rlimitd->latency.quantile_us(0.5)),
                  ratio(r->latency.quantile_us(0.99), rows.rlimitd->latency.quantile_us(0.99)),
                  ratio(r->decisions_per_second(), rows.rlimitd->decisions_per_second()));
    }
    if (rows.redis_lua != nullptr && rows.redis_lua->decisions > 0) {
      std::printf("%-10s p50 %.2fx, p99 %.2fx, decisions/s %.2fx Redis + Lua's\n", name.c_str(),
                  ratio(r->latency.quantile_us(0.5), rows.redis_lua->latency.quantile_us(0.5)),
                  ratio(r->latency.quantile_us(0.99), rows.redis_lua->latency.quantile_us(0.99)),
                  ratio(r->decisions_per_second(), rows.redis_lua->decisions_per_second()));
    }
  }
}

long rss_kib(long pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

// Drives keys 0..keys-1 through the daemon once each; returns the daemon's
// key count afterwards (0 if unknown), or -1 when the daemon failed.
long long fill(const std::string& socket, std::uint64_t keys, bool quiet) {
  rlimit::ClientOptions options;
  options.socket_path = socket;
  options.timeout_ms = 10'000;
  rlimit::Client client(options);
  constexpr std::uint64_t kBatch = 1000;  // under the default max_checks_per_frame
  std::vector<rlimit::CheckRequest> batch;
  std::uint64_t next_report = keys / 10;
  for (std::uint64_t first = 0; first < keys; first += kBatch) {
    const std::uint64_t n = std::min(kBatch, keys - first);
    batch.resize(n);
    for (std::uint64_t i = 0; i < n; ++i) {
      if (batch[i].descriptors.size() != 1) batch[i].descriptors = {{"user", ""}};
      key_name(first + i, batch[i].descriptors[0].value);
    }
    for (const rlimit::Decision& d : client.check_batch(batch)) {
      if (d.status == rlimit::DecisionStatus::kUnavailable ||
          d.status == rlimit::DecisionStatus::kProtocolError) {
        std::fprintf(stderr, "fill: %s\n", d.error.c_str());
        return -1;
      }
    }
    if (!quiet && first + n >= next_report && keys >= 100'000) {
      std::fprintf(stderr, "  fill: %llu of %llu keys\n",
                   static_cast<unsigned long long>(first + n),
                   static_cast<unsigned long long>(keys));
      next_report += keys / 10;
    }
  }
  const auto status = client.status();
  return status ? static_cast<long long>(status->keys) : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "rlimit-bench: rlimitd throughput and latency through libclient, next to the raw "
      "socket floor and Redis"};
  Workload w;
  std::string socket;
  std::string mode = "sync";
  std::string skew = "uniform";
  std::string redis;
  std::string grpc_address, grpc_domain = "bench", http_address;
  LimitSpec limit;
  bool json = false, no_floor = false, do_fill = false, quiet = false, progress_flag = false;
  long daemon_pid = 0;
  int rounds = 3;
  app.add_option("--socket", socket, "rlimitd socket path")->required();
  app.add_option("--mode", mode, "sync (closed loop) or pipelined")
      ->check(CLI::IsMember({"sync", "pipelined"}));
  app.add_option("--clients", w.clients, "client threads")->check(CLI::Range(1, 256));
  app.add_option("--depth", w.depth, "requests in flight per client (pipelined)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--batch", w.batch, "checks per request (one frame)")->check(CLI::Range(1, 1024));
  app.add_option("--keys", w.keys, "distinct keys (user=bench-N)")
      ->check(CLI::Range(1, 100'000'000));
  app.add_option("--skew", skew, "key popularity: uniform, zipf or sequential")
      ->check(CLI::IsMember({"uniform", "zipf", "sequential"}));
  app.add_option("--zipf-s", w.zipf_s, "Zipf exponent (with --skew zipf)")
      ->check(CLI::Range(0.01, 10.0));
  app.add_option("--seconds", w.seconds, "duration of each measurement (0: --fill only)")
      ->check(CLI::Range(0.0, 3600.0));
  app.add_option("--rate", w.rate, "sync: pace all clients together at this many checks/s");
  app.add_option("--seed", w.seed, "key sequence seed");
  app.add_option("--client-cpu", w.client_cpu,
                 "pin the client threads to this CPU (default: unpinned)")
      ->check(CLI::Range(0, 1023));
  app.add_option("--server-cpu", w.server_cpu,
                 "pin the floor's echo server to this CPU, and report it as where rlimitd and "
                 "Redis run (pin those yourself, as bench/compare does)")
      ->check(CLI::Range(0, 1023));
  app.add_option("--redis", redis, "also measure Redis at HOST:PORT (Lua, INCR+EXPIRE, INCR)");
  app.add_option(
      "--grpc", grpc_address,
      "also measure rlimitd's Envoy face (ShouldRateLimit) at HOST:PORT ([grpc] listen)");
  app.add_option("--grpc-domain", grpc_domain,
                 "the RateLimitRequest's domain (the daemon checks (\"domain\", D) first)");
  app.add_option("--http", http_address,
                 "also measure rlimitd's HTTP check face at HOST:PORT ([http] listen)");
  app.add_option("--limit", limit.limit, "Redis: tokens per period (match rlimitd's rule)");
  app.add_option("--period-ms", limit.period_ms, "Redis: the period")
      ->check(CLI::Range(1, 86'400'000));
  app.add_option("--burst", limit.burst, "Redis: bucket capacity");
  app.add_flag("--no-floor", no_floor, "sync: skip the raw socket floor");
  app.add_option("--rounds", rounds, "measure each system in this many interleaved slices")
      ->check(CLI::Range(1, 100));
  app.add_flag("--fill", do_fill, "first drive every key through rlimitd once");
  app.add_option("--daemon-pid", daemon_pid, "with --fill: report this rlimitd's VmRSS per key");
  app.add_flag("--json", json, "print JSON instead of a table");
  app.add_flag("--progress", progress_flag, "a progress line a second (default on runs >= 5 s)");
  app.add_flag("--quiet", quiet, "no progress output");
  CLI11_PARSE(app, argc, argv);
  w.mode = mode == "sync" ? Mode::kSync : Mode::kPipelined;
  parse_skew(skew, w.skew);
  if (w.mode == Mode::kSync) w.depth = 1;

  const Machine machine = describe_machine();
  Memory memory;
  if (do_fill) {
    const long before = daemon_pid > 0 ? rss_kib(daemon_pid) : 0;
    if (!quiet)
      std::fprintf(stderr, "filling rlimitd with %llu keys...\n",
                   static_cast<unsigned long long>(w.keys));
    const long long held = fill(socket, w.keys, quiet);
    if (held < 0) return 1;
    if (daemon_pid > 0) {
      memory.measured = true;
      memory.keys = w.keys;
      memory.keys_held = static_cast<std::uint64_t>(held);
      memory.rss_before_kib = before;
      memory.rss_after_kib = rss_kib(daemon_pid);
    }
  }

  // Every system is measured in `rounds` slices of seconds/rounds, taken in
  // turn (floor, rlimitd, Redis..., floor, rlimitd, ...): drift in the
  // machine (other load, a vCPU's idle state, which changes wake-up latency
  // several-fold on a VM) then falls on all of them alike.
  struct Measured {
    std::string name;
    TargetFactory make;
    const Result** row;
  };
  std::vector<Measured> plan;
  Rows rows;
  const Result* grpc_row = nullptr;
  const Result* http_row = nullptr;
  if (w.seconds > 0) {
    if (!no_floor && w.mode == Mode::kSync) {
      // The floor is a round trip, one at a time: what a synchronous check
      // cannot beat. (Pipelined runs are compared on throughput instead.)
      // Sizes are per check; a batch scales them.
      plan.push_back({"raw unix socket round trip",
                      [&w](int) {
                        return make_floor_target(kFloorRequestBytes, kFloorReplyBytes,
                                                 w.server_cpu);
                      },
                      &rows.floor});
    }
    plan.push_back(
        {w.mode == Mode::kSync ? "rlimitd check, synchronous" : "rlimitd check, pipelined",
         [&socket](int) { return make_rlimit_target(socket); }, &rows.rlimitd});
    if (!grpc_address.empty()) {
#ifdef RLIMIT_BENCH_HAVE_GRPC
      plan.push_back({"rlimitd Envoy gRPC ShouldRateLimit",
                      [&](int) { return make_grpc_target(grpc_address, grpc_domain); }, &grpc_row});
#else
      std::fprintf(stderr, "--grpc: this rlimit-bench was built without gRPC\n");
      return 2;
#endif
    }
    if (!http_address.empty()) {
      std::string host;
      int port = 0;
      if (!split_host_port(http_address, host, port)) {
        std::fprintf(stderr, "--http: HOST:PORT, not %s\n", http_address.c_str());
        return 2;
      }
      plan.push_back({w.mode == Mode::kSync ? "rlimitd HTTP check, keep-alive"
                                            : "rlimitd HTTP check, pipelined",
                      [host, port](int) { return make_http_target(host, port); }, &http_row});
    }
    if (!redis.empty()) {
#ifdef RLIMIT_BENCH_HAVE_HIREDIS
      const auto colon = redis.rfind(':');
      const std::string host = colon == std::string::npos ? "127.0.0.1" : redis.substr(0, colon);
      const int port = std::stoi(colon == std::string::npos ? redis : redis.substr(colon + 1));
      const auto redis_row = [&](RedisKind kind, const Result** row) {
        plan.push_back({redis_kind_label(kind),
                        [=](int) { return make_redis_target(host, port, kind, limit); }, row});
      };
      redis_row(RedisKind::kLuaTokenBucket, &rows.redis_lua);
      redis_row(RedisKind::kIncrExpire, &rows.redis_incr_expire);
      redis_row(RedisKind::kIncr, &rows.redis_incr);
#else
      std::fprintf(stderr, "--redis: this rlimit-bench was built without hiredis\n");
      return 2;
#endif
    }
  }
  std::vector<Result> results(plan.size());
  Workload slice = w;
  slice.seconds = w.seconds / rounds;
  for (int round = 0; round < rounds && !plan.empty(); ++round) {
    for (std::size_t t = 0; t < plan.size(); ++t) {
      if (!results[t].error.empty()) continue;
      Progress progress{.enabled = !quiet && (progress_flag || slice.seconds >= 5),
                        .label = plan[t].name};
      if (!quiet) {
        std::fprintf(stderr, "measuring %s for %.1f s (round %d of %d)...\n", plan[t].name.c_str(),
                     slice.seconds, round + 1, rounds);
      }
      slice.seed = w.seed + static_cast<std::uint64_t>(round);
      add(results[t], run_workload(plan[t].name, plan[t].make, slice, progress));
    }
  }
  for (std::size_t t = 0; t < plan.size(); ++t) *plan[t].row = &results[t];

  if (json) {
    print_json(machine, w, results, rows, memory);
  } else {
    print_table(w, results, rows, memory);
    print_face_ratios({{"gRPC face", grpc_row}, {"HTTP face", http_row}}, rows);
  }
  for (const Result& r : results) {
    if (!r.error.empty()) return 1;
  }
  return 0;
}
