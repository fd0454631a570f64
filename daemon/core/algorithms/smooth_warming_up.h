// Guava's SmoothWarmingUp RateLimiter: `permits` per `period_us` at the
// stable interval once warm, slower after idleness: stored permits (which
// build up while unused, to max_permits over warmup_us) cost up to
// cold_factor times the stable interval each, along Guava's ramp:
//
//   threshold = 0.5 * warmup / stable_interval
//   max       = threshold + 2 * warmup / (stable_interval * (1 + cold_factor))
//   a permit at stored level x above threshold costs
//             stable_interval * (1 + (cold_factor - 1) * (x - threshold) / (max - threshold))
//
// so going from max down to threshold takes warmup_us, and from threshold to
// zero warmup_us / 2. A fresh state is cold (full), as Guava starts. acquire /
// try_acquire and the reservation work as in smooth_bursty.h.
//
// Exact at the stable interval, and idleness stores exactly for cold factor 3
// (Guava's). A ramp price is rounded up to a tick (1 / (2 * permits *
// (1 + cold_factor)) us), and for other cold factors idleness stores whole
// units (1 / (2 * period_us * (1 + cold_factor)) of a permit) rounding up:
// both err towards waiting (a stored permit never costs less than a fresh
// one), by far less than a microsecond per call.
#pragma once

#include <cstdint>

#include "core/algorithms/algorithm.h"
#include "core/algorithms/smooth_rate.h"

namespace rlimit::core::algorithms {

struct SmoothWarmingUp {
  static constexpr std::int64_t kMaxColdFactor = 100;

  struct Params {
    std::int64_t permits = 0;               // per period, >= 1
    std::int64_t period_us = kUsPerSecond;  // > 0
    std::int64_t warmup_us = 0;             // >= 0
    std::int64_t cold_factor = 3;           // in [1, kMaxColdFactor]; Guava's public API uses 3
    std::int64_t max_wait_us = -1;          // -1: acquire (wait as needed); else try_acquire

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
  // Cold: max permits stored, as Guava's RateLimiter.create(rate, warmup).
  static State fresh(const Params& params, TimeUs now);
  // As SmoothBursty::evaluate; limit = max_permits (whole), remaining = whole
  // stored permits left (these are the slow ones).
  static Verdict evaluate(const State& state, const Params& params, std::int64_t cost, TimeUs now);
  static Ticket commit(State& state, const Params& params, std::int64_t cost, TimeUs now);
  // Remote consumption spends stored permits too: a cluster warms up together.
  static void charge_remote(State& state, const Params& params, std::int64_t amount, TimeUs now);
  static bool is_idle(const State& state, const Params& params, TimeUs now);

  static detail::SmoothShape shape(const Params& params);
};

static_assert(Algorithm<SmoothWarmingUp>);

}  // namespace rlimit::core::algorithms
