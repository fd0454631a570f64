// Guava's SmoothBursty RateLimiter: `permits` per `period_us` handed out at a
// stable interval, with up to max_burst_us worth of permits stored while
// unused and handed out without waiting.
//
// acquire (max_wait_us = -1) always succeeds: the verdict's delay_us is how
// long the caller waits before proceeding (Guava's acquire() sleeps that
// long). The cost is reserved against the next caller, as Guava does: a
// request for 100 permits on an idle limiter proceeds at once and the next
// request waits for them. try_acquire with a timeout is max_wait_us = timeout
// (0 for tryAcquire()): refused when the wait would exceed it, whatever the
// cost (Guava's canAcquire). To give one request a timeout, copy the params
// and set max_wait_us.
//
// A fresh state is idle since forever, so it holds the full burst (as a key
// never seen before should), unless start_empty: then it starts with nothing
// stored, as Guava's RateLimiter.create() does (empty() is that state). Either
// way a key is idle once its burst is stored again, so a key forgotten after
// idling starts as a new one when it returns.
// Exact: stored permits count in 1/period_us of a permit and time in
// 1/permits of a microsecond.
#pragma once

#include <cstdint>

#include "core/algorithms/algorithm.h"
#include "core/algorithms/smooth_rate.h"

namespace rlimit::core::algorithms {

struct SmoothBursty {
  struct Params {
    std::int64_t permits = 0;                  // per period, >= 1
    std::int64_t period_us = kUsPerSecond;     // > 0
    std::int64_t max_burst_us = kUsPerSecond;  // Guava's maxBurstSeconds, >= 0
    std::int64_t max_wait_us = -1;             // -1: acquire (wait as needed); else try_acquire
    bool start_empty = false;                  // fresh() stores nothing (Guava's create())

    friend bool operator==(const Params&, const Params&) = default;
  };
  using State = SmoothState;
  // The reservation state follows total consumption (the rate is exact),
  // but each node schedules its callers' waits on its own: the spacing is
  // per node. With max_wait_us = 0 it decides as a rate limit (exact).
  static Replication replication(const Params& params) {
    return params.max_wait_us == 0 ? Replication::kExact : Replication::kApproximate;
  }

  static const char* validate(const Params& params);
  // Idle since forever (the burst is stored), or empty() with start_empty.
  static State fresh(const Params& params, TimeUs now);
  // Guava's RateLimiter.create(): nothing stored yet.
  static State empty(const Params& params, TimeUs now);
  // delay_us = the wait (when allowed); limit = the burst in whole permits;
  // remaining = whole stored permits left; retry_after = when the wait fits
  // max_wait_us; reset_after = until nothing is reserved and the burst is full.
  static Verdict evaluate(const State& state, const Params& params, std::int64_t cost, TimeUs now);
  static Ticket commit(State& state, const Params& params, std::int64_t cost, TimeUs now);
  static void charge_remote(State& state, const Params& params, std::int64_t amount, TimeUs now);
  static bool is_idle(const State& state, const Params& params, TimeUs now);

  static detail::SmoothShape shape(const Params& params);
};

static_assert(Algorithm<SmoothBursty>);

}  // namespace rlimit::core::algorithms
