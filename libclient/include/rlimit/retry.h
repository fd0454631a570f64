// A retry helper for callers that were denied: exponential backoff with full
// jitter (a uniform random delay in [0, min(cap, base * 2^attempt)]) that is
// never shorter than the daemon's retry_after. Thread-safety: a Backoff is
// used by one caller at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <thread>

#include "rlimit/client.h"

namespace rlimit {

struct RetryPolicy {
  std::chrono::microseconds base{1000};
  std::chrono::microseconds cap{1'000'000};
  std::uint32_t max_retries = 5;  // attempts after the first
};

class RLIMIT_API Backoff {
 public:
  explicit Backoff(RetryPolicy policy, std::uint64_t seed = std::random_device{}());

  // The delay before the next attempt after a denial whose retry_after was
  // `retry_after_us` (0: unknown). nullopt when the retries are used up, when
  // the daemon said the request can never succeed (-1), or when retry_after
  // exceeds the cap.
  std::optional<std::chrono::microseconds> next_delay(std::int64_t retry_after_us);
  std::uint32_t retries() const { return retries_; }
  void reset() { retries_ = 0; }

 private:
  RetryPolicy policy_;
  std::mt19937_64 rng_;
  std::uint32_t retries_ = 0;
};

// Checks `request`, and while it is denied sleeps as `backoff` says and tries
// again. Returns the last decision. `sleep` is called with each delay
// (default: std::this_thread::sleep_for).
template <typename Sleep>
Decision check_with_retry(Client& client, const CheckRequest& request, Backoff& backoff,
                          Sleep&& sleep) {
  Decision decision = client.check(request);
  while (!decision.allowed) {
    const auto delay = backoff.next_delay(decision.retry_after_us());
    if (!delay) break;
    sleep(*delay);
    decision = client.check(request);
  }
  return decision;
}

inline Decision check_with_retry(Client& client, const CheckRequest& request, Backoff& backoff) {
  return check_with_retry(client, request, backoff,
                          [](std::chrono::microseconds d) { std::this_thread::sleep_for(d); });
}

}  // namespace rlimit
