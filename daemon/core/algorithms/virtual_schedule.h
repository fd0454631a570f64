// The virtual-scheduling arithmetic GCRA and the leaky bucket share: a
// theoretical arrival time (TAT) that moves forward by the emission interval
// T = period_us / limit for each unit of cost. A bucket of `capacity` units
// holds capacity * T of time; a request fits when the TAT it would leave
// behind is at most capacity * T ahead of now.
//
// Times are kept exactly as ticks of 1/limit microsecond (so T is exactly
// `period_us` ticks): no rounding anywhere in a decision. The state is the TAT
// as whole microseconds plus a tick remainder. A TAT at or before now is an
// empty bucket, so a clock that steps backwards only makes the bucket look
// fuller: it never mints.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/algorithms/algorithm.h"

namespace rlimit::core::algorithms::detail {

struct Rate {
  std::int64_t limit;      // units per period, >= 1 (ticks per microsecond)
  std::int64_t period_us;  // >= 1 (ticks per unit)
};

// nullptr when a rate and a capacity in units are usable, else why not.
inline const char* validate_schedule(std::int64_t limit, std::int64_t period_us,
                                     std::int64_t capacity) {
  if (limit < 1) return "limit must be at least 1";
  if (limit > kMaxCost) return "limit too large (at most 2^50)";
  if (period_us < 1) return "period must be positive";
  if (period_us > kMaxPeriod) return "period too long (at most 100 years)";
  if (capacity < 0) return "capacity must not be negative";
  if (capacity > kMaxCost) return "capacity too large (at most 2^50)";
  if (static_cast<i128>(capacity) * period_us / limit > kMaxToleranceUs) {
    return "capacity * period / limit too long (at most 2^60 us)";
  }
  return nullptr;
}

// One request judged against a schedule, all in ticks.
struct Judgement {
  i128 now;      // now, in ticks
  i128 tat;      // the TAT, or now if that is later (an empty bucket)
  i128 new_tat;  // the TAT after admitting the request
  i128 size;     // capacity * T: how far ahead of now a TAT may be
  bool fits;     // new_tat - size <= now
};

inline Judgement judge(TimeUs tat_us, std::int64_t tat_frac, Rate rate, std::int64_t capacity,
                       std::int64_t cost, TimeUs now) {
  Judgement j;
  j.now = static_cast<i128>(now) * rate.limit;
  j.tat = std::max(to_ticks(tat_us, tat_frac, rate.limit), j.now);
  j.new_tat = j.tat + static_cast<i128>(cost) * rate.period_us;
  j.size = static_cast<i128>(capacity) * rate.period_us;
  j.fits = j.new_tat - j.size <= j.now;
  return j;
}

// remaining and reset_after as redis-cell computes them: ttl is how far the
// TAT (after the request when admitted) is ahead of now; remaining is how many
// whole units still fit in the bucket.
inline void describe(const Judgement& j, bool admitted, Rate rate, Verdict& v) {
  const i128 ttl = (admitted ? j.new_tat : j.tat) - j.now;
  const i128 room = j.size - ttl;
  v.remaining = room > 0 ? non_negative(floor_div(room, rate.period_us)) : 0;
  v.reset_after_us = non_negative(ceil_div(ttl, rate.limit));
}

// Moves the TAT forward by `cost` units from max(TAT, now), unconditionally,
// stopping kMaxAheadUs ahead of now.
inline void advance(TimeUs& tat_us, std::int64_t& tat_frac, Rate rate, std::int64_t cost,
                    TimeUs now) {
  const i128 now_ticks = static_cast<i128>(now) * rate.limit;
  const i128 from = std::max(to_ticks(tat_us, tat_frac, rate.limit), now_ticks);
  const i128 ceiling = now_ticks + static_cast<i128>(kMaxAheadUs) * rate.limit;
  const Split next =
      from_ticks(std::min(from + static_cast<i128>(cost) * rate.period_us, std::max(ceiling, from)),
                 rate.limit);
  tat_us = next.us;
  tat_frac = next.frac;
}

inline bool drained(TimeUs tat_us, std::int64_t tat_frac, Rate rate, TimeUs now) {
  return to_ticks(tat_us, tat_frac, rate.limit) <= static_cast<i128>(now) * rate.limit;
}

}  // namespace rlimit::core::algorithms::detail
