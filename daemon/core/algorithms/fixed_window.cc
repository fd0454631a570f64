#include "core/algorithms/fixed_window.h"

#include <algorithm>
#include <cassert>

namespace rlimit::core::algorithms {
namespace {

using detail::carry_steps_of;
using detail::carry_units;
using detail::i128;
using detail::Round;

// Counts stop here: far above any limit (2^50), within the 52-bit field.
constexpr std::int64_t kMaxCount = (std::int64_t{1} << 51) - 1;

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
  return State{.window = window_of(now, params.period_us)};
}

FixedWindow::State FixedWindow::at(const State& state, const Params& params, TimeUs now) {
  const std::int64_t window = window_of(now, params.period_us);
  // An empty count holds nothing to protect: follow the clock even back.
  if (state.count == 0 && state.credit_steps == 0) return State{.window = window};
  if (window <= state.window) return state;  // same window, or the clock went back
  const i128 repaid = static_cast<i128>(window - state.window) * params.limit;
  const auto count = static_cast<std::int64_t>(std::max<i128>(0, state.count - repaid));
  // A credit is given back in the next window only, as far as the count
  // left that room unused.
  const std::int64_t credit =
      window == state.window + 1
          ? std::clamp<std::int64_t>(params.limit - std::max<std::int64_t>(0, state.count), 0,
                                     carry_units(state.credit_steps, params.limit))
          : 0;
  return State{.window = window, .count = count - credit};
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
  v.remaining = detail::non_negative(std::min<i128>(params.limit, params.limit - held));
  // The count drops by `limit` at every edge.
  v.reset_after_us =
      held <= 0 ? 0 : until_window(s.window, detail::ceil_div(held, params.limit), params, now);
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
  state.count = std::min<std::int64_t>(state.count + cost, kMaxCount);
  // The room it took was the credit's.
  if (state.credit_steps > 0 && cost > 0) {
    state.credit_steps = detail::credit_steps_left(state.credit_steps, params.limit, cost);
  }
  return kNoTicket;
}

void FixedWindow::charge_remote(State& state, const Params& params, std::int64_t amount,
                                TimeUs now) {
  commit(state, params, amount, now);
}

bool FixedWindow::is_idle(const State& state, const Params& params, TimeUs now) {
  const State s = at(state, params, now);
  return s.count == 0 && s.credit_steps == 0;
}

void FixedWindow::note_share_refusal(State& state, const Params& params, TimeUs now) {
  state = at(state, params, now);
  if (window_of(now, params.period_us) != state.window) return;  // the clock is behind
  state.credit_steps = carry_steps_of(
      std::clamp<std::int64_t>(params.limit - state.count, 0, params.limit), params.limit,
      Round::kDown);
}

}  // namespace rlimit::core::algorithms
