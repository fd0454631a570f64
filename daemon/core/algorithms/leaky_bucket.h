// The leaky bucket, as a meter and as a shaper (nginx's limit_req).
//
// The bucket drains `limit` units per `period_us` and holds `capacity` units.
// A request of cost c pours c units in: the bucket must not overflow. nginx's
// `rate=r burst=b` is limit r per second with capacity b + 1 (nginx counts the
// excess beyond the request being served).
//
// - Meter (nginx `nodelay`): the request fits or is refused; no waiting.
// - Shaper (nginx without `nodelay`): an admitted request waits until the
//   water ahead of it has drained, so requests leave at the drain rate; the
//   verdict's delay_us says how long. Refused when the bucket would overflow,
//   or when the wait would exceed max_delay_us (if set).
//
// The state is the time the bucket will be empty (virtual scheduling, see
// virtual_schedule.h), exact in ticks of 1/limit us: 16 bytes, no drip.
#pragma once

#include <cstdint>

#include "core/algorithms/algorithm.h"

namespace rlimit::core::algorithms {

struct LeakyBucket {
  enum class Mode : std::uint8_t { kMeter, kShaper };

  struct Params {
    std::int64_t limit = 0;      // units drained per period, >= 1
    std::int64_t period_us = 0;  // > 0
    std::int64_t capacity = 0;   // bucket size in units, >= 0
    Mode mode = Mode::kMeter;
    std::int64_t max_delay_us = -1;  // shaper: refuse waits above this; -1 none

    friend bool operator==(const Params&, const Params&) = default;
  };
  struct State {
    TimeUs empty_at_us = 0;          // when the bucket is (will be) empty
    std::int64_t empty_at_frac = 0;  // in [0, limit): 1/limit of a microsecond
  };
  // A meter is exact; a shaper's rate is too, but nodes schedule their
  // delays independently, so the cluster's spacing is per node.
  static Replication replication(const Params& params) {
    return params.mode == Mode::kMeter ? Replication::kExact : Replication::kApproximate;
  }

  static const char* validate(const Params& params);
  static State fresh(const Params& params, TimeUs now);
  // limit = capacity; remaining = whole units of room left; reset_after =
  // time to drain empty. Shaper: delay_us = time for the water ahead to drain
  // (rounded up to a microsecond); retry_after is when both the capacity and
  // the max delay would admit the request.
  static Verdict evaluate(const State& state, const Params& params, std::int64_t cost, TimeUs now);
  static Ticket commit(State& state, const Params& params, std::int64_t cost, TimeUs now);
  static void charge_remote(State& state, const Params& params, std::int64_t amount, TimeUs now);
  static bool is_idle(const State& state, const Params& params, TimeUs now);
};

static_assert(Algorithm<LeakyBucket>);

}  // namespace rlimit::core::algorithms
