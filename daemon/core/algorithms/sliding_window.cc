#include "core/algorithms/sliding_window.h"

#include <algorithm>
#include <cassert>
#include <optional>

namespace rlimit::core::algorithms {
namespace {

using detail::carry_steps_of;
using detail::carry_units;
using detail::i128;
using detail::Round;

constexpr std::int64_t kMaxCount = std::int64_t{1} << 62;

std::int64_t window_of(TimeUs now, std::int64_t period_us) {
  return static_cast<std::int64_t>(detail::floor_div(now, period_us));
}

// What the first edge carries of a window that counted `current` with
// `overshoot` (units; < 0 a credit) noted: the count above the limit, or the
// overshoot (at most the count: what the window admitted), or minus the
// credit as far as the count stays within the limit.
i128 carried_at_edge(i128 current, i128 overshoot, std::int64_t limit) {
  if (current > limit) return current - limit;
  if (overshoot < 0) return -std::min<i128>(-overshoot, limit - current);
  return std::max<i128>(0, std::min(overshoot, current));
}

// Rolls (previous, current) forward by `windows` >= 1 edges: each edge moves
// current into previous, at most `limit` of it, and carries the rest; the
// first edge carries what carried_at_edge says (a credit: a negative count
// in the next window, and as much more in the previous one).
void roll(i128& previous, i128& current, i128 windows, std::int64_t limit, i128 overshoot = 0) {
  const i128 carried = carried_at_edge(current, overshoot, limit);
  if (carried != 0) {
    previous = std::max<i128>(0, current - carried);
    current = carried;
    if (--windows == 0) return;
  }
  previous = std::min<i128>(limit, std::max<i128>(0, current - (windows - 1) * limit));
  current = std::max<i128>(0, current - windows * limit);
}

// Consumption of `amount` counted in the window: it clears an overshoot
// (demand went on, and the window's own refusals repay it: see commit) and
// uses up as much of a credit (it took that room).
void consumed_after_note(SlidingWindow::State& state, std::int64_t limit, std::int64_t amount) {
  if (state.carry_steps >= 0) {
    state.carry_steps = 0;
    return;
  }
  state.carry_steps = -detail::credit_steps_left(-state.carry_steps, limit, amount);
}

// The estimate scaled by P at `offset` (0..P) into the state's window:
// previous * (P - offset) + current * P.
i128 scaled_estimate(const SlidingWindow::State& s, i128 offset, i128 period) {
  return static_cast<i128>(s.previous) * (period - offset) + static_cast<i128>(s.current) * period;
}

// The estimate's excess over the limit at `now` (scaled by P; < 0: room),
// for a state rolled to now's window; none when the clock is behind it.
std::optional<i128> scaled_excess(const SlidingWindow::State& s,
                                  const SlidingWindow::Params& params, TimeUs now) {
  const i128 period = params.period_us;
  const i128 raw_offset = now - static_cast<i128>(s.window) * period;
  if (raw_offset < 0) return std::nullopt;
  return scaled_estimate(s, std::min<i128>(raw_offset, period), period) -
         static_cast<i128>(params.limit) * period;
}

// A scaled excess (>= 0) in units, to the nearest one, at most the limit.
std::int64_t excess_units(i128 scaled, const SlidingWindow::Params& params) {
  const i128 period = params.period_us;
  return static_cast<std::int64_t>(
      std::min<i128>(params.limit, (2 * scaled + period) / (2 * period)));
}

SlidingWindow::State make_state(std::int64_t window, i128 previous, i128 current) {
  SlidingWindow::State s;
  s.window = window;
  s.previous = static_cast<std::int64_t>(previous);
  s.current = static_cast<std::int64_t>(current);
  return s;
}

// The first time at or after `window`'s start + `from` (an offset into it)
// when a request of `cost` <= limit fits; `overshoot` (units) is the
// window's, for its edge.
i128 earliest_fit(i128 previous, i128 current, i128 overshoot, i128 window, i128 from,
                  std::int64_t cost, const SlidingWindow::Params& params) {
  const std::int64_t limit = params.limit;
  const i128 period = params.period_us;
  if (current + cost > limit) {
    // Skip the windows whose current count alone leaves no room.
    const i128 skip = detail::ceil_div(current + cost - limit, limit);
    roll(previous, current, skip, limit, overshoot);
    overshoot = 0;
    window += skip;
    from = 0;
  }
  for (int i = 0; i < 4; ++i) {
    if (current + cost <= limit) {
      // previous * (P - e) <= (limit - current - cost) * P
      const i128 room = (limit - current - cost) * period;
      const i128 first = previous == 0 ? 0 : period - detail::floor_div(room, previous);
      const i128 offset = std::max(first, from);
      if (offset < period) return window * period + offset;
    }
    roll(previous, current, 1, limit, overshoot);
    overshoot = 0;
    ++window;
    from = 0;
  }
  assert(false && "a cost <= limit fits within three windows after the skip");
  return window * period;
}

}  // namespace

const char* SlidingWindow::validate(const Params& params) {
  if (params.limit < 1) return "limit must be at least 1";
  if (params.limit > kMaxCost) return "limit too large (at most 2^50)";
  if (params.period_us < 1) return "period must be positive";
  if (params.period_us > kMaxPeriod) return "period too long (at most 100 years)";
  return nullptr;
}

SlidingWindow::State SlidingWindow::fresh(const Params& params, TimeUs now) {
  assert(validate(params) == nullptr);
  return make_state(window_of(now, params.period_us), 0, 0);
}

SlidingWindow::State SlidingWindow::at(const State& state, const Params& params, TimeUs now) {
  const std::int64_t window = window_of(now, params.period_us);
  // Empty counts hold nothing to protect: follow the clock even back.
  if (state.previous == 0 && state.current == 0) return make_state(window, 0, 0);
  if (window <= state.window) return state;
  i128 previous = state.previous;
  i128 current = state.current;
  roll(previous, current, static_cast<i128>(window) - state.window, params.limit,
       carry_units(state.carry_steps, params.limit));
  return make_state(window, previous, current);
}

Verdict SlidingWindow::evaluate(const State& state, const Params& params, std::int64_t cost,
                                TimeUs now) {
  assert(cost >= 0 && cost <= kMaxCost);
  const State s = at(state, params, now);
  const i128 period = params.period_us;
  const i128 start = static_cast<i128>(s.window) * period;
  const i128 offset = std::max<i128>(0, now - start);  // 0 when the clock is behind the window
  // Everything scaled by P.
  const i128 estimate = scaled_estimate(s, offset, period);
  const i128 capacity = static_cast<i128>(params.limit) * period;
  const i128 wanted = estimate + cost * period;

  Verdict v;
  v.limit = params.limit;
  v.allowed = wanted <= capacity;
  const i128 held = v.allowed ? wanted : estimate;
  // At most the limit: a credit (a negative count) can leave more room.
  v.remaining = std::min<std::int64_t>(
      params.limit, detail::non_negative(detail::floor_div(capacity - held, period)));
  const i128 current = static_cast<i128>(s.current) + (v.allowed ? cost : 0);
  // What the window's edge carries (an admission clears the overshoot:
  // commit): then it takes as many windows more to leave as a count of its
  // size.
  const i128 overshoot = carry_units(s.carry_steps, params.limit);
  const i128 carried = carried_at_edge(current, v.allowed && cost > 0 ? 0 : overshoot, params.limit);
  if (current == 0) {
    v.reset_after_us = s.previous == 0 ? 0 : detail::non_negative(start + period - now);
  } else {
    const i128 windows = carried > 0 ? detail::ceil_div(carried, params.limit) + 2
                                     : detail::ceil_div(current, params.limit) + 1;
    v.reset_after_us = detail::non_negative(start + windows * period - now);
  }
  if (!v.allowed) {
    v.excess = detail::non_negative(detail::ceil_div(wanted - capacity, period));
    v.retry_after_us =
        cost > params.limit
            ? -1
            : detail::non_negative(
                  earliest_fit(s.previous, s.current, overshoot, s.window, offset, cost, params) -
                  now);
  }
  return v;
}

Ticket SlidingWindow::commit(State& state, const Params& params, std::int64_t cost, TimeUs now) {
  assert(cost >= 0 && cost <= kMaxCost);
  state = at(state, params, now);
  state.current = std::min(state.current + cost, kMaxCount);
  // Admitted after an overshoot was noted: demand went on pressing, and the
  // estimate, which holds the excess, held it back since; the window's own
  // refusals repay it (carrying it too would charge it twice: a steady
  // Poisson load admitted 2.6% under one limiter).
  if (cost > 0) consumed_after_note(state, params.limit, cost);
  return kNoTicket;
}

void SlidingWindow::charge_remote(State& state, const Params& params, std::int64_t amount,
                                  TimeUs now) {
  assert(amount >= 0 && amount <= kMaxCost);
  state = at(state, params, now);
  state.current = std::min(state.current + amount, kMaxCount);
  // The estimate's excess over the limit now.
  const std::optional<i128> excess = scaled_excess(state, params, now);
  if (!excess) return;  // news from an earlier window, counted in this one
  if (*excess <= 0) {
    if (amount > 0) consumed_after_note(state, params.limit, amount);
    return;
  }
  const std::int64_t steps =
      carry_steps_of(excess_units(*excess, params), params.limit, Round::kUp);
  if (steps > state.carry_steps) state.carry_steps = steps;
}

void SlidingWindow::note_share_refusal(State& state, const Params& params, TimeUs now) {
  state = at(state, params, now);
  const std::optional<i128> excess = scaled_excess(state, params, now);
  if (!excess) return;  // the clock is behind the state's window
  const std::int64_t units = static_cast<std::int64_t>(
      std::min<i128>(params.limit, detail::floor_div(-*excess, params.period_us)));
  if (units > 0) state.carry_steps = -carry_steps_of(units, params.limit, Round::kDown);
}

void SlidingWindow::note_refusal(State& state, const Params& params, TimeUs now) {
  if (state.carry_steps <= 0) return;  // no overshoot (the common case: no write)
  state = at(state, params, now);
  if (state.carry_steps <= 0) return;  // it was the last window's
  const std::optional<i128> excess = scaled_excess(state, params, now);
  if (!excess) return;
  const std::int64_t steps =
      carry_steps_of(excess_units(std::max<i128>(0, *excess), params), params.limit, Round::kUp);
  if (steps < state.carry_steps) state.carry_steps = steps;
}

bool SlidingWindow::is_idle(const State& state, const Params& params, TimeUs now) {
  const State s = at(state, params, now);
  return s.previous == 0 && s.current == 0;
}

}  // namespace rlimit::core::algorithms
