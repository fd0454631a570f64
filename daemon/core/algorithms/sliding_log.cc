#include "core/algorithms/sliding_log.h"

#include <algorithm>
#include <cassert>
#include <iterator>
#include <limits>

namespace rlimit::core::algorithms {
namespace {

using detail::i128;
using Log = std::span<const SlidingLog::Entry>;

constexpr std::int64_t kMaxUnits = std::int64_t{1} << 62;
constexpr TimeUs kNever = std::numeric_limits<TimeUs>::max();

// The first entry still in the window at `now`: at_us > now - period.
Log::iterator first_live(Log log, const SlidingLog::Params& params, TimeUs now) {
  const TimeUs horizon = now - params.period_us;
  return std::upper_bound(log.begin(), log.end(), horizon,
                          [](TimeUs h, const SlidingLog::Entry& e) { return h < e.at_us; });
}

// Units from `live` on: the total minus the expired prefix (usually the few
// entries that expired since the last commit).
std::int64_t units_from(const SlidingLog::State& state, Log log, Log::iterator live) {
  std::int64_t units = state.total;
  for (auto it = log.begin(); it != live; ++it) units -= it->units;
  return units;
}

// Merges the neighbouring pair whose merge over-counts least: entry i moves
// onto entry i + 1's (later) timestamp.
void coalesce_once(SlidingLog::State& state) {
  std::vector<SlidingLog::Entry>& b = state.buffer;
  assert(b.size() >= state.head + 2);
  std::size_t best = state.head;
  i128 best_cost = -1;
  for (std::size_t i = state.head; i + 1 < b.size(); ++i) {
    const i128 cost = static_cast<i128>(b[i].units) * (b[i + 1].at_us - b[i].at_us);
    if (best_cost < 0 || cost < best_cost) {
      best = i;
      best_cost = cost;
    }
  }
  b[best + 1].units += b[best].units;  // the total bounds the sum
  b.erase(b.begin() + static_cast<std::ptrdiff_t>(best));
}

// When a carried overshoot's holding begins: a period after the run began,
// when the run's first units leave the window; or at the run's start, for
// a carry the last run left.
TimeUs holding_from(const SlidingLog::State& state, const SlidingLog::Params& params) {
  return state.run_from_us + (state.holds_from_start ? 0 : params.period_us);
}

// A carried overshoot's units not yet held at `now`, the current period's
// included: what the periods since the holding began have not held.
std::int64_t carried_left(const SlidingLog::State& state, const SlidingLog::Params& params,
                          TimeUs now) {
  if (state.carried == 0 || now < holding_from(state, params)) return state.carried;
  const i128 periods = (now - holding_from(state, params)) / params.period_us;
  const i128 left = state.carried - periods * SlidingLog::held_per_period(params);
  return static_cast<std::int64_t>(std::max<i128>(0, left));
}

// When the carry is forgotten if no run holds it (kCarryWaitsPeriods).
TimeUs carry_forgotten_at(const SlidingLog::State& state, const SlidingLog::Params& params) {
  return state.run_from_us + SlidingLog::kCarryWaitsPeriods * params.period_us;
}

// The carry's units left at `now` as the next decision sees them: the
// holding's periods count while the run's entries are live (until the
// newest leaves: then it waits for the next run, note_run), and none once
// forgotten.
std::int64_t carry_waiting(const SlidingLog::State& state, const SlidingLog::Params& params,
                           TimeUs now) {
  if (state.carried == 0 || now >= carry_forgotten_at(state, params)) return 0;
  if (state.carry_waits) return state.carried;
  const Log log = SlidingLog::log(state);
  const TimeUs live_until = log.empty() ? now : log.back().at_us + params.period_us;
  return carried_left(state, params, std::min(now, live_until));
}

// The end of the period holding a carried overshoot at `now` (>= holding_from).
TimeUs holding_period_end(const SlidingLog::State& state, const SlidingLog::Params& params,
                          TimeUs now) {
  const TimeUs periods = (now - holding_from(state, params)) / params.period_us;
  return holding_from(state, params) + (periods + 1) * params.period_us;
}

// Units are about to be logged at `at`, the entries that left the window by
// then dropped (and a run they ended settled, expire): into an empty window
// (`window_empty`) they begin a run, which holds from its start what the
// last run left waiting; before the run's first units, they begin it
// earlier. Reads and writes only the run's and the carry's fields.
void note_run(SlidingLog::State& state, const SlidingLog::Params& params, TimeUs at,
              bool window_empty) {
  if (!window_empty) {
    state.run_from_us = std::min(state.run_from_us, at);
    return;
  }
  const bool inherits = state.carry_waits && at < carry_forgotten_at(state, params);
  if (!inherits) state.carried = 0;
  state.holds_from_start = inherits ? 1 : 0;
  state.carry_waits = 0;
  state.run_from_us = at;
}

// A run whose entries all left, with `left` of its carry not held by then:
// that waits for the next run (note_run), no longer counted down.
void settle_run(SlidingLog::State& state, std::int64_t left) {
  state.carried = static_cast<std::int32_t>(left);
  state.carry_waits = 1;
}

// Drops entries that left the window at `now`; compacts once the dropped
// prefix is as long as the log. A run whose entries all left settles its
// carry: what its live periods did not hold waits for the next run (a
// run's holding periods count while its entries are live).
void expire(SlidingLog::State& state, const SlidingLog::Params& params, TimeUs now) {
  const Log log = SlidingLog::log(state);
  const auto live = first_live(log, params, now);
  if (live == log.end() && !log.empty() && state.carried > 0 && !state.carry_waits) {
    settle_run(state, carried_left(state, params, log.back().at_us + params.period_us));
  }
  for (auto it = log.begin(); it != live; ++it) state.total -= it->units;
  state.head += static_cast<std::uint32_t>(live - log.begin());
  if (state.head > 0 && std::size_t{state.head} * 2 >= state.buffer.size()) {
    state.buffer.erase(state.buffer.begin(), state.buffer.begin() + state.head);
    state.head = 0;
  }
}

// Logs `units` at `at` in its place (an entry of the same microsecond takes
// them), then coalesces down to the bound.
void insert_units(SlidingLog::State& state, const SlidingLog::Params& params, std::int64_t units,
                  TimeUs at) {
  units = std::min(units, kMaxUnits - state.total);  // only absurd debts reach this
  if (units <= 0) return;
  state.total += units;
  std::vector<SlidingLog::Entry>& b = state.buffer;
  const auto first = b.begin() + state.head;
  // Usually the newest entry: no search.
  const auto it = first == b.end() || b.back().at_us < at
                      ? b.end()
                      : std::upper_bound(first, b.end(), at, [](TimeUs t, const SlidingLog::Entry& e) {
                          return t < e.at_us;
                        });
  if (it != first && std::prev(it)->at_us == at) {
    std::prev(it)->units += units;
    return;
  }
  b.insert(it, {at, units});
  while (static_cast<std::int64_t>(b.size() - state.head) > params.max_entries) {
    coalesce_once(state);
  }
}

}  // namespace

const char* SlidingLog::validate(const Params& params) {
  if (params.limit < 1) return "limit must be at least 1";
  if (params.limit > kMaxCost) return "limit too large (at most 2^50)";
  if (params.period_us < 1) return "period must be positive";
  if (params.period_us > kMaxPeriod) return "period too long (at most 100 years)";
  if (params.max_entries < 1) return "max_entries must be at least 1";
  if (params.max_entries > kMaxEntriesBound) return "max_entries too large (at most 65536)";
  return nullptr;
}

SlidingLog::State SlidingLog::fresh(const Params& params, TimeUs now) {
  assert(validate(params) == nullptr);
  return State{};
}

std::int64_t SlidingLog::units_in_window(const State& state, const Params& params, TimeUs now) {
  const Log entries = log(state);
  return units_from(state, entries, first_live(entries, params, now));
}

std::int64_t SlidingLog::held_units(const State& state, const Params& params, TimeUs now) {
  // Held from the carry on: in the run's first period no entry leaves, and
  // the window is over the limit anyway, so holding there costs nothing,
  // and a hold that only falls keeps time from ever hurting.
  if (state.carried == 0) return 0;
  return std::min(carry_waiting(state, params, now), held_per_period(params));
}

namespace {

// evaluate(), with a carried overshoot held (kHolding) or none (the common
// case, kept as lean as before the hold).
template <bool kHolding>
Verdict evaluate_log(const SlidingLog::State& state, const SlidingLog::Params& params,
                     std::int64_t cost, TimeUs now) {
  assert(cost >= 0 && cost <= kMaxCost);
  assert(kHolding == (state.carried > 0));
  const Log entries = SlidingLog::log(state);
  const auto live = first_live(entries, params, now);
  const std::int64_t held = kHolding ? SlidingLog::held_units(state, params, now) : 0;
  const i128 in_window = units_from(state, entries, live) + held;
  const i128 wanted = in_window + cost;

  Verdict v;
  v.limit = params.limit;
  v.allowed = wanted <= params.limit;
  v.remaining = detail::non_negative(params.limit - (v.allowed ? wanted : in_window));
  TimeUs newest = live == entries.end() ? now - params.period_us : entries.back().at_us;
  if (v.allowed && cost > 0) newest = std::max(newest, now);
  i128 reset_at = static_cast<i128>(newest) + params.period_us;
  if constexpr (kHolding) {
    // A carry its run's live periods do not hold in full waits, and is
    // forgotten kCarryWaitsPeriods after the run began (is_idle): the state
    // as a commit here leaves it (note_run, expire).
    const std::int64_t waiting = carry_waiting(state, params, now);
    if (waiting > 0) {
      const bool commits = v.allowed && cost > 0;
      SlidingLog::State after;  // the run's and the carry's fields only
      after.carried = state.carried;
      after.holds_from_start = state.holds_from_start;
      after.carry_waits = state.carry_waits;
      after.run_from_us = state.run_from_us;
      if (commits) {
        const bool new_run = live == entries.end();
        if (new_run) settle_run(after, waiting);  // as expire settles it
        note_run(after, params, now, new_run);
      }
      // When the run's newest entry leaves (this commit's, if it commits).
      TimeUs newest_entry = entries.empty() ? now : entries.back().at_us;
      if (commits) newest_entry = std::max(newest_entry, now);
      const TimeUs live_until = newest_entry + params.period_us;
      const bool waits = after.carry_waits || carried_left(after, params, live_until) > 0;
      // (Held in full while the entries are live: idle when they have left.)
      if (waits) {
        reset_at = std::max(reset_at, static_cast<i128>(carry_forgotten_at(after, params)));
      }
    }
  }
  v.reset_after_us = detail::non_negative(reset_at - now);
  if (!v.allowed) {
    v.excess = detail::non_negative(wanted - params.limit);
    if (cost > params.limit) {
      v.retry_after_us = -1;
    } else if constexpr (!kHolding) {
      // Expire the oldest entries until the cost fits.
      i128 left = in_window;
      auto it = live;
      while (left + cost > params.limit) {
        assert(it != entries.end());
        left -= it->units;
        ++it;
      }
      v.retry_after_us =
          detail::non_negative(static_cast<i128>((it - 1)->at_us) + params.period_us - now);
    } else {
      // The first time the cost fits: as the oldest entries leave, a
      // period of the carried overshoot's holding ends (at most seven: a
      // limit held a quarter of it, rounded down, a period), or the carry
      // is forgotten.
      i128 left = in_window - held;
      auto it = live;
      TimeUs at = now;
      while (left + SlidingLog::held_units(state, params, at) + cost > params.limit) {
        const TimeUs leaves = it != entries.end() ? it->at_us + params.period_us : kNever;
        // The held units fall at the end of a holding period while the
        // run's entries are live, and to none when the carry is forgotten.
        TimeUs holding_ends =
            carry_forgotten_at(state, params) > at ? carry_forgotten_at(state, params) : kNever;
        if (it != entries.end() && carried_left(state, params, at) > 0) {
          holding_ends = std::min(holding_ends, at < holding_from(state, params)
                                                    ? holding_from(state, params)
                                                    : holding_period_end(state, params, at));
        }
        assert(leaves != kNever || holding_ends != kNever);
        at = std::min(leaves, holding_ends);
        if (leaves == at) {
          left -= it->units;
          ++it;
        }
      }
      v.retry_after_us = detail::non_negative(static_cast<i128>(at) - now);
    }
  }
  return v;
}

}  // namespace

Verdict SlidingLog::evaluate(const State& state, const Params& params, std::int64_t cost,
                             TimeUs now) {
  return state.carried > 0 ? evaluate_log<true>(state, params, cost, now)
                           : evaluate_log<false>(state, params, cost, now);
}

Ticket SlidingLog::commit(State& state, const Params& params, std::int64_t cost, TimeUs now) {
  assert(cost >= 0 && cost <= kMaxCost);
  expire(state, params, now);
  if (cost > 0) note_run(state, params, now, log(state).empty());
  // Stamped no earlier than the newest entry: a clock that went back takes
  // the newest time, so the log stays sorted and conservative.
  const Log entries = log(state);
  insert_units(state, params, cost, entries.empty() ? now : std::max(now, entries.back().at_us));
  return kNoTicket;
}

void SlidingLog::charge_remote(State& state, const Params& params, std::int64_t amount,
                               TimeUs at) {
  charge_remote(state, params, amount, at, at);
}

void SlidingLog::charge_remote(State& state, const Params& params, std::int64_t amount, TimeUs at,
                               TimeUs now) {
  assert(at <= now);
  // In its place, before newer entries if the news came late (an entry
  // already out of the window at `at` is dropped at the next expiry).
  expire(state, params, at);
  if (amount <= 0) return;
  // News already out of the window at `now` begins no run and overshoots
  // nothing (it is dropped at the next expiry).
  if (at > now - params.period_us) note_run(state, params, at, log(state).empty());
  if (at > now - params.period_us && at < state.run_from_us + params.period_us) {
    // In the run's first period: what overshoots the window at `now` is
    // carried. Later in a run it is not: older entries leaving the window
    // while it is over the limit free no room, which repays it where they
    // leave soon after (a saturated window), though not a later burst's
    // (docs/cluster.md, "A log's overshoot, carried": the open question).
    const i128 in_window = units_in_window(state, params, now);
    const i128 over = std::max<i128>(0, in_window + amount - params.limit) -
                      std::max<i128>(0, in_window - params.limit);
    state.carried = static_cast<std::int32_t>(
        std::min<i128>({state.carried + over, params.limit, kMaxCarried}));
  }
  insert_units(state, params, amount, at);
}

bool SlidingLog::is_idle(const State& state, const Params& params, TimeUs now) {
  const Log entries = log(state);
  // A carry waits for the next run (note_run) up to kCarryWaitsPeriods.
  return first_live(entries, params, now) == entries.end() &&
         carry_waiting(state, params, now) == 0;
}

}  // namespace rlimit::core::algorithms
