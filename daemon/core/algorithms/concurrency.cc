#include "core/algorithms/concurrency.h"

#include <algorithm>
#include <cassert>

namespace rlimit::core::algorithms {
namespace {

using detail::i128;

constexpr int kIdTimeShift = 12;

// The first lease still live at `now` (expires_us > now).
std::vector<Concurrency::Lease>::const_iterator first_live(const Concurrency::State& state,
                                                           TimeUs now) {
  return std::upper_bound(
      state.leases.begin(), state.leases.end(), now,
      [](TimeUs t, const Concurrency::Lease& lease) { return t < lease.expires_us; });
}

// Slots held by leases from `live` on.
std::int64_t slots_from(const Concurrency::State& state,
                        std::vector<Concurrency::Lease>::const_iterator live) {
  std::int64_t slots = state.slots;
  for (auto it = state.leases.cbegin(); it != live; ++it) slots -= it->slots;
  return slots;
}

void expire(Concurrency::State& state, TimeUs now) {
  const auto live = first_live(state, now);
  state.slots = slots_from(state, live);
  state.leases.erase(state.leases.cbegin(), live);
}

void insert_sorted(Concurrency::State& state, const Concurrency::Lease& lease) {
  const auto at =
      std::upper_bound(state.leases.begin(), state.leases.end(), lease.expires_us,
                       [](TimeUs t, const Concurrency::Lease& l) { return t < l.expires_us; });
  state.leases.insert(at, lease);
}

std::vector<Concurrency::Lease>::iterator find_live(Concurrency::State& state, Ticket id,
                                                    TimeUs now) {
  expire(state, now);
  return std::find_if(state.leases.begin(), state.leases.end(),
                      [id](const Concurrency::Lease& lease) { return lease.id == id; });
}

}  // namespace

const char* Concurrency::validate(const Params& params) {
  if (params.max_in_flight < 1) return "max_in_flight must be at least 1";
  if (params.max_in_flight > kMaxInFlightBound) return "max_in_flight too large (at most 65536)";
  if (params.lease_ttl_us < 1) return "lease_ttl must be positive";
  if (params.lease_ttl_us > kMaxToleranceUs) return "lease_ttl too long (at most 2^60 us)";
  return nullptr;
}

Concurrency::State Concurrency::fresh(const Params& params, TimeUs now) {
  assert(validate(params) == nullptr);
  return State{};
}

std::int64_t Concurrency::in_flight(const State& state, TimeUs now) {
  return slots_from(state, first_live(state, now));
}

Verdict Concurrency::evaluate(const State& state, const Params& params, std::int64_t cost,
                              TimeUs now) {
  assert(cost >= 0 && cost <= kMaxCost);
  const auto live = first_live(state, now);
  const std::int64_t held = slots_from(state, live);
  const i128 wanted = static_cast<i128>(held) + cost;

  Verdict v;
  v.limit = params.max_in_flight;
  v.allowed = wanted <= params.max_in_flight;
  v.remaining = detail::non_negative(params.max_in_flight - (v.allowed ? wanted : held));
  TimeUs last = live == state.leases.end() ? now : state.leases.back().expires_us;
  if (v.allowed && cost > 0) last = std::max(last, now + params.lease_ttl_us);
  v.reset_after_us = detail::non_negative(static_cast<i128>(last) - now);
  if (!v.allowed) {
    v.excess = detail::non_negative(wanted - params.max_in_flight);
    if (cost > params.max_in_flight) {
      v.retry_after_us = -1;
    } else {
      // Leases expire in order; wait for enough of them.
      i128 left = held;
      auto it = live;
      while (left + cost > params.max_in_flight) {
        assert(it != state.leases.end());
        left -= it->slots;
        ++it;
      }
      v.retry_after_us = detail::non_negative(static_cast<i128>((it - 1)->expires_us) - now);
    }
  }
  return v;
}

Ticket Concurrency::commit(State& state, const Params& params, std::int64_t cost, TimeUs now) {
  assert(cost >= 0 && cost <= kMaxCost);
  expire(state, now);
  if (cost == 0) return kNoTicket;
  if (cost > 2 * params.max_in_flight ||
      static_cast<std::int64_t>(state.leases.size()) >= 2 * params.max_in_flight) {
    return kNoTicket;  // beyond what even soft mode admits
  }
  const Ticket from_time = static_cast<Ticket>(std::max<TimeUs>(now, 0)) << kIdTimeShift;
  const Ticket id = std::max(state.last_id + 1, from_time);
  state.last_id = id;
  state.slots += cost;
  insert_sorted(state, Lease{id, now + params.lease_ttl_us, cost});
  return id;
}

void Concurrency::charge_remote(State& state, const Params& params, std::int64_t amount,
                                TimeUs now) {}

bool Concurrency::is_idle(const State& state, const Params& params, TimeUs now) {
  return first_live(state, now) == state.leases.end();
}

bool Concurrency::release(State& state, const Params& params, Ticket id, TimeUs now) {
  if (id == kNoTicket) return false;
  const auto it = find_live(state, id, now);
  if (it == state.leases.end()) return false;
  state.slots -= it->slots;
  state.leases.erase(it);
  return true;
}

bool Concurrency::extend(State& state, const Params& params, Ticket id, TimeUs now) {
  if (id == kNoTicket) return false;
  const auto it = find_live(state, id, now);
  if (it == state.leases.end()) return false;
  Lease lease = *it;
  state.leases.erase(it);
  lease.expires_us = std::max(lease.expires_us, now + params.lease_ttl_us);
  insert_sorted(state, lease);
  return true;
}

}  // namespace rlimit::core::algorithms
