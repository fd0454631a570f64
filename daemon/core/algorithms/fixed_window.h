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
//
// Credit (the debt's mirror, as the sliding window's: sliding_window.h): a
// node's fair share (core/fair_share.h) can refuse a request the window had
// room for; if demand then stops (a burst), the cluster admitted less than
// one limiter would have, and the window's edge drops the unused room while
// it carries every overspend as a debt. Rounding many small shares puts a
// burst a few requests either side of the room, and that one-sided carry
// turned the noise into a loss (aligned bursts on 200 nodes, 60 s: -0.35%
// to -1.28%, seeds 1-4; docs/cluster.md, "Fair shares"). So the room a share
// refused, as known then (note_share_refusal), is noted as a credit, lowered
// by every consumption counted after it (own or in news: the room it took);
// the next window starts that far below 0 (it is given back there, and
// lapses with that window if unused). A single node never notes one (no
// share gates it): it behaves as the textbook counter.
#pragma once

#include <cstdint>

#include "core/algorithms/algorithm.h"
#include "core/algorithms/carry_steps.h"

namespace rlimit::core::algorithms {

struct FixedWindow {
  struct Params {
    std::int64_t limit = 0;      // units per window, >= 1
    std::int64_t period_us = 0;  // window length, > 0

    friend bool operator==(const Params&, const Params&) = default;
  };
  struct State {
    std::int64_t window = 0;  // index of the window `count` belongs to
    // Units charged in it, plus carried debt (at most 2^51 - 1), less a
    // credit given back (then possibly below 0, down to -limit); a
    // bit-field, so that the credit fits beside it in 16 bytes.
    std::int64_t count : 52 = 0;
    // Room a share refused in `window` (above), in steps of
    // core/algorithms/carry_steps.h (0..kCarrySteps): exact for limits up
    // to 2047, else rounded down.
    std::int64_t credit_steps : 12 = 0;
  };
  static Replication replication(const Params&) { return Replication::kApproximate; }

  static const char* validate(const Params& params);
  static State fresh(const Params& params, TimeUs now);
  // remaining = limit - count, at most limit (after the request when
  // admitted); reset_after =
  // until the count is back to 0 (the next edge, or later with debt);
  // retry_after = the first window edge where the cost fits, -1 if cost > limit.
  static Verdict evaluate(const State& state, const Params& params, std::int64_t cost, TimeUs now);
  static Ticket commit(State& state, const Params& params, std::int64_t cost, TimeUs now);
  static void charge_remote(State& state, const Params& params, std::int64_t amount, TimeUs now);
  static bool is_idle(const State& state, const Params& params, TimeUs now);
  // This node's fair share refused at `now` a request the window had room
  // for: that room, as the state knows it now, is noted as a credit (above),
  // replacing what was noted before.
  static void note_share_refusal(State& state, const Params& params, TimeUs now);

  // The state as seen at `now`: rolled into now's window (with carry), or left
  // in its own window when the clock is behind it and the count is not 0.
  static State at(const State& state, const Params& params, TimeUs now);
};

static_assert(Algorithm<FixedWindow>);
static_assert(sizeof(FixedWindow::State) == 16);

}  // namespace rlimit::core::algorithms
