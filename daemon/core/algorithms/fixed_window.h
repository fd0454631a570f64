// The fixed window counter: at most `limit` units per aligned window of
// `period_us`.
//
// Windows are [k * period_us, (k + 1) * period_us) on the caller's time base:
// aligned to its epoch, so nodes share windows only if they share the time
// base (docs/algorithms.md: the daemon's steady clock does not; clock skew
// between nodes shifts their windows). Admits iff count + cost <= limit; a
// burst of up to 2 * limit can pass across a window edge.
//
// Debt: a count above the limit (remote charges, soft mode) is carried into
// the following windows, `limit` repaid per window, so a cluster that
// overspent one window under-spends the next by as much. A single node in
// hard mode never exceeds the limit, so it behaves as the textbook counter.
// A clock that steps back into an earlier window keeps counting in the later
// one: nothing is reset (an empty count simply follows the clock).
#pragma once

#include <cstdint>

#include "core/algorithms/algorithm.h"

namespace rlimit::core::algorithms {

struct FixedWindow {
  struct Params {
    std::int64_t limit = 0;      // units per window, >= 1
    std::int64_t period_us = 0;  // window length, > 0

    friend bool operator==(const Params&, const Params&) = default;
  };
  struct State {
    std::int64_t window = 0;  // index of the window `count` belongs to
    std::int64_t count = 0;   // units charged in it (plus carried debt)
  };
  static Replication replication(const Params&) { return Replication::kApproximate; }

  static const char* validate(const Params& params);
  static State fresh(const Params& params, TimeUs now);
  // remaining = limit - count (after the request when admitted); reset_after =
  // until the count is back to 0 (the next edge, or later with debt);
  // retry_after = the first window edge where the cost fits, -1 if cost > limit.
  static Verdict evaluate(const State& state, const Params& params, std::int64_t cost, TimeUs now);
  static Ticket commit(State& state, const Params& params, std::int64_t cost, TimeUs now);
  static void charge_remote(State& state, const Params& params, std::int64_t amount, TimeUs now);
  static bool is_idle(const State& state, const Params& params, TimeUs now);

  // The state as seen at `now`: rolled into now's window (with carry), or left
  // in its own window when the clock is behind it and the count is not 0.
  static State at(const State& state, const Params& params, TimeUs now);
};

static_assert(Algorithm<FixedWindow>);

}  // namespace rlimit::core::algorithms
