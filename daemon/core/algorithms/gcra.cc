#include "core/algorithms/gcra.h"

#include <cassert>

#include "core/algorithms/virtual_schedule.h"

namespace rlimit::core::algorithms {
namespace {

detail::Rate rate_of(const Gcra::Params& params) { return {params.count, params.period_us}; }

}  // namespace

const char* Gcra::validate(const Params& params) {
  if (params.max_burst < 0) return "max_burst must not be negative";
  if (params.max_burst >= kMaxCost) return "max_burst too large (below 2^50)";
  return detail::validate_schedule(params.count, params.period_us, params.max_burst + 1);
}

Gcra::State Gcra::fresh(const Params& params, TimeUs now) {
  assert(validate(params) == nullptr);
  return State{now, 0};
}

Verdict Gcra::evaluate(const State& state, const Params& params, std::int64_t cost, TimeUs now) {
  assert(cost >= 0 && cost <= kMaxCost);
  const detail::Rate rate = rate_of(params);
  const std::int64_t limit = params.max_burst + 1;
  const detail::Judgement j = detail::judge(state.tat_us, state.tat_frac, rate, limit, cost, now);
  Verdict v;
  v.allowed = j.fits;
  v.limit = limit;
  detail::describe(j, j.fits, rate, v);
  if (!j.fits) {
    const detail::i128 late = j.new_tat - j.size - j.now;  // > 0 ticks
    v.retry_after_us = cost > limit ? -1 : detail::non_negative(detail::ceil_div(late, rate.limit));
    v.excess = detail::non_negative(detail::ceil_div(late, rate.period_us));
  }
  return v;
}

Ticket Gcra::commit(State& state, const Params& params, std::int64_t cost, TimeUs now) {
  assert(cost >= 0 && cost <= kMaxCost);
  detail::advance(state.tat_us, state.tat_frac, rate_of(params), cost, now);
  return kNoTicket;
}

void Gcra::charge_remote(State& state, const Params& params, std::int64_t amount, TimeUs now) {
  commit(state, params, amount, now);
}

bool Gcra::is_idle(const State& state, const Params& params, TimeUs now) {
  return detail::drained(state.tat_us, state.tat_frac, rate_of(params), now);
}

std::int64_t Gcra::cell_seconds(std::int64_t us) {
  assert(us >= 0);
  const std::int64_t whole = us / kUsPerSecond;
  return us % kUsPerSecond >= kUsPerMs ? whole + 1 : whole;
}

Gcra::CellReply Gcra::cell_reply(const Verdict& verdict) {
  CellReply reply;
  reply.limited = verdict.allowed ? 0 : 1;
  reply.limit = verdict.limit;
  reply.remaining = verdict.remaining;
  reply.retry_after_s =
      verdict.allowed || verdict.retry_after_us < 0 ? -1 : cell_seconds(verdict.retry_after_us);
  reply.reset_after_s = cell_seconds(verdict.reset_after_us);
  return reply;
}

}  // namespace rlimit::core::algorithms
