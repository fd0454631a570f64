#include "load/driver.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace rlimit::bench {
namespace {

using Clock = std::chrono::steady_clock;

std::uint64_t ns_between(Clock::time_point a, Clock::time_point b) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count());
}

// Each client's live count on its own cache line, for the progress line.
struct alignas(64) LiveCount {
  std::atomic<std::uint64_t> decisions{0};
};

}  // namespace

Result run_workload(const std::string& name, const TargetFactory& make, const Workload& w,
                    const Progress& progress) {
  Result result;
  result.name = name;
  const auto clients = static_cast<std::size_t>(std::max(1, w.clients));
  const auto batch = static_cast<std::size_t>(std::max(1, w.batch));
  const auto depth = static_cast<std::size_t>(std::max(1, w.depth));

  std::vector<Result> per_client(clients);
  std::vector<LiveCount> live(clients);
  std::atomic<std::size_t> ready{0};
  std::atomic<bool> go{false};
  std::atomic<bool> failed_to_open{false};
  std::mutex error_mutex;
  Clock::time_point start, end;

  std::vector<std::thread> threads;
  for (std::size_t c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      Result& mine = per_client[c];
      std::unique_ptr<Target> target = make(static_cast<int>(c));
      const std::string why = target->open();
      if (!why.empty()) {
        std::lock_guard lock(error_mutex);
        if (result.error.empty()) result.error = why;
        failed_to_open = true;
      }
      // After open(): a server it forks (the floor's echo child) must not
      // inherit the client's CPU.
      if (w.client_cpu >= 0) {
        cpu_set_t cpus;
        CPU_ZERO(&cpus);
        CPU_SET(w.client_cpu, &cpus);
        if (const int rc = pthread_setaffinity_np(pthread_self(), sizeof(cpus), &cpus); rc != 0) {
          std::lock_guard lock(error_mutex);
          if (result.error.empty()) {
            result.error = "cannot pin a client to CPU " + std::to_string(w.client_cpu) + ": " +
                           std::strerror(rc);
          }
          failed_to_open = true;
        }
      }
      // Sequential walks start spread out, so clients name different keys.
      KeyPicker picker(w.keys, w.skew, w.zipf_s, w.seed * 1000003 + c, c * (w.keys / clients));
      std::vector<std::uint64_t> keys(batch);
      const auto next_keys = [&] {
        for (auto& k : keys) k = picker.next();
      };
      ++ready;
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      if (failed_to_open) return;

      std::uint64_t decisions = 0;
      if (w.mode == Mode::kSync) {
        // Pacing: this client's share of the rate, as a schedule of send times.
        const double interval_s = w.rate > 0 ? static_cast<double>(clients * batch) / w.rate : 0;
        Clock::time_point next_send = start;
        for (;;) {
          if (interval_s > 0) {
            next_send += std::chrono::duration_cast<Clock::duration>(
                std::chrono::duration<double>(interval_s));
            if (next_send >= end) break;
            std::this_thread::sleep_until(next_send);
          }
          const auto t0 = Clock::now();
          if (t0 >= end) break;
          next_keys();
          mine.tally += target->call(keys);
          mine.latency.record(ns_between(t0, Clock::now()));
          ++mine.requests;
          decisions += batch;
          live[c].decisions.store(decisions, std::memory_order_relaxed);
        }
      } else {
        std::vector<Clock::time_point> sent(depth);  // a ring, by request number
        std::uint64_t issued = 0, answered = 0;
        for (;;) {
          const auto now = Clock::now();
          if (now >= end) break;
          while (issued - answered < depth) {
            next_keys();
            target->send(keys);
            sent[issued % depth] = now;
            ++issued;
          }
          mine.tally += target->receive();
          mine.latency.record(ns_between(sent[answered % depth], Clock::now()));
          ++answered;
          ++mine.requests;
          decisions += batch;
          live[c].decisions.store(decisions, std::memory_order_relaxed);
        }
        while (answered < issued) {  // drain, unmeasured
          target->receive();
          ++answered;
        }
      }
      mine.decisions = decisions;
    });
  }

  while (ready.load() < clients) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  start = Clock::now() + std::chrono::milliseconds(50);
  end =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(w.seconds));
  std::this_thread::sleep_until(start);
  go.store(true, std::memory_order_release);

  if (progress.enabled && !failed_to_open) {
    std::uint64_t last = 0;
    auto tick = start;
    for (int second = 1;; ++second) {
      tick += std::chrono::seconds(1);
      if (tick >= end) break;
      std::this_thread::sleep_until(tick);
      std::uint64_t total = 0;
      for (const LiveCount& l : live) total += l.decisions.load(std::memory_order_relaxed);
      std::fprintf(stderr, "  %s: %d/%.0f s, %.0f decisions/s\n", progress.label.c_str(), second,
                   w.seconds, static_cast<double>(total - last));
      last = total;
    }
  }
  for (auto& t : threads) t.join();
  // Requests are counted when they began inside the window; the few that end
  // just after it change the rate by microseconds in seconds.
  result.seconds = std::chrono::duration<double>(end - start).count();
  if (failed_to_open) return result;
  for (const Result& r : per_client) {
    result.requests += r.requests;
    result.decisions += r.decisions;
    result.tally += r.tally;
    result.latency.merge(r.latency);
  }
  return result;
}

}  // namespace rlimit::bench
