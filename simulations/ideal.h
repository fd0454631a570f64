// The perfect limiter the cluster is measured against: one core::Limiter
// (a TokenBucket per key, all-or-nothing over every matched rule) on the true
// virtual clock, fed every request any node received. It is what a single
// node with no network would decide; the cluster's admissions are compared
// with its admissions.
#pragma once

#include <memory>

#include "core/limiter.h"
#include "scenario.h"

namespace rlimit::sim {

class Ideal {
 public:
  explicit Ideal(const core::RuleSet& rules);
  // True if the perfect limiter admits `input` at virtual time `t`.
  bool check(const core::CheckInput& input, TimeUs t);
  // The rules' verdicts of the last check (keys and leases valid until the
  // next call).
  const core::CheckOutput& last() const { return out_; }
  // Forgets the keys `input` touches (a reset).
  void reset(const core::CheckInput& input, TimeUs t);
  // Releases a concurrency lease the ideal handed out.
  void release(std::string_view key, std::uint64_t lease, TimeUs t);

  // Every clock the simulation hands to the core is offset by this, so no
  // time is negative and incarnations look like wall-clock microseconds.
  static constexpr TimeUs kEpochUs = 1'700'000'000'000'000;

 private:
  core::Limiter limiter_;
  core::CheckOutput out_;
  TimeUs next_sweep_us_ = 0;
};

}  // namespace rlimit::sim
