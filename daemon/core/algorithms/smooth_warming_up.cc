#include "core/algorithms/smooth_warming_up.h"

#include <cassert>

namespace rlimit::core::algorithms {

using detail::i128;

namespace {
constexpr i128 kMaxUnits = i128{1} << 62;
}  // namespace

const char* SmoothWarmingUp::validate(const Params& params) {
  if (params.permits < 1) return "permits must be at least 1";
  if (params.permits > kMaxCost) return "permits too large (at most 2^50)";
  if (params.period_us < 1) return "period must be positive";
  if (params.period_us > kMaxPeriod) return "period too long (at most 100 years)";
  if (params.warmup_us < 0) return "warmup must not be negative";
  if (params.warmup_us > kMaxToleranceUs) return "warmup too long (at most 2^60 us)";
  if (params.cold_factor < 1) return "cold_factor must be at least 1";
  if (params.cold_factor > kMaxColdFactor) return "cold_factor too large (at most 100)";
  if (static_cast<i128>(params.warmup_us) * params.permits * (params.cold_factor + 5) > kMaxUnits) {
    return "warmup * permits * (cold_factor + 5) too large (at most 2^62)";
  }
  if (params.max_wait_us < -1) return "max_wait must be -1 (none) or >= 0";
  if (params.max_wait_us > kMaxToleranceUs) return "max_wait too long (at most 2^60 us)";
  return nullptr;
}

detail::SmoothShape SmoothWarmingUp::shape(const Params& params) {
  // With W = warmup, L = permits, P = period and c = cold_factor, count a
  // permit as 2P(1 + c) units and a microsecond as 2L(1 + c) ticks: a fresh
  // unit costs one tick, threshold = WL(1 + c) units, max = WL(c + 5) units,
  // idleness stores L(c + 5) units per microsecond (max over W), and the ramp
  // from threshold to max spans 4WL units.
  const i128 w = params.warmup_us;
  const i128 l = params.permits;
  const i128 c = params.cold_factor;
  detail::SmoothShape s;
  s.unit = 2 * static_cast<i128>(params.period_us) * (1 + c);
  s.tick = 2 * l * (1 + c);
  s.accrual = l * (c + 5);
  s.max_units = w * l * (c + 5);
  s.threshold = w * l * (1 + c);
  s.slope_num = c - 1;
  s.slope_den = w == 0 ? 1 : 8 * w * l;
  s.stored_free = false;
  s.max_wait_us = params.max_wait_us;
  return s;
}

SmoothWarmingUp::State SmoothWarmingUp::fresh(const Params& params, TimeUs now) {
  assert(validate(params) == nullptr);
  return State{static_cast<std::int64_t>(shape(params).max_units), now, 0};
}

Verdict SmoothWarmingUp::evaluate(const State& state, const Params& params, std::int64_t cost,
                                  TimeUs now) {
  return detail::smooth_evaluate(state, shape(params), cost, now);
}

Ticket SmoothWarmingUp::commit(State& state, const Params& params, std::int64_t cost, TimeUs now) {
  detail::smooth_commit(state, shape(params), cost, now);
  return kNoTicket;
}

void SmoothWarmingUp::charge_remote(State& state, const Params& params, std::int64_t amount,
                                    TimeUs now) {
  detail::smooth_commit(state, shape(params), amount, now);
}

bool SmoothWarmingUp::is_idle(const State& state, const Params& params, TimeUs now) {
  return detail::smooth_idle(state, shape(params), now);
}

}  // namespace rlimit::core::algorithms
