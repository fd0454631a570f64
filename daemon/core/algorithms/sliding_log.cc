#include "core/algorithms/sliding_log.h"

#include <algorithm>
#include <cassert>
#include <iterator>

namespace rlimit::core::algorithms {
namespace {

using detail::i128;
using Log = std::span<const SlidingLog::Entry>;

constexpr std::int64_t kMaxUnits = std::int64_t{1} << 62;

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

// Drops entries that left the window at `now`; compacts once the dropped
// prefix is as long as the log.
void expire(SlidingLog::State& state, const SlidingLog::Params& params, TimeUs now) {
  const Log log = SlidingLog::log(state);
  const auto live = first_live(log, params, now);
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

Verdict SlidingLog::evaluate(const State& state, const Params& params, std::int64_t cost,
                             TimeUs now) {
  assert(cost >= 0 && cost <= kMaxCost);
  const Log entries = log(state);
  const auto live = first_live(entries, params, now);
  const i128 in_window = units_from(state, entries, live);
  const i128 wanted = in_window + cost;

  Verdict v;
  v.limit = params.limit;
  v.allowed = wanted <= params.limit;
  v.remaining = detail::non_negative(params.limit - (v.allowed ? wanted : in_window));
  TimeUs newest = live == entries.end() ? now - params.period_us : entries.back().at_us;
  if (v.allowed && cost > 0) newest = std::max(newest, now);
  v.reset_after_us = detail::non_negative(static_cast<i128>(newest) + params.period_us - now);
  if (!v.allowed) {
    v.excess = detail::non_negative(wanted - params.limit);
    if (cost > params.limit) {
      v.retry_after_us = -1;
    } else {
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
    }
  }
  return v;
}

Ticket SlidingLog::commit(State& state, const Params& params, std::int64_t cost, TimeUs now) {
  assert(cost >= 0 && cost <= kMaxCost);
  expire(state, params, now);
  // Stamped no earlier than the newest entry: a clock that went back takes
  // the newest time, so the log stays sorted and conservative.
  const Log entries = log(state);
  insert_units(state, params, cost, entries.empty() ? now : std::max(now, entries.back().at_us));
  return kNoTicket;
}

void SlidingLog::charge_remote(State& state, const Params& params, std::int64_t amount,
                               TimeUs at) {
  // In its place, before newer entries if the news came late (an entry
  // already out of the window at `at` is dropped at the next expiry).
  expire(state, params, at);
  insert_units(state, params, amount, at);
}

bool SlidingLog::is_idle(const State& state, const Params& params, TimeUs now) {
  const Log entries = log(state);
  return first_live(entries, params, now) == entries.end();
}

}  // namespace rlimit::core::algorithms
