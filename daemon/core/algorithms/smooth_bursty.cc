#include "core/algorithms/smooth_bursty.h"

#include <cassert>

namespace rlimit::core::algorithms {

using detail::i128;

namespace {
constexpr i128 kMaxUnits = i128{1} << 62;
}  // namespace

const char* SmoothBursty::validate(const Params& params) {
  if (params.permits < 1) return "permits must be at least 1";
  if (params.permits > kMaxCost) return "permits too large (at most 2^50)";
  if (params.period_us < 1) return "period must be positive";
  if (params.period_us > kMaxPeriod) return "period too long (at most 100 years)";
  if (params.max_burst_us < 0) return "max_burst must not be negative";
  if (params.max_burst_us > kMaxToleranceUs) return "max_burst too long (at most 2^60 us)";
  if (static_cast<i128>(params.max_burst_us) * params.permits > kMaxUnits) {
    return "max_burst * permits too large (at most 2^62)";
  }
  if (params.max_wait_us < -1) return "max_wait must be -1 (none) or >= 0";
  if (params.max_wait_us > kMaxToleranceUs) return "max_wait too long (at most 2^60 us)";
  return nullptr;
}

detail::SmoothShape SmoothBursty::shape(const Params& params) {
  // A permit is period_us units and a tick 1/permits us: a fresh unit costs
  // one tick (period_us / permits us per permit) and a tick of idleness stores
  // one unit (permits / period_us permits per us).
  detail::SmoothShape s;
  s.unit = params.period_us;
  s.tick = params.permits;
  s.accrual = params.permits;
  s.max_units = static_cast<i128>(params.max_burst_us) * params.permits;
  s.stored_free = true;
  s.max_wait_us = params.max_wait_us;
  return s;
}

SmoothBursty::State SmoothBursty::fresh(const Params& params, TimeUs now) {
  assert(validate(params) == nullptr);
  if (params.start_empty) return empty(params, now);
  return State{static_cast<std::int64_t>(shape(params).max_units), now, 0};
}

SmoothBursty::State SmoothBursty::empty(const Params& params, TimeUs now) {
  assert(validate(params) == nullptr);
  return State{0, now, 0};
}

Verdict SmoothBursty::evaluate(const State& state, const Params& params, std::int64_t cost,
                               TimeUs now) {
  return detail::smooth_evaluate(state, shape(params), cost, now);
}

Ticket SmoothBursty::commit(State& state, const Params& params, std::int64_t cost, TimeUs now) {
  detail::smooth_commit(state, shape(params), cost, now);
  return kNoTicket;
}

void SmoothBursty::charge_remote(State& state, const Params& params, std::int64_t amount,
                                 TimeUs now) {
  detail::smooth_commit(state, shape(params), amount, now);
}

bool SmoothBursty::is_idle(const State& state, const Params& params, TimeUs now) {
  return detail::smooth_idle(state, shape(params), now);
}

}  // namespace rlimit::core::algorithms
