// The sliding window counter (as Cloudflare and many API gateways run it):
// the count of the current aligned window plus the previous window's count
// weighted by how much of the previous window the rolling window still
// overlaps.
//
// At offset e into the current window of length P, a request of cost c is
// admitted iff
//     previous * (P - e) + (current + c) * P <= limit * P,
// compared exactly in 128-bit integers (the ratio (P - e) / P is never
// rounded). This assumes the previous window's requests were spread evenly;
// the true count over the last P can exceed the limit when they were not:
// it stays below 2 * limit (tests/core/algorithms/sliding_window_test.cc
// checks that bound and the accuracy against an exact log).
//
// Windows align to the epoch of the caller's time base, like fixed_window.h.
// Debt: a window's count above the limit is carried into the next window
// (the previous window keeps `limit`), so overspending is repaid; a single
// node in hard mode never carries. A clock that steps back is treated as the
// start of the state's window (the previous window weighs fully): never more
// permissive.
#pragma once

#include <cstdint>

#include "core/algorithms/algorithm.h"

namespace rlimit::core::algorithms {

struct SlidingWindow {
  struct Params {
    std::int64_t limit = 0;      // units per rolling window, >= 1
    std::int64_t period_us = 0;  // window length, > 0

    friend bool operator==(const Params&, const Params&) = default;
  };
  struct State {
    std::int64_t window = 0;    // index of the current window
    std::int64_t previous = 0;  // units in window - 1 (at most limit)
    std::int64_t current = 0;   // units in window (plus carried debt)
  };
  static Replication replication(const Params&) { return Replication::kApproximate; }

  static const char* validate(const Params& params);
  static State fresh(const Params& params, TimeUs now);
  // remaining = floor(limit - estimate) (after the request when admitted);
  // retry_after = the first instant the estimate leaves room for the cost
  // (exact, found in at most three windows); reset_after = until both counts
  // are 0.
  static Verdict evaluate(const State& state, const Params& params, std::int64_t cost, TimeUs now);
  static Ticket commit(State& state, const Params& params, std::int64_t cost, TimeUs now);
  static void charge_remote(State& state, const Params& params, std::int64_t amount, TimeUs now);
  static bool is_idle(const State& state, const Params& params, TimeUs now);

  // The state rolled forward to now's window (never backward, unless both
  // counts are 0).
  static State at(const State& state, const Params& params, TimeUs now);
};

static_assert(Algorithm<SlidingWindow>);

}  // namespace rlimit::core::algorithms
