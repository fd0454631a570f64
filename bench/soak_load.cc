// rlimit-soak-load: the steady load of scripts/soak.sh. Drives one or more
// rlimitd (one thread per --socket, each sending its share of every rate)
// with three classes of checks at fixed rates, and writes cumulative counts
// and the ideal admitted for the limited classes to a stats file every second:
//
//   global  {soak=global}: one key under the rule soak-global (limit G/s,
//           burst Bg), demanded above G. Ideal admitted by time t:
//           Bg + G * t.
//   hot     {user=hot-<epoch>-<i>}: H users under the rule per-user (limit
//           U/s, burst Bu), each demanded above U; a new set of H names
//           every --hot-rotate-s, so the old keys go idle and are collected.
//           Ideal: per user and epoch, Bu + U * (time the epoch has run).
//   cold    {user=u-<n>}: n uniform in a window of --cold-keys keys whose
//           start moves --churn-keys-per-s, each key demanded far below U:
//           ideal is that every answered check is admitted.
//
// With --stats-log every write is also appended to a file, one JSON object
// per line, with the largest count any one hot user was admitted since the
// previous line (hot_user_max_window): the worst window per key.
//
// The ideals hold while the demand stays above the limits, which the rates
// must ensure with a node down too (scripts/soak.sh picks them). A check a
// node could not answer (down, timed out) counts as unavailable, never as
// admitted (the client fails open, but the soak counts what rlimitd decided).
//
// Usage: rlimit-soak-load --socket PATH... --stats FILE [--stats-log FILE]
//        [--seconds S] [rates]
// Stops after --seconds or on SIGTERM/SIGINT, writing the stats a last time.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "rlimit/client.h"

namespace {

using Clock = std::chrono::steady_clock;

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop.store(true); }

enum Class { kGlobal, kHot, kCold, kClasses };
constexpr std::array<const char*, kClasses> kClassNames = {"global", "hot", "cold"};
enum Outcome { kAdmitted, kDenied, kUnavailable, kOther, kOutcomes };

struct Settings {
  std::vector<std::string> sockets;
  std::string stats_path;
  std::string stats_log_path;  // "" for none
  double seconds = 60;
  double global_rate = 300, global_limit = 100, global_burst = 100;
  double hot_rate = 450, user_limit = 5, user_burst = 5;
  int hot_users = 30;
  double hot_rotate_s = 300;
  double cold_rate = 2000;
  std::uint64_t cold_keys = 1'000'000;
  double churn_keys_per_s = 1000;
  std::uint32_t timeout_ms = 200;
};

// Cumulative counts, shared by the node threads (relaxed: only totals matter).
struct Counts {
  explicit Counts(int hot_users) : hot_admitted_by_user(static_cast<std::size_t>(hot_users)) {}
  std::array<std::array<std::atomic<std::uint64_t>, kOutcomes>, kClasses> by_class{};
  std::atomic<std::uint64_t> skipped{0};  // checks not sent because a thread fell behind
  // Admitted per hot user index (the names of one epoch share the indexes).
  std::vector<std::atomic<std::uint64_t>> hot_admitted_by_user;
};

// The bound on catching up: a thread more than this behind its schedule
// (e.g. after timeouts against a stalled node) skips ahead, counted.
constexpr double kMaxBacklogS = 1.0;
// Checks in one frame at most (below the daemon's max_checks_per_frame).
constexpr std::size_t kMaxBatch = 500;
constexpr auto kTick = std::chrono::milliseconds(10);

class Rng {  // splitmix64
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

 private:
  std::uint64_t state_;
};

std::string decimal(std::uint64_t n) {
  char digits[24];
  return std::string(digits, std::to_chars(digits, digits + sizeof(digits), n).ptr);
}

