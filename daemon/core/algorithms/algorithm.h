// The common shape of every rate-limit algorithm the Limiter can dispatch to,
// and the exact integer arithmetic they share.
//
// An algorithm is a struct of static functions over two plain types: `Params`
// (per rule, immutable, checked once by validate()) and `State` (per key; small
// and trivially copyable except where noted: the sliding log and concurrency
// need bounded heap storage). Time is an argument, in microseconds on the
// caller's clock; nothing here reads a clock, allocates beyond a key's own
// bounded state, or uses floating point in a decision.
//
// The protocol of one check, for all-or-nothing over several rules:
//   1. For every matched rule, evaluate(state, params, cost, now): the verdict
//      as if the request were admitted, without touching the state.
//   2. Apply the rule's throttle mode to each verdict (throttle.h).
//   3. If every rule allows, commit(state, params, cost, now) on each rule whose
//      decision says to charge. commit consumes unconditionally (it may push
//      the state over its limit: soft mode), so it needs no prior evaluate.
// Consumption learned from peers (the ledger's per-origin counters) goes in
// through charge_remote(state, params, amount, now), which may push the state
// into debt; debt is repaid the way each algorithm refills. is_idle() is true
// when the state is indistinguishable from fresh(params, now) for every future
// call, so the key (and, once peers agree, its counters) may be forgotten.
// Optional: note_share_refusal(state, params, now), told when this node's
// fair share refused a request the algorithm would have admitted (the
// sliding window credits that room: sliding_window.h), and
// note_refusal(state, params, now), told when the algorithm refused one (a
// sliding window's overshoot is owed only as far as its estimate still holds
// it then).
//
// Every call must pass the Params the state was made with; a rule whose
// parameters change gets new keys (its fingerprint changes). Costs are in
// [0, kMaxCost]; `now` in [-kMaxTimeUs, kMaxTimeUs]. Not thread-safe.
#pragma once

#include <concepts>
#include <cstdint>
#include <limits>

#include "core/time.h"
#include "core/token_bucket.h"  // kMaxTokens, kMaxPeriodUs: one set of bounds for all

namespace rlimit::core::algorithms {

// Largest cost, limit or capacity (2^50), and largest period or window (about
// 100 years): the token bucket's bounds, so every product fits in 128 bits.
inline constexpr std::int64_t kMaxCost = kMaxTokens;
inline constexpr std::int64_t kMaxPeriod = kMaxPeriodUs;
// |now| stays below this (about 73,000 years of microseconds).
inline constexpr TimeUs kMaxTimeUs = TimeUs{1} << 61;
// Furthest ahead of `now` any virtual time (a TAT, a next free ticket) is
// pushed; remote charges beyond it saturate. The only place an algorithm can
// forget consumption, and only consumption due more than 73,000 years out.
inline constexpr std::int64_t kMaxAheadUs = std::int64_t{1} << 61;
// Largest tolerance any rule may configure (a DVT, a warm-up, a burst window):
// about 36,000 years, so tolerance plus a cost stays below kMaxAheadUs.
inline constexpr std::int64_t kMaxToleranceUs = std::int64_t{1} << 60;

// What commit() hands back: a concurrency lease id, 0 for every other algorithm.
using Ticket = std::uint64_t;
inline constexpr Ticket kNoTicket = 0;

// How a rule merges across a cluster through charge_remote(); the bounds are
// in docs/algorithms.md. Remote consumption is charged when it is learned.
enum class Replication {
  // A remote charge has the effect of a local commit: the state follows total
  // consumption, debt is repaid, the long-run admitted rate is the limit, and
  // the short-run excess is the token bucket's (docs/cluster.md).
  kExact,
  // The long-run rate is right too, but what the algorithm promises per
  // aligned window, per rolling span, or as a spacing between requests holds
  // only up to the staleness (and clock skew) between nodes.
  kApproximate,
  // The state is not a function of consumption (a release gives back); the
  // config must refuse such rules in cluster mode.
  kLocalOnly,
};
const char* replication_name(Replication replication);

// How one algorithm judged one request. Describes the state after admitting
// the request when `allowed`, and the state as it is when not.
struct Verdict {
  bool allowed = false;
  std::int64_t limit = 0;           // the capacity judged against, in cost units
  std::int64_t remaining = 0;       // >= 0, whole units
  std::int64_t retry_after_us = 0;  // 0 when allowed; -1 when this cost can never pass
  std::int64_t reset_after_us = 0;  // until the state is fresh again (0: it is)
  // Shaper and smooth: how long the request waits before proceeding once
  // admitted (set when refused too, for soft mode); 0 for the others.
  std::int64_t delay_us = 0;
  // When denied: by how many cost units admitting would overshoot the limit
  // (time-based denials are converted at the algorithm's rate, rounded up).
  // Soft mode admits while this stays within its allowance. 0 when allowed.
  std::int64_t excess = 0;

