// GCRA, the generic cell rate algorithm, with redis-cell's parameters and
// answers (CL.THROTTLE key max_burst count period [quantity]).
//
// `count` requests per `period_us` with a burst of max_burst + 1 at once. The
// state is the theoretical arrival time (TAT) in microseconds plus a remainder
// in 1/count of a microsecond, so the emission interval period_us / count is
// exact however it divides; redis-cell truncates it to a nanosecond. A request
// of quantity q is allowed when max(TAT, now) + q * T - DVT <= now, where the
// delay variation tolerance DVT = (max_burst + 1) * T. A quantity of 0 peeks.
#pragma once

#include <cstdint>

#include "core/algorithms/algorithm.h"

namespace rlimit::core::algorithms {

struct Gcra {
  struct Params {
    std::int64_t max_burst = 0;  // >= 0; limit = max_burst + 1
    std::int64_t count = 1;      // per period, >= 1
    std::int64_t period_us = 0;  // > 0

    friend bool operator==(const Params&, const Params&) = default;
  };
  struct State {
    TimeUs tat_us = 0;
    std::int64_t tat_frac = 0;  // in [0, count): 1/count of a microsecond
  };
  static Replication replication(const Params&) { return Replication::kExact; }

  static const char* validate(const Params& params);
  static State fresh(const Params& params, TimeUs now);
  // limit = max_burst + 1; remaining and reset_after as redis-cell computes
  // them (remaining = floor((DVT - ttl) / T), reset_after = ttl, rounded up to
  // a microsecond); retry_after = -1 when quantity > limit.
  static Verdict evaluate(const State& state, const Params& params, std::int64_t cost, TimeUs now);
  static Ticket commit(State& state, const Params& params, std::int64_t cost, TimeUs now);
  static void charge_remote(State& state, const Params& params, std::int64_t amount, TimeUs now);
  static bool is_idle(const State& state, const Params& params, TimeUs now);

  // The five integers CL.THROTTLE replies with: limited (0/1), limit,
  // remaining, retry_after (seconds, -1 when allowed or never), and
  // reset_after (seconds), both in cell_seconds.
  struct CellReply {
    std::int64_t limited = 0;
    std::int64_t limit = 0;
    std::int64_t remaining = 0;
    std::int64_t retry_after_s = -1;
    std::int64_t reset_after_s = 0;

    friend bool operator==(const CellReply&, const CellReply&) = default;
  };
  static CellReply cell_reply(const Verdict& verdict);
  // A wait in whole seconds as redis-cell (since 0.3.1) replies with it: a
  // partial second of at least one millisecond counts as a whole one, so a
  // caller never retries early; less than a millisecond is dropped, as its
  // durations are compared in whole milliseconds. `us` >= 0.
  static std::int64_t cell_seconds(std::int64_t us);
};

static_assert(Algorithm<Gcra>);

}  // namespace rlimit::core::algorithms
