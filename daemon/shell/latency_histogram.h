// A fixed-bucket histogram of durations, for rlimit_decision_seconds on
// /metrics: how long the event loop took to answer a request (decode, decide,
// encode; not the socket I/O nor the wait for the loop). Buckets from 1 us to 10 ms, as Prometheus
// histograms want them (upper bounds, the last one +Inf). Plain data bumped
// on the event loop; not thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace rlimit::shell {

struct LatencyHistogram {
  // Upper bounds of the buckets, in nanoseconds; a last bucket takes the rest.
  static constexpr std::array<std::int64_t, 13> kBoundsNs = {
      1'000,   2'500,   5'000,     10'000,    25'000,    50'000,    100'000,
      250'000, 500'000, 1'000'000, 2'500'000, 5'000'000, 10'000'000};

  // Per bucket, not cumulative: counts[i] holds durations in
  // (kBoundsNs[i - 1], kBoundsNs[i]], the last one those above every bound.
  std::array<std::uint64_t, kBoundsNs.size() + 1> counts{};
  std::uint64_t count = 0;
  std::uint64_t sum_ns = 0;

  // Records `n` requests of `ns` each (a batch decided together is recorded
  // as its mean: one clock read per batch, not per request).
  void observe(std::int64_t ns, std::uint64_t n = 1) {
    if (ns < 0) ns = 0;  // the steady clock does not go back; be safe anyway
    std::size_t i = 0;
    // Most answers take a few microseconds: the first buckets end the scan.
    while (i < kBoundsNs.size() && ns > kBoundsNs[i]) ++i;
    counts[i] += n;
    count += n;
    sum_ns += static_cast<std::uint64_t>(ns) * n;
  }
};

// The decision-time histograms, one per face that decides
// (rlimit_decision_seconds{face=...}). Owned by the Dispatcher, which every
// face calls; each face times its own requests.
struct DecisionTimes {
  LatencyHistogram unix_socket;  // per frame (frames read together: their mean)
  LatencyHistogram http;         // per /v1/check request
  LatencyHistogram grpc;         // per ShouldRateLimit call, its turn on the loop
};

}  // namespace rlimit::shell
