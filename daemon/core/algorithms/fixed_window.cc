#include "core/algorithms/fixed_window.h"

#include <algorithm>
#include <cassert>

namespace rlimit::core::algorithms {
namespace {

using detail::i128;

// Counts stop here: far above any limit, far below overflow.
constexpr std::int64_t kMaxCount = std::int64_t{1} << 62;

std::int64_t window_of(TimeUs now, std::int64_t period_us) {
  return static_cast<std::int64_t>(detail::floor_div(now, period_us));
}

// Time from now to the start of window `window + windows`.
std::int64_t until_window(std::int64_t window, i128 windows, const FixedWindow::Params& params,
                          TimeUs now) {
  return detail::non_negative((static_cast<i128>(window) + windows) * params.period_us - now);
}

}  // namespace

const char* FixedWindow::validate(const Params& params) {
  if (params.limit < 1) return "limit must be at least 1";
  if (params.limit > kMaxCost) return "limit too large (at most 2^50)";
  if (params.period_us < 1) return "period must be positive";
  if (params.period_us > kMaxPeriod) return "period too long (at most 100 years)";
  return nullptr;
}

FixedWindow::State FixedWindow::fresh(const Params& params, TimeUs now) {
  assert(validate(params) == nullptr);
  return State{window_of(now, params.period_us), 0};
}

FixedWindow::State FixedWindow::at(const State& state, const Params& params, TimeUs now) {
  const std::int64_t window = window_of(now, params.period_us);
  // An empty count holds nothing to protect: follow the clock even back.
  if (state.count == 0) return State{window, 0};
  if (window <= state.window) return state;  // same window, or the clock went back
  const i128 repaid = static_cast<i128>(window - state.window) * params.limit;
  return State{window, static_cast<std::int64_t>(std::max<i128>(0, state.count - repaid))};
}

Verdict FixedWindow::evaluate(const State& state, const Params& params, std::int64_t cost,
                              TimeUs now) {
  assert(cost >= 0 && cost <= kMaxCost);
  const State s = at(state, params, now);
  const i128 after = static_cast<i128>(s.count) + cost;
  Verdict v;
  v.limit = params.limit;
  v.allowed = after <= params.limit;
  const i128 held = v.allowed ? after : s.count;
  v.remaining = detail::non_negative(params.limit - held);
  // The count drops by `limit` at every edge.
  v.reset_after_us =
      held == 0 ? 0 : until_window(s.window, detail::ceil_div(held, params.limit), params, now);
  if (!v.allowed) {
    v.excess = detail::non_negative(after - params.limit);
    v.retry_after_us =
        cost > params.limit
            ? -1
            : until_window(s.window, detail::ceil_div(after - params.limit, params.limit), params,
                           now);
  }
  return v;
}

Ticket FixedWindow::commit(State& state, const Params& params, std::int64_t cost, TimeUs now) {
  assert(cost >= 0 && cost <= kMaxCost);
  state = at(state, params, now);
  state.count = std::min(state.count + cost, kMaxCount);
  return kNoTicket;
}

void FixedWindow::charge_remote(State& state, const Params& params, std::int64_t amount,
                                TimeUs now) {
  commit(state, params, amount, now);
}

bool FixedWindow::is_idle(const State& state, const Params& params, TimeUs now) {
  return at(state, params, now).count == 0;
}

}  // namespace rlimit::core::algorithms