  friend bool operator==(const Verdict&, const Verdict&) = default;
};

// The shape every algorithm has; the Limiter dispatches over these.
template <class A>
concept Algorithm = requires(typename A::State& state, const typename A::State& cstate,
                             const typename A::Params& params, std::int64_t cost, TimeUs now) {
  { A::validate(params) } -> std::same_as<const char*>;  // nullptr when usable
  { A::replication(params) } -> std::same_as<Replication>;
  { A::fresh(params, now) } -> std::same_as<typename A::State>;
  { A::evaluate(cstate, params, cost, now) } -> std::same_as<Verdict>;
  { A::commit(state, params, cost, now) } -> std::same_as<Ticket>;
  { A::charge_remote(state, params, cost, now) } -> std::same_as<void>;
  { A::is_idle(cstate, params, now) } -> std::same_as<bool>;
};

namespace detail {

using i128 = __int128;

inline bool fits_64(i128 v) { return v == static_cast<std::int64_t>(v); }

// Division rounding down, b > 0. Most operands fit in 64 bits, where the
// division is several times cheaper than the 128-bit library call.
inline i128 floor_div(i128 a, i128 b) {
  if (fits_64(a) && fits_64(b)) {
    const auto x = static_cast<std::int64_t>(a);
    const auto y = static_cast<std::int64_t>(b);
    std::int64_t q = x / y;
    if (x % y != 0 && x < 0) --q;
    return q;
  }
  i128 q = a / b;
  if (a % b != 0 && a < 0) --q;
  return q;
}

inline i128 ceil_div(i128 a, i128 b) { return -floor_div(-a, b); }  // b > 0

inline std::int64_t saturate(i128 v) {
  constexpr i128 kMax = std::numeric_limits<std::int64_t>::max();
  constexpr i128 kMin = std::numeric_limits<std::int64_t>::min();
  return static_cast<std::int64_t>(v > kMax ? kMax : (v < kMin ? kMin : v));
}

inline std::int64_t non_negative(i128 v) { return v < 0 ? 0 : saturate(v); }

// A time with a fraction: us + frac / den microseconds, 0 <= frac < den,
// handled as the single integer us * den + frac ("ticks" of 1/den us).
inline i128 to_ticks(TimeUs us, std::int64_t frac, std::int64_t den) {
  return static_cast<i128>(us) * den + frac;
}

struct Split {
  TimeUs us;
  std::int64_t frac;
};

inline Split from_ticks(i128 ticks, std::int64_t den) {
  const i128 us = floor_div(ticks, den);
  return {static_cast<TimeUs>(us), static_cast<std::int64_t>(ticks - us * den)};
}

// Ticks from `now_ticks` to `ticks`, as whole microseconds rounded up (a
// caller told to wait this long never arrives early); 0 when not ahead.
inline std::int64_t ticks_to_us_ceil(i128 ticks, i128 now_ticks, std::int64_t den) {
  return ticks <= now_ticks ? 0 : non_negative(ceil_div(ticks - now_ticks, den));
}

}  // namespace detail
}  // namespace rlimit::core::algorithms
