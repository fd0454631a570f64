// The sliding log: an exact rolling limit from per-request timestamps. At
// most `limit` units in any span of `period_us`: a request at `now` is
// admitted iff the units logged in (now - period_us, now] plus its cost fit.
// Only admitted requests are logged (denied ones do not lock a caller out).
//
// The log is bounded: at most `max_entries` entries per key (requests at the
// same microsecond share one). When admitting would exceed the bound, two
// neighbouring entries are coalesced: the older is moved forward onto the
// newer's timestamp, choosing the pair that costs least (units moved times the
// distance moved). Moving units later only makes them expire later, so the
// log then over-counts, never under-counts: the limit stays conservative, at
// worst by denying early. A single node in hard mode never holds more than
// `limit` entries in the window, so max_entries >= limit keeps it exact.
//
// In a cluster a window may hold more than `limit`: nodes admitted unheard
// of each other, and remote news (charge_remote) brought the rest. Within a
// run (units logged with no empty window between them) a saturated window
// repays that itself: the older entries that leave it soon after, while it
// is over the limit, free no room (a later burst's overshoot stays: not
// carried). Not in a run's first period (a key's cold start, a burst after
// a quiet period), which has no older entries: that overshoot is
// carried: held in the window a quarter of the limit a period (at least one
// unit; at most a limit, or kMaxCarried, in all) from a period after the
// run began (and before, where the window is over the limit anyway), so
// that the periods after admit that much less, as the buckets repay an
// overshoot as a debt. The holding periods count while the run's entries
// are live; what a run leaves waits for the next run, which holds it from
// its start, for up to kCarryWaitsPeriods after the last run began
// (docs/cluster.md, "A log's overshoot, carried"). Alone a node never
// overshoots: nothing is carried.
//
// State is a vector of 16-byte entries and their total, not a small POD: plan
// for 48 + 16 * max_entries bytes per busy key (up to twice that for the
// expired entries awaiting compaction). A decision costs a binary
// search plus the entries expired since the last commit; a denial's
// retry_after walks the oldest entries.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "core/algorithms/algorithm.h"

namespace rlimit::core::algorithms {

struct SlidingLog {
  // Largest max_entries a rule may configure.
  static constexpr std::int64_t kMaxEntriesBound = 1 << 16;

  struct Params {
    std::int64_t limit = 0;        // units per rolling window, >= 1
    std::int64_t period_us = 0;    // window length, > 0
    std::int64_t max_entries = 0;  // log bound per key, in [1, kMaxEntriesBound]

    friend bool operator==(const Params&, const Params&) = default;
  };
  struct Entry {
    TimeUs at_us = 0;
    std::int64_t units = 0;

    friend bool operator==(const Entry&, const Entry&) = default;
  };
  struct State {
    // The log is buffer[head..]: oldest first, strictly increasing at_us;
    // it may hold expired entries until the next commit. Entries before
    // `head` were dropped and await compaction (amortised O(1) per drop).
    std::vector<Entry> buffer;
    std::int64_t total = 0;  // units in the log, at most 2^62
    std::uint32_t head : 30 = 0;
    // The run holds a carried overshoot from its start (one left when the
    // last run ended), not from a period after it.
    std::uint32_t holds_from_start : 1 = 0;
    // The run ended (its entries left) with `carried` still to hold: it
    // waits for the next run (settled, no longer counted down).
    std::uint32_t carry_waits : 1 = 0;
    // An overshoot carried (a run's first period's, or the last run's left
    // waiting): units still to hold, a quarter of the limit a period
    // (held_units); 0: none. At most kMaxCarried (with the bits above, in
    // the padding after the total: the state is 48 bytes).
    std::int32_t carried = 0;
    // The current run began then: its first units were logged into an
    // empty window.
    TimeUs run_from_us = 0;
  };
  // The most units carried (a limit, or this if less).
  static constexpr std::int64_t kMaxCarried = std::numeric_limits<std::int32_t>::max();
  // A carry left when a run ends waits for the next run for this many
  // periods from the run's start; a key quiet for longer forgets it.
  static constexpr std::int64_t kCarryWaitsPeriods = 16;
  static Replication replication(const Params&) { return Replication::kApproximate; }

  static const char* validate(const Params& params);
  static State fresh(const Params& params, TimeUs now);
  // remaining = limit - units in the window (after the request when
  // admitted); retry_after = when enough of the oldest entries expire;
  // reset_after = when the newest entry expires.
  static Verdict evaluate(const State& state, const Params& params, std::int64_t cost, TimeUs now);
  // Logs `cost` at now (at the newest entry's time if the clock went back,
  // so the log stays sorted and conservative) and drops expired entries.
  static Ticket commit(State& state, const Params& params, std::int64_t cost, TimeUs now);
  // Logs remote consumption at `at`, when it happened (the Limiter passes
  // the time the news says, docs/cluster.md "The age of news"; the time it
  // learned it when the news has no age), in its place in the log. An
  // entry already out of the window is dropped at the next expiry.
  static void charge_remote(State& state, const Params& params, std::int64_t amount, TimeUs at);
  // The same, where this node's clock reads `now` (>= at): what the charge
  // takes the window at `now` beyond the limit, in the run's first period,
  // is carried (above).
  static void charge_remote(State& state, const Params& params, std::int64_t amount, TimeUs at,
                            TimeUs now);
  static bool is_idle(const State& state, const Params& params, TimeUs now);

  // Units logged in (now - period_us, now] (entries the clock has not reached
  // yet count too), not counting a carried overshoot's.
  static std::int64_t units_in_window(const State& state, const Params& params, TimeUs now);
  // A carried overshoot's units held in the window at `now`.
  static std::int64_t held_units(const State& state, const Params& params, TimeUs now);
  // The most held in one period: a quarter of the limit, at least one unit.
  static std::int64_t held_per_period(const Params& params) {
    return std::max<std::int64_t>(1, params.limit / 4);
  }
  // The log, oldest first.
  static std::span<const Entry> log(const State& state) {
    return std::span<const Entry>(state.buffer).subspan(state.head);
  }
};

static_assert(Algorithm<SlidingLog>);

}  // namespace rlimit::core::algorithms
