// The engine Guava's SmoothRateLimiter is built on, shared by smooth_bursty.h
// and smooth_warming_up.h, in exact integers.
//
// The state remembers when the next request may be served (next_free) and how
// many permits idleness has stored. A request is served at next_free: it
// waits max(0, next_free - now) and then pushes next_free forward by the price
// of its permits, so its cost is paid by the NEXT caller (a reservation).
// Stored permits are spent first; their price depends on the variant (free
// for bursty, along the warm-up ramp for warming up); fresh permits cost the
// stable interval each. While next_free is in the past, permits are stored at
// the cool-down rate, up to max.
//
// Units: permits are counted in `unit` parts and time in `tick` parts of a
// microsecond, chosen so that one fresh unit costs exactly one tick and the
// stable interval, the thresholds and the storage limit are whole numbers.
// Internal: use the two variants.
#pragma once

#include <cstdint>

#include "core/algorithms/algorithm.h"

namespace rlimit::core::algorithms {

struct SmoothState {
  std::int64_t stored = 0;          // stored permits, in units
  TimeUs next_free_us = 0;          // when the next request may be served
  std::int64_t next_free_frac = 0;  // in [0, tick): 1/tick of a microsecond
};

namespace detail {

struct SmoothShape {
  i128 unit = 1;       // units per permit
  i128 tick = 1;       // ticks per microsecond; a fresh unit costs one tick
  i128 accrual = 1;    // units stored per microsecond of idleness
  i128 max_units = 0;  // storage limit
  bool stored_free = false;
  // Warm-up ramp: stored units above `threshold` cost more, linearly up to
  // cold_factor ticks each at max_units: taking k units whose distances above
  // the threshold go from a down to b costs k + ceil(slope_num * k * (a + b) /
  // slope_den) ticks.
  i128 threshold = 0;
  i128 slope_num = 0;
  i128 slope_den = 1;
  std::int64_t max_wait_us = -1;  // refuse waits above this; -1 never refuse
};

Verdict smooth_evaluate(const SmoothState& state, const SmoothShape& shape, std::int64_t cost,
                        TimeUs now);
void smooth_commit(SmoothState& state, const SmoothShape& shape, std::int64_t cost, TimeUs now);
bool smooth_idle(const SmoothState& state, const SmoothShape& shape, TimeUs now);

}  // namespace detail
}  // namespace rlimit::core::algorithms
