#include "core/algorithms/leaky_bucket.h"

#include <algorithm>
#include <cassert>

#include "core/algorithms/virtual_schedule.h"

namespace rlimit::core::algorithms {
namespace {

detail::Rate rate_of(const LeakyBucket::Params& params) { return {params.limit, params.period_us}; }

}  // namespace

const char* LeakyBucket::validate(const Params& params) {
  if (params.mode != Mode::kMeter && params.mode != Mode::kShaper) return "unknown mode";
  if (params.max_delay_us < -1) return "max_delay must be -1 (none) or >= 0";
  if (params.max_delay_us > kMaxToleranceUs) return "max_delay too long (at most 2^60 us)";
  return detail::validate_schedule(params.limit, params.period_us, params.capacity);
}

LeakyBucket::State LeakyBucket::fresh(const Params& params, TimeUs now) {
  assert(validate(params) == nullptr);
  return State{now, 0};
}

Verdict LeakyBucket::evaluate(const State& state, const Params& params, std::int64_t cost,
                              TimeUs now) {
  assert(cost >= 0 && cost <= kMaxCost);
  const detail::Rate rate = rate_of(params);
  const detail::Judgement j =
      detail::judge(state.empty_at_us, state.empty_at_frac, rate, params.capacity, cost, now);
  // The water ahead of this request, as time to drain it.
  const detail::i128 ahead = j.tat - j.now;
  const bool shaper = params.mode == Mode::kShaper;
  const bool bounded = shaper && params.max_delay_us >= 0;
  const detail::i128 max_ahead = static_cast<detail::i128>(params.max_delay_us) * rate.limit;
  const bool in_time = !bounded || ahead <= max_ahead;

  Verdict v;
  v.allowed = j.fits && in_time;
  v.limit = params.capacity;
  detail::describe(j, v.allowed, rate, v);
  if (shaper) v.delay_us = detail::non_negative(detail::ceil_div(ahead, rate.limit));
  if (v.allowed) return v;
  // Ticks until both conditions hold: the TAT stays put while now advances.
  const detail::i128 overflow = j.new_tat - j.size - j.now;
  const detail::i128 overdue = bounded ? ahead - max_ahead : 0;
  const detail::i128 late = std::max(overflow, overdue);
  v.retry_after_us =
      cost > params.capacity ? -1 : detail::non_negative(detail::ceil_div(late, rate.limit));
  v.excess = detail::non_negative(detail::ceil_div(late, rate.period_us));
  return v;
}

Ticket LeakyBucket::commit(State& state, const Params& params, std::int64_t cost, TimeUs now) {
  assert(cost >= 0 && cost <= kMaxCost);
  detail::advance(state.empty_at_us, state.empty_at_frac, rate_of(params), cost, now);
  return kNoTicket;
}

void LeakyBucket::charge_remote(State& state, const Params& params, std::int64_t amount,
                                TimeUs now) {
  commit(state, params, amount, now);
}

bool LeakyBucket::is_idle(const State& state, const Params& params, TimeUs now) {
  return detail::drained(state.empty_at_us, state.empty_at_frac, rate_of(params), now);
}

}  // namespace rlimit::core::algorithms
