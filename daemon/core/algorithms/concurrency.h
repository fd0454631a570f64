// A concurrency limit: at most `max_in_flight` units held at once per key.
//
// An admitted acquire takes `cost` slots under one lease and commit() returns
// the lease id; release() gives the slots back. A lease not released within
// `lease_ttl_us` of its acquisition (or last extend()) expires, so a client
// that crashes cannot leak slots forever. retry_after is when enough leases
// would expire if none were released early: an upper bound on the wait.
//
// Lease ids are unique per key and increase: max(previous + 1, now << 12),
// so a key forgotten when idle and made again later (at a larger now) never
// reissues an id a stale client still holds (REQUIRES now in [0, 2^51)).
//
// Local only: in-flight is a level that goes down on release, which the
// cluster's grow-only consumption counters cannot express; charge_remote()
// ignores its input and the config must refuse concurrency rules in cluster
// mode. State: 40 bytes plus 24 per live lease, at most 2 * max_in_flight
// leases (soft mode may admit up to max_in_flight beyond the limit). A
// decision costs a binary search plus the leases expired since the last
// change; release and extend scan the leases.
#pragma once

#include <cstdint>
#include <vector>

#include "core/algorithms/algorithm.h"

namespace rlimit::core::algorithms {

struct Concurrency {
  static constexpr std::int64_t kMaxInFlightBound = 1 << 16;

  struct Params {
    std::int64_t max_in_flight = 0;  // slots, in [1, kMaxInFlightBound]
    std::int64_t lease_ttl_us = 0;   // > 0

    friend bool operator==(const Params&, const Params&) = default;
  };
  struct Lease {
    Ticket id = kNoTicket;
    TimeUs expires_us = 0;
    std::int64_t slots = 0;

    friend bool operator==(const Lease&, const Lease&) = default;
  };
  struct State {
    std::vector<Lease> leases;  // sorted by expires_us; may hold expired ones
    Ticket last_id = kNoTicket;
    std::int64_t slots = 0;  // held by `leases`, expired ones included
  };
  static Replication replication(const Params&) { return Replication::kLocalOnly; }

  static const char* validate(const Params& params);
  static State fresh(const Params& params, TimeUs now);
  // allowed iff live slots + cost <= max_in_flight; remaining = slots left;
  // reset_after = until the last live lease expires.
  static Verdict evaluate(const State& state, const Params& params, std::int64_t cost, TimeUs now);
  // Takes `cost` slots; returns the lease id, kNoTicket for cost 0 (nothing
  // held) or beyond what even soft mode admits (a cost above 2 *
  // max_in_flight, or 2 * max_in_flight leases held): only a caller that
  // commits without evaluating gets there.
  static Ticket commit(State& state, const Params& params, std::int64_t cost, TimeUs now);
  // Ignored: concurrency is local only.
  static void charge_remote(State& state, const Params& params, std::int64_t amount, TimeUs now);
  static bool is_idle(const State& state, const Params& params, TimeUs now);

  // Frees a live lease. False when `id` is unknown, expired or released.
  static bool release(State& state, const Params& params, Ticket id, TimeUs now);
  // Restarts a live lease's TTL from now (a heartbeat). False when unknown or
  // expired.
  static bool extend(State& state, const Params& params, Ticket id, TimeUs now);
  // Slots held by live leases at `now`.
  static std::int64_t in_flight(const State& state, TimeUs now);
};

static_assert(Algorithm<Concurrency>);

}  // namespace rlimit::core::algorithms