void drive_node(const Settings& s, std::size_t node, Clock::time_point start, Counts& counts) {
  rlimit::ClientOptions options;
  options.socket_path = s.sockets[node];
  options.timeout_ms = s.timeout_ms;
  rlimit::Client client(options);
  Rng rng(0x50a4 + node);
  const double share = 1.0 / static_cast<double>(s.sockets.size());
  const std::array<double, kClasses> rate_per_s = {s.global_rate * share, s.hot_rate * share,
                                                   s.cold_rate * share};
  std::array<std::uint64_t, kClasses> sent{};
  std::vector<rlimit::CheckRequest> batch;
  std::vector<Class> batch_class;
  std::vector<std::uint64_t> batch_user;  // the hot user's index, for kHot
  auto next_tick = start;
  while (!g_stop.load(std::memory_order_relaxed)) {
    next_tick += kTick;
    std::this_thread::sleep_until(next_tick);
    const double t = std::chrono::duration<double>(Clock::now() - start).count();
    if (t >= s.seconds) break;
    batch.clear();
    batch_class.clear();
    batch_user.clear();
    for (int c = 0; c < kClasses; ++c) {
      const auto due = static_cast<std::uint64_t>(rate_per_s[c] * t);
      const auto backlog_bound = static_cast<std::uint64_t>(rate_per_s[c] * kMaxBacklogS) + 1;
      if (due > sent[c] + backlog_bound) {
        counts.skipped.fetch_add(due - backlog_bound - sent[c], std::memory_order_relaxed);
        sent[c] = due - backlog_bound;
      }
      for (; sent[c] < due && batch.size() < kMaxBatch; ++sent[c]) {
        rlimit::CheckRequest request;
        std::uint64_t user = 0;
        if (c == kGlobal) {
          request.descriptors = {{"soak", "global"}};
        } else if (c == kHot) {
          const auto epoch = static_cast<std::uint64_t>(t / s.hot_rotate_s);
          // Users in turn, offset by node, so every user is demanded from every node.
          user = (sent[c] + node) % static_cast<std::uint64_t>(s.hot_users);
          request.descriptors = {{"user", "hot-" + decimal(epoch) + "-" + decimal(user)}};
        } else {
          const auto window_start = static_cast<std::uint64_t>(s.churn_keys_per_s * t);
          request.descriptors = {{"user", "u-" + decimal(window_start + rng.next() % s.cold_keys)}};
        }
        batch.push_back(std::move(request));
        batch_class.push_back(static_cast<Class>(c));
        batch_user.push_back(user);
      }
    }
    if (batch.empty()) continue;
    const std::vector<rlimit::Decision> decisions = client.check_batch(batch);
    for (std::size_t i = 0; i < batch.size(); ++i) {
      Outcome outcome = kOther;
      if (i < decisions.size()) {
        const rlimit::Decision& d = decisions[i];
        if (d.status == rlimit::DecisionStatus::kOk) {
          outcome = d.allowed ? kAdmitted : kDenied;
        } else if (d.status == rlimit::DecisionStatus::kUnavailable) {
          outcome = kUnavailable;
        }
      }
      counts.by_class[batch_class[i]][outcome].fetch_add(1, std::memory_order_relaxed);
      if (outcome == kAdmitted && batch_class[i] == kHot) {
        counts.hot_admitted_by_user[batch_user[i]].fetch_add(1, std::memory_order_relaxed);
      }
    }
  }
}

// Ideal admitted by the hot users after t seconds: a burst per user and
// epoch begun, plus the limit over the time each epoch has run.
double hot_ideal(const Settings& s, double t) {
  double ideal = 0;
  for (double epoch_start = 0; epoch_start <= t; epoch_start += s.hot_rotate_s) {
    const double ran_s = std::min(t, epoch_start + s.hot_rotate_s) - epoch_start;
    ideal += s.hot_users * (s.user_burst + s.user_limit * ran_s);
  }
  return ideal;
}

// The largest count a hot user was admitted since `last` (per user index),
// which it then updates.
std::uint64_t hot_user_max_since(const Counts& counts, std::vector<std::uint64_t>& last) {
  std::uint64_t max = 0;
  for (std::size_t u = 0; u < last.size(); ++u) {
    const std::uint64_t now = counts.hot_admitted_by_user[u].load(std::memory_order_relaxed);
    max = std::max(max, now - last[u]);
    last[u] = now;
  }
  return max;
}

