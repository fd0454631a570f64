#include "core/algorithms/smooth_rate.h"

#include <algorithm>
#include <cassert>

namespace rlimit::core::algorithms::detail {
namespace {

// The state brought up to `now` (Guava's resync), in units and ticks.
struct Synced {
  i128 now;        // ticks
  i128 next_free;  // ticks, >= now
  i128 stored;     // units
};

// Units stored by `idle` ticks of idleness, rounded up: exact when a tick
// stores a whole number of units (bursty; warming up with cold factor 3), and
// otherwise errs towards more stored permits, which never cost less than
// fresh ones, so towards waiting.
i128 stored_by(i128 idle, const SmoothShape& shape) {
  return ceil_div(idle * shape.accrual, shape.tick);
}

// The fewest ticks of idleness that store `units` more (the inverse of
// stored_by).
i128 ticks_to_store(i128 units, const SmoothShape& shape) {
  return units <= 0 ? 0 : floor_div((units - 1) * shape.tick, shape.accrual) + 1;
}

Synced sync(const SmoothState& state, const SmoothShape& shape, TimeUs now) {
  Synced s;
  s.now = static_cast<i128>(now) * shape.tick;
  s.next_free =
      to_ticks(state.next_free_us, state.next_free_frac, static_cast<std::int64_t>(shape.tick));
  s.stored = state.stored;
  if (s.now > s.next_free) {
    // Stored at the cool-down rate, up to max.
    const i128 idle = s.now - s.next_free;
    const i128 room = shape.max_units - s.stored;
    s.stored =
        idle >= ticks_to_store(room, shape) ? shape.max_units : s.stored + stored_by(idle, shape);
    s.next_free = s.now;
  }
  return s;
}

// Ticks it costs to take `take` units out of `stored`.
i128 stored_price(i128 stored, i128 take, const SmoothShape& shape) {
  if (shape.stored_free) return 0;
  const i128 above = stored - shape.threshold;
  i128 surcharge = 0;
  if (above > 0) {
    const i128 k = std::min(above, take);
    const i128 t = k * (above + (above - k));
    const i128 q = floor_div(t, shape.slope_den);
    const i128 r = t - q * shape.slope_den;
    surcharge = shape.slope_num * q + ceil_div(shape.slope_num * r, shape.slope_den);
  }
  return take + surcharge;
}

struct Reservation {
  i128 left;       // stored units after the request
  i128 next_free;  // ticks
};

Reservation reserve(const Synced& s, const SmoothShape& shape, std::int64_t cost) {
  const i128 want = static_cast<i128>(cost) * shape.unit;
  const i128 spend = std::min(want, s.stored);
  const i128 price = stored_price(s.stored, spend, shape) + (want - spend);
  const i128 ceiling = s.now + static_cast<i128>(kMaxAheadUs) * shape.tick;
  return {s.stored - spend, std::max(std::min(s.next_free + price, ceiling), s.next_free)};
}

}  // namespace

Verdict smooth_evaluate(const SmoothState& state, const SmoothShape& shape, std::int64_t cost,
                        TimeUs now) {
  assert(cost >= 0 && cost <= kMaxCost);
  const Synced s = sync(state, shape, now);
  const i128 wait = s.next_free - s.now;  // >= 0
  const i128 max_wait = static_cast<i128>(shape.max_wait_us) * shape.tick;
  Verdict v;
  v.allowed = shape.max_wait_us < 0 || wait <= max_wait;
  v.limit = non_negative(floor_div(shape.max_units, shape.unit));
  const Reservation r = reserve(s, shape, cost);
  const i128 left = v.allowed ? r.left : s.stored;
  const i128 busy = (v.allowed ? r.next_free : s.next_free) - s.now;
  v.remaining = non_negative(floor_div(left, shape.unit));
  v.reset_after_us =
      non_negative(ceil_div(busy + ticks_to_store(shape.max_units - left, shape), shape.tick));
  v.delay_us = non_negative(ceil_div(wait, shape.tick));
  if (!v.allowed) {
    const i128 late = wait - max_wait;
    v.retry_after_us = non_negative(ceil_div(late, shape.tick));
    v.excess = non_negative(ceil_div(late, shape.unit));  // a fresh permit costs `unit` ticks
  }
  return v;
}

void smooth_commit(SmoothState& state, const SmoothShape& shape, std::int64_t cost, TimeUs now) {
  assert(cost >= 0 && cost <= kMaxCost);
  const Synced s = sync(state, shape, now);
  const Reservation r = reserve(s, shape, cost);
  state.stored = static_cast<std::int64_t>(r.left);
  const Split next = from_ticks(r.next_free, static_cast<std::int64_t>(shape.tick));
  state.next_free_us = next.us;
  state.next_free_frac = next.frac;
}

bool smooth_idle(const SmoothState& state, const SmoothShape& shape, TimeUs now) {
  const Synced s = sync(state, shape, now);
  return s.next_free <= s.now && s.stored == shape.max_units;
}

}  // namespace rlimit::core::algorithms::detail
