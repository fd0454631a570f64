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
//
// Overshoot (a cluster's debt below the limit): news of others' consumption
// that arrives late can put the estimate above the limit while the window's
// count is still below it: the cluster admitted, by then, more than one
// limiter with all the news could have. If demand goes on, the window
// refuses until the estimate is back under the limit, as one limiter would,
// and admits again: nothing is owed. If demand stops (a burst), the excess
// stands; a window weighs only 1 - e in the next, so it would be repaid
// only in part (aligned bursts on 50 nodes settled 2.5% above the ideal:
// docs/accuracy.md, "Demand at every node at once"). So the estimate's
// largest excess that news reveals after the window last admitted (an
// admission, own or in news within the limit, clears it) is carried like a
// count above the limit: at the window's edge it moves from the previous
// window into the next window's count (weighted 1), and is repaid in full.
// What is carried is the excess as of the window's last refusal after it
// (note_refusal: demand pressing, the room that opened since was refused,
// and that repaid as much), not bounded by the room the window would have
// left at its end: a burst early in the window ends there with its count
// below the limit and its excess unrepaid (`coldkeys` on 5 / 20 / 50
// nodes, 60 s: +1.14 / +1.34 / +2.21% over the ideal with that bound,
// docs/cluster.md, "A window's overshoot, as of its last refusal"). A
// single node in hard mode never overshoots: no change there.
//
// Credit (the overshoot's mirror): a node's fair share (core/fair_share.h)
// can refuse a request the window had room for; if demand then stops, the
// cluster admitted less than one limiter would have, and a window does not
// keep unused room the way a bucket keeps unspent tokens. Carrying only
// overshoots would then repay every burst that came out above the room and
// none that came out below: rounding many small shares puts a burst a few
// requests either side of the room, and the one-sided carry turned that
// noise into a loss (aligned bursts on 200 nodes, 40 s: -0.94%, seeds 1-8;
// docs/cluster.md, "Fair shares": the credit). So the room a fair share refused,
// as known then (note_share_refusal), is noted as a credit, lowered by
// every consumption counted after it (own or in news: the room it took) and
// replaced by an overshoot that later news reveals; at the edge it moves
// from the next window's count into the previous one's (counted as if
// admitted where it was refused, and given back in the next window), as
// far as the previous count stays within the limit.
//
// Kept in 12 signed bits (`carry_steps`: > 0 an overshoot, < 0 a credit):
// exact for limits up to 2047, else in steps of limit / 2047 (an overshoot
// rounded up when stored and down when carried, a credit rounded down).
#pragma once

#include <cstdint>

#include "core/algorithms/algorithm.h"
#include "core/algorithms/carry_steps.h"

namespace rlimit::core::algorithms {

struct SlidingWindow {
  struct Params {
    std::int64_t limit = 0;      // units per rolling window, >= 1
    std::int64_t period_us = 0;  // window length, > 0

    friend bool operator==(const Params&, const Params&) = default;
  };
  // Steps of the stored overshoot or credit (-kCarrySteps..kCarrySteps).
  static constexpr std::int64_t kCarrySteps = detail::kCarrySteps;
  struct State {
    std::int64_t window = 0;  // index of the current window
    // Units in window - 1 (at most limit <= 2^50); a bit-field so that the
    // carry fits beside it and the state in a 24-byte StateCell.
    std::int64_t previous : 52 = 0;
    // What the window's edge carries, in steps (see above): > 0 the largest
    // overshoot so far, < 0 a credit.
    std::int64_t carry_steps : 12 = 0;
    // Units in window, plus carried debt or an overshoot, less a credit
    // (then possibly below 0).
    std::int64_t current = 0;
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
  // Counts remote consumption that happened at `now` (the Limiter passes
  // the time the news says: docs/cluster.md, "The age of news") in its
  // window, or in the state's if that is later, and notes the overshoot it
  // reveals as of then (above); news from before the state's window notes
  // nothing.
  static void charge_remote(State& state, const Params& params, std::int64_t amount, TimeUs now);
  static bool is_idle(const State& state, const Params& params, TimeUs now);
  // This node's fair share refused at `now` a request the window had room
  // for: the room, as the state knows it now, is noted as a credit (above),
  // replacing what was noted before.
  static void note_share_refusal(State& state, const Params& params, TimeUs now);
  // The window refused a request at `now`: a noted overshoot is lowered to
  // the estimate's excess now (above); nothing else changes, and a state
  // with no overshoot is not written.
  static void note_refusal(State& state, const Params& params, TimeUs now);

  // The state rolled forward to now's window (never backward, unless both
  // counts are 0).
  static State at(const State& state, const Params& params, TimeUs now);
};

static_assert(Algorithm<SlidingWindow>);
static_assert(sizeof(SlidingWindow::State) == 24);

}  // namespace rlimit::core::algorithms
