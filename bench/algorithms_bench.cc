// rlimit-algorithms-bench: the cost of one decision (evaluate, plus commit
// when admitted) for every algorithm in daemon/core/algorithms, on one key
// offered twice its rate (so about half the decisions admit), and the bytes
// of state each keeps per key. The token bucket the Limiter uses today is
// the baseline.
//
//   rlimit-algorithms-bench [--benchmark_filter=...] [--benchmark_repetitions=N]
#include <benchmark/benchmark.h>

#include <cstdint>
#include <deque>

#include "core/algorithms/concurrency.h"
#include "core/algorithms/fixed_window.h"
#include "core/algorithms/gcra.h"
#include "core/algorithms/leaky_bucket.h"
#include "core/algorithms/sliding_log.h"
#include "core/algorithms/sliding_window.h"
#include "core/algorithms/smooth_bursty.h"
#include "core/algorithms/smooth_warming_up.h"
#include "core/time.h"
#include "core/token_bucket.h"

namespace {

using namespace rlimit::core;
using namespace rlimit::core::algorithms;

// 1000 per second, offered one request every 500 us; 7 per 3 s variants would
// cost the same (the arithmetic is the same 128-bit integer work).
constexpr std::int64_t kLimit = 1000;
constexpr std::int64_t kStepUs = kUsPerSecond / kLimit / 2;

template <class A>
void decide(benchmark::State& st, const typename A::Params& params, std::int64_t state_bytes) {
  typename A::State s = A::fresh(params, 0);
  TimeUs now = 0;
  std::int64_t admitted = 0;
  for (auto _ : st) {
    now += kStepUs;
    const Verdict v = A::evaluate(s, params, 1, now);
    if (v.allowed) {
      A::commit(s, params, 1, now);
      ++admitted;
    }
    benchmark::DoNotOptimize(v);
  }
  st.counters["admitted"] =
      benchmark::Counter(static_cast<double>(admitted) / static_cast<double>(st.iterations()));
  st.counters["state_bytes"] = static_cast<double>(state_bytes);
}

void BM_TokenBucket(benchmark::State& st) {
  const BucketParams params{kLimit, kUsPerSecond, kLimit};
  TokenBucket b = TokenBucket::full(params, 0);
  TimeUs now = 0;
  for (auto _ : st) {
    now += kStepUs;
    b.refill(params, now);
    const bool allowed = b.allows(1);
    if (allowed) b.charge(1);
    benchmark::DoNotOptimize(allowed);
    benchmark::DoNotOptimize(b.retry_after_us(params, 1));
  }
  st.counters["state_bytes"] = sizeof(TokenBucket);
}
BENCHMARK(BM_TokenBucket);

void BM_LeakyMeter(benchmark::State& st) {
  decide<LeakyBucket>(st, {kLimit, kUsPerSecond, kLimit, LeakyBucket::Mode::kMeter},
                      sizeof(LeakyBucket::State));
}
BENCHMARK(BM_LeakyMeter);

void BM_LeakyShaper(benchmark::State& st) {
  decide<LeakyBucket>(st, {kLimit, kUsPerSecond, kLimit, LeakyBucket::Mode::kShaper, 100'000},
                      sizeof(LeakyBucket::State));
}
BENCHMARK(BM_LeakyShaper);

void BM_Gcra(benchmark::State& st) {
  decide<Gcra>(st, {kLimit - 1, kLimit, kUsPerSecond}, sizeof(Gcra::State));
}
BENCHMARK(BM_Gcra);

void BM_FixedWindow(benchmark::State& st) {
  decide<FixedWindow>(st, {kLimit, kUsPerSecond}, sizeof(FixedWindow::State));
}
BENCHMARK(BM_FixedWindow);

void BM_SlidingWindow(benchmark::State& st) {
  decide<SlidingWindow>(st, {kLimit, kUsPerSecond}, sizeof(SlidingWindow::State));
}
BENCHMARK(BM_SlidingWindow);

// Exact: room for every admitted request (1000 entries of 16 bytes).
void BM_SlidingLog(benchmark::State& st) {
  decide<SlidingLog>(st, {kLimit, kUsPerSecond, kLimit},
                     sizeof(SlidingLog::State) + kLimit * sizeof(SlidingLog::Entry));
}
BENCHMARK(BM_SlidingLog);

// Bounded at 64 entries: every admission coalesces a pair.
void BM_SlidingLogBounded64(benchmark::State& st) {
  decide<SlidingLog>(st, {kLimit, kUsPerSecond, 64},
                     sizeof(SlidingLog::State) + 64 * sizeof(SlidingLog::Entry));
}
BENCHMARK(BM_SlidingLogBounded64);

void BM_SmoothBursty(benchmark::State& st) {
  decide<SmoothBursty>(st, {kLimit, kUsPerSecond, kUsPerSecond, 0}, sizeof(SmoothBursty::State));
}
BENCHMARK(BM_SmoothBursty);

void BM_SmoothWarmingUp(benchmark::State& st) {
  // Mostly on the ramp: a long warm-up at a low utilisation.
  decide<SmoothWarmingUp>(st, {kLimit, kUsPerSecond, 10 * kUsPerSecond, 3, 0},
                          sizeof(SmoothWarmingUp::State));
}
BENCHMARK(BM_SmoothWarmingUp);

// 100 slots; each admitted lease is released 50 decisions later.
void BM_Concurrency(benchmark::State& st) {
  const Concurrency::Params params{100, 10 * kUsPerSecond};
  Concurrency::State s = Concurrency::fresh(params, 0);
  std::deque<Ticket> held;
  TimeUs now = 0;
  for (auto _ : st) {
    now += kStepUs;
    const Verdict v = Concurrency::evaluate(s, params, 1, now);
    if (v.allowed) held.push_back(Concurrency::commit(s, params, 1, now));
    if (held.size() > 50) {
      Concurrency::release(s, params, held.front(), now);
      held.pop_front();
    }
    benchmark::DoNotOptimize(v);
  }
  st.counters["state_bytes"] =
      static_cast<double>(sizeof(Concurrency::State) + 50 * sizeof(Concurrency::Lease));
}
BENCHMARK(BM_Concurrency);

}  // namespace

BENCHMARK_MAIN();
