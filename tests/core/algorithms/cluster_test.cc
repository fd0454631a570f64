// Every replicable algorithm in a small simulated cluster, merged the way the
// Limiter merges the ledger: each node decides locally, and what it admits is
// charged into every other node's state (charge_remote) after a delay d.
// Checks the bounds docs/algorithms.md states: in any span of one period the
// cluster admits at most the limit (plus the algorithm's own edge or burst
// allowance) plus what the nodes admit before hearing of each other, about
// (N - 1) x offered rate x d; over a long run the exact algorithms admit the
// limit (debts are repaid) and the approximate ones at most the staleness
// allowance more per period. Requests that are told to wait are counted when
// they proceed. Set RLIMIT_ALGO_REPORT=1 to print the measured figures.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <queue>
#include <random>
#include <vector>

#include "core/algorithms/fixed_window.h"
#include "core/algorithms/gcra.h"
#include "core/algorithms/leaky_bucket.h"
#include "core/algorithms/sliding_log.h"
#include "core/algorithms/sliding_window.h"
#include "core/algorithms/smooth_bursty.h"
#include "core/algorithms/smooth_warming_up.h"
#include "core/time.h"

namespace rlimit::core::algorithms {
namespace {

constexpr int kNodes = 3;
constexpr std::int64_t kLimit = 100;  // per period
constexpr std::int64_t kPeriod = kUsPerSecond;
constexpr std::int64_t kDelay = 20 * kUsPerMs;  // staleness d
constexpr std::int64_t kPeriods = 300;

struct Outcome {
  std::int64_t admitted = 0;     // over the whole run
  std::int64_t max_in_span = 0;  // most proceeding in any span of one period, after the first
};

// Offered load: `load` times the limit, spread over the nodes at random.
template <class A>
Outcome simulate(const typename A::Params& p, double load, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<typename A::State> nodes(kNodes, A::fresh(p, 0));
  struct Charge {
    TimeUs at;
    int node;
    std::int64_t amount;
    bool operator>(const Charge& o) const { return at > o.at; }
  };
  std::priority_queue<Charge, std::vector<Charge>, std::greater<>> in_flight;
  std::vector<TimeUs> proceed;
  Outcome out;
  const auto mean_gap = static_cast<std::int64_t>(kPeriod / (kLimit * load));
  TimeUs now = 0;
  while (now < kPeriods * kPeriod) {
    now += 1 + static_cast<TimeUs>(rng() % (2 * mean_gap));
    while (!in_flight.empty() && in_flight.top().at <= now) {
      const Charge c = in_flight.top();
      in_flight.pop();
      A::charge_remote(nodes[c.node], p, c.amount, c.at);
    }
    const int node = static_cast<int>(rng() % kNodes);
    const Verdict v = A::evaluate(nodes[node], p, 1, now);
    if (!v.allowed) continue;
    A::commit(nodes[node], p, 1, now);
    for (int other = 0; other < kNodes; ++other) {
      if (other != node) in_flight.push({now + kDelay, other, 1});
    }
    ++out.admitted;
    proceed.push_back(now + v.delay_us);
  }
  std::sort(proceed.begin(), proceed.end());
  std::deque<TimeUs> span;
  for (const TimeUs t : proceed) {
    span.push_back(t);
    while (span.front() <= t - kPeriod) span.pop_front();
    if (t >= kPeriod) out.max_in_span = std::max<std::int64_t>(out.max_in_span, span.size());
  }
  return out;
}

// `allowance`: what the algorithm itself lets through in one period beyond
// the limit on a single node (a burst, a window edge).
template <class A>
void check(const char* name, const typename A::Params& p, std::int64_t allowance) {
  const std::int64_t ideal = kLimit * kPeriods;
  // What the nodes can admit before hearing of each other, per span: the
  // other nodes' share of the offered load during d.
  for (const double load : {1.5, 4.0}) {
    const Outcome o = simulate<A>(p, load, 7);
    const auto stale = static_cast<std::int64_t>((kNodes - 1) * load * kLimit * kDelay / kPeriod);
    if (std::getenv("RLIMIT_ALGO_REPORT") != nullptr) {
      std::printf(
          "%-22s load %.1fx: admitted %.4f of the limit over %ld periods; most in one "
          "period %ld (limit %ld, staleness allowance %ld)\n",
          name, load, static_cast<double>(o.admitted) / ideal, static_cast<long>(kPeriods),
          static_cast<long>(o.max_in_span), static_cast<long>(kLimit), static_cast<long>(stale));
    }
    SCOPED_TRACE(std::string(name) + " load " + std::to_string(load));
    if (A::replication(p) == Replication::kExact) {
      // Long run: the limit, give or take the cold-start bursts and the last d.
      EXPECT_LE(o.admitted, ideal + kNodes * allowance + stale);
    } else {
      // At most the staleness allowance more per period.
      EXPECT_LE(o.admitted, ideal + kNodes * allowance + stale * kPeriods);
    }
    EXPECT_GE(o.admitted, ideal * 97 / 100);
    // Any one period: the limit, the algorithm's allowance, and the
    // staleness allowance (twice: a span can take the stale admissions from
    // both of the periods it overlaps).
    EXPECT_LE(o.max_in_span, kLimit + allowance + 2 * stale);
  }
}

TEST(ClusterTest, Gcra) { check<Gcra>("gcra", {9, kLimit, kPeriod}, 10); }

TEST(ClusterTest, LeakyMeter) {
  check<LeakyBucket>("leaky_bucket meter", {kLimit, kPeriod, 10, LeakyBucket::Mode::kMeter}, 10);
}

TEST(ClusterTest, LeakyShaper) {
  check<LeakyBucket>("leaky_bucket shaper",
                     {kLimit, kPeriod, 10, LeakyBucket::Mode::kShaper, 50 * kUsPerMs}, 10);
}

TEST(ClusterTest, FixedWindow) {
  // The window's own edge effect: up to 2 x limit in a span across an edge.
  check<FixedWindow>("fixed_window", {kLimit, kPeriod}, kLimit);
}

TEST(ClusterTest, SlidingWindow) {
  check<SlidingWindow>("sliding_window", {kLimit, kPeriod}, kLimit);
}

TEST(ClusterTest, SlidingLog) { check<SlidingLog>("sliding_log", {kLimit, kPeriod, kLimit}, 0); }

TEST(ClusterTest, SmoothBursty) {
  check<SmoothBursty>("smooth_bursty (try)", {kLimit, kPeriod, 100 * kUsPerMs, 0}, 11);
}

TEST(ClusterTest, SmoothBurstyWaiting) {
  check<SmoothBursty>("smooth_bursty (wait)", {kLimit, kPeriod, 100 * kUsPerMs, kPeriod}, 11);
}

// Callers wait (up to a period): with try_acquire, a warm limiter admits only
// what arrives after each free ticket, well below the rate under random
// arrivals, on one node as on many (smooth_test.cc).
TEST(ClusterTest, SmoothWarmingUpWaiting) {
  check<SmoothWarmingUp>("smooth_warming_up (wait)", {kLimit, kPeriod, 200 * kUsPerMs, 3, kPeriod},
                         0);
}

}  // namespace
}  // namespace rlimit::core::algorithms