// Writes the counts as one JSON object to `path` (through a temporary file
// and a rename, so a reader never sees half of it), and appends it to the
// stats log when there is one. `last_by_user` is what the hot users had at
// the previous write.
bool write_stats(const Settings& s, const Counts& counts, double t,
                 std::vector<std::uint64_t>& last_by_user) {
  const std::string temp = s.stats_path + ".tmp";
  std::FILE* f = std::fopen(temp.c_str(), "w");
  if (f == nullptr) return false;
  std::fprintf(f, "{\"elapsed_s\": %.3f, \"skipped\": %llu", t,
               static_cast<unsigned long long>(counts.skipped.load()));
  std::fprintf(f, ", \"hot_user_max_window\": %llu",
               static_cast<unsigned long long>(hot_user_max_since(counts, last_by_user)));
  std::fprintf(f, ", \"global_ideal\": %.1f, \"hot_ideal\": %.1f",
               s.global_burst + s.global_limit * t, hot_ideal(s, t));
  static constexpr std::array<const char*, kOutcomes> kOutcomeNames = {"admitted", "denied",
                                                                       "unavailable", "other"};
  for (int c = 0; c < kClasses; ++c) {
    for (int o = 0; o < kOutcomes; ++o) {
      std::fprintf(f, ", \"%s_%s\": %llu", kClassNames[c], kOutcomeNames[o],
                   static_cast<unsigned long long>(counts.by_class[c][o].load()));
    }
  }
  std::fprintf(f, "}\n");
  bool ok = std::fclose(f) == 0 && std::rename(temp.c_str(), s.stats_path.c_str()) == 0;
  if (ok && !s.stats_log_path.empty()) {  // the same line, appended
    std::FILE* in = std::fopen(s.stats_path.c_str(), "r");
    std::FILE* log = std::fopen(s.stats_log_path.c_str(), "a");
    char buffer[4096];
    std::size_t n = 0;
    while (in != nullptr && log != nullptr && (n = std::fread(buffer, 1, sizeof(buffer), in)) > 0) {
      ok = ok && std::fwrite(buffer, 1, n, log) == n;
    }
    ok = ok && in != nullptr && log != nullptr;
    if (in != nullptr) std::fclose(in);
    if (log != nullptr) ok = std::fclose(log) == 0 && ok;
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rlimit-soak-load: steady load for scripts/soak.sh, with ideal admitted counts"};
  Settings s;
  app.add_option("--socket", s.sockets, "rlimitd socket (one thread each)")->required();
  app.add_option("--stats", s.stats_path, "JSON counts written here every second")->required();
  app.add_option("--stats-log", s.stats_log_path, "each second's counts appended here too");
  app.add_option("--seconds", s.seconds, "run this long")->check(CLI::PositiveNumber);
  app.add_option("--global-rate", s.global_rate, "checks/s on the global key (all nodes)");
  app.add_option("--global-limit", s.global_limit, "soak-global's limit per second");
  app.add_option("--global-burst", s.global_burst, "soak-global's burst");
  app.add_option("--hot-rate", s.hot_rate, "checks/s over the hot users (all nodes)");
  app.add_option("--hot-users", s.hot_users, "hot users at a time")->check(CLI::PositiveNumber);
  app.add_option("--hot-rotate-s", s.hot_rotate_s, "a new set of hot users this often")
      ->check(CLI::PositiveNumber);
  app.add_option("--user-limit", s.user_limit, "per-user's limit per second");
  app.add_option("--user-burst", s.user_burst, "per-user's burst");
  app.add_option("--cold-rate", s.cold_rate, "checks/s over the cold keys (all nodes)");
  app.add_option("--cold-keys", s.cold_keys, "cold key window")->check(CLI::PositiveNumber);
  app.add_option("--churn-keys-per-s", s.churn_keys_per_s, "the window moves this fast");
  app.add_option("--timeout-ms", s.timeout_ms, "per check_batch call");
  CLI11_PARSE(app, argc, argv);

  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  Counts counts(s.hot_users);
  std::vector<std::uint64_t> last_by_user(static_cast<std::size_t>(s.hot_users), 0);
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (std::size_t node = 0; node < s.sockets.size(); ++node) {
    threads.emplace_back(drive_node, std::cref(s), node, start, std::ref(counts));
  }
  auto next_write = start;
  double t = 0;
  while (!g_stop.load() && t < s.seconds) {
    next_write += std::chrono::seconds(1);
    std::this_thread::sleep_until(
        std::min(next_write, start + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(s.seconds))));
    t = std::min(s.seconds, std::chrono::duration<double>(Clock::now() - start).count());
    if (!write_stats(s, counts, t, last_by_user)) {
      std::fprintf(stderr, "rlimit-soak-load: cannot write %s\n", s.stats_path.c_str());
    }
  }
  g_stop.store(true);
  for (std::thread& thread : threads) thread.join();
  t = std::min(s.seconds, std::chrono::duration<double>(Clock::now() - start).count());
  return write_stats(s, counts, t, last_by_user) ? 0 : 1;
}
